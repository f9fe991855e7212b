"""Output channels of the attention-indexed model as objects (THEORY §1, §3, §8, §10).

A channel maps a batch of logit matrices ``h`` (shape ``(..., T, T)``) to outputs:

* :class:`Seq2Lab` (``"seq2lab"``): ``sigma(beta h)``, the row-wise softmax, ``(..., T, T)``;
* :class:`Seq2Seq` (``"seq2seq"``): ``sigma(beta h) X / sqrt(d)``, ``(..., T, d)`` (value =
  identity; the ``1/sqrt(d)`` makes its square loss equal the seq2lab one to leading order, so
  the two share one theory);
* :class:`Linear` (``"linear"``): ``h`` itself (no softmax, no temperature).

The per-sequence loss is ``||yhat - y||_F^2`` summed over one sequence's output
(:func:`squared_error`). A channel object owns everything that depends on the channel, so that
simulation, training, the state evolution, AMP and the Bayes baseline share one definition:

* validation of ``(T, beta, beta0)``;
* the forward map (numpy or torch) used by data generation, training and evaluation, and the
  training loss's derivative in the logits;
* the output side of the state evolution in the ``K = T(T+1)/2`` field coordinates of
  :mod:`singlehead.attention_maps` (``M(v)`` symmetric, diagonal times ``sqrt 2``): the labels
  made from teacher fields, the fit loss ``ell(h) = ||labels - chan_beta(M(h))||_F^2`` with its
  gradient and Hessian, the proximal map and its starting points, closed forms where they exist;
* the logits that reproduce observed labels (AMP's starts, the Bayes denoiser);
* the channel's counts for the thresholds (informative directions ``c_T``).

New channels subclass :class:`Channel` and are registered with :func:`register_channel`; the
base class supplies a generic Newton prox, quadrature test errors and an autograd training
loss, so a new channel needs only its forward map and its fit loss. Names are resolved once, by
:func:`get_channel`, where a problem is built (``Problem``, the CLI, JSON and CSV readers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np

from .attention_maps import (
    mat_to_vec,
    shift_direction,
    softmax_fit_loss,
    softmax_rows,
    vec_to_mat,
)
from .prox import ProxResult, interpolating_start, prox_linear, prox_newton

Array = Any  # numpy.ndarray or torch.Tensor

__all__ = ["Channel", "Seq2Lab", "Seq2Seq", "Linear", "register_channel", "get_channel", "channel_names",
           "squared_error"]


def _is_torch(x: Array) -> bool:
    return type(x).__module__.startswith("torch")


def _softmax(z: Array) -> Array:
    return z.softmax(dim=-1) if _is_torch(z) else softmax_rows(z)


def squared_error(yhat: Array, y: Array) -> Array:
    """Per-sequence squared Frobenius error ``||yhat - y||_F^2`` (sum over the last two axes).

    The library's loss and test-error convention (THEORY §1): summed over all entries of one
    sequence's output, not averaged; works on numpy arrays and torch tensors.

    Examples
    --------
    >>> import numpy as np
    >>> float(squared_error(np.ones((1, 2, 2)), np.zeros((1, 2, 2)))[0])
    4.0
    """
    r = yhat - y
    return (r * r).sum(dim=(-2, -1)) if _is_torch(r) else (r * r).sum(axis=(-2, -1))


@dataclass(frozen=True)
class Channel:
    """Base class of output channels (see the module docstring for what a channel owns).

    Subclasses set ``name`` and implement :meth:`attention` (the ``T x T`` map of the logit matrix,
    numpy or torch) and :meth:`fit_loss` (the squared Frobenius loss in the ``K = T(T+1)/2`` field
    coordinates of the state evolution, diagonal fields carrying ``sqrt 2``); the rest has generic
    defaults. Instances are immutable and compare by type and fields; register a subclass with
    :func:`register_channel` to use its name in ``Problem`` and the CLI.

    Examples
    --------
    >>> from singlehead.channels import get_channel
    >>> ch = get_channel("seq2lab")
    >>> ch.name, ch.informative_directions(T=2)
    ('seq2lab', 2)
    """

    name: ClassVar[str] = ""
    #: The prox objective has a single minimum (no branches to track, no jumps).
    convex_prox: ClassVar[bool] = False
    #: The output side needs quadrature nodes (``False``: closed forms for every expectation).
    needs_quadrature: ClassVar[bool] = True

    def __str__(self) -> str:
        return self.name

    def to_spec(self) -> str:
        """What ``Problem.to_dict`` stores: the registered name."""
        return self.name

    # ---------------------------------------------------------------- validation
    def validate(self, T: int, beta: float, beta0: float) -> None:
        """Raise ``ValueError`` naming the parameter when ``(T, beta, beta0)`` is invalid here."""

    # ---------------------------------------------------------------- forward map
    def attention(self, h: Array, beta: float) -> Array:
        """The ``T x T`` part of the channel for logits ``h`` (``(..., T, T)``), numpy or torch."""
        raise NotImplementedError

    def output(self, h: Array, beta: float, X: Array | None = None) -> Array:
        """Full channel output for logits ``h`` and tokens ``X`` (``(..., T, d)``); default the attention."""
        return self.attention(h, beta)

    def attention_labels(self, y: np.ndarray, X: np.ndarray) -> np.ndarray:
        """The ``T x T`` labels behind raw outputs ``y`` (AMP's output step); default ``y`` itself."""
        return y

    def labels_from_attention(self, Y: np.ndarray) -> np.ndarray:
        """``T x T`` labels in :meth:`fit_loss`'s form (default: the matrices themselves)."""
        return Y

    # ---------------------------------------------------------------- training (torch)
    def training_constants(self, X: Any, y: Any) -> tuple[Any, Any, float]:
        """``(target, M, const)`` per dataset for :meth:`loss_and_logit_grad` (default ``(y, None, 0)``)."""
        return y, None, 0.0

    def loss_and_logit_grad(self, h: Any, target: Any, M: Any, beta: float) -> tuple[Any, Any] | None:
        """Summed data loss of a chunk (float64) and its gradient ``G = dL/dh`` (torch tensors), in
        closed form; ``None`` (the default): the trainer differentiates :meth:`attention` by autograd."""
        return None

    # ---------------------------------------------------------------- state evolution: output side
    def informative_directions(self, T: int) -> int:
        """``c_T``: field directions the labels determine (THEORY §4); default all ``K``."""
        return T * (T + 1) // 2

    def logit_scale(self, beta: float, beta0: float) -> float:
        """The scale ``rho0`` that makes the student's logits reproduce the teacher's outputs."""
        return beta0 / beta

    def labels(self, y: np.ndarray, T: int, beta0: float) -> np.ndarray:
        """Labels ``chan_beta0(M(y))`` of teacher fields ``y`` (``(N, K)``), in :meth:`fit_loss`'s form."""
        return self.attention(vec_to_mat(y, T), beta0)

    def fit_loss(self, h: np.ndarray, labels: np.ndarray, beta: float, order: int = 2
                 ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """``ell(h) = ||labels - chan_beta(M(h))||_F^2`` per node, with gradient and Hessian up to ``order``."""
        raise NotImplementedError

    def prox_starts(self, z: np.ndarray, y: np.ndarray, *, T: int, beta: float, beta0: float) -> list[np.ndarray]:
        """Default Newton starts of the prox for student fields ``z`` and teacher fields ``y``."""
        return [z]

    def prox(self, z: np.ndarray, y: np.ndarray, Sigma: Any, *, T: int, beta: float, beta0: float,
             starts: Sequence[np.ndarray] | None = None) -> ProxResult:
        """Global prox ``argmin_h ||h - z||^2/(2 Sigma) + ell(h)`` for labels of teacher fields ``y``."""
        return self.prox_labels(z, self.labels(y, T, beta0), Sigma, beta=beta,
                                starts=self.prox_starts(z, y, T=T, beta=beta, beta0=beta0) if starts is None else starts)

    def prox_labels(self, z: np.ndarray, labels: np.ndarray, Sigma: Any, *, beta: float,
                    starts: Sequence[np.ndarray] | None = None) -> ProxResult:
        """The prox for given labels (AMP's output step): safeguarded Newton from each start."""
        return prox_newton(z, labels, Sigma, lambda h, lab, order: self.fit_loss(h, lab, beta, order), starts=starts)

    def closed_form_output_side(self, alpha: float, T: int, Q0: float, q: float, m: float, Sigma: float,
                                noise: float) -> tuple[float, float, float, float] | None:
        """``(qhat, mhat, Sigmahat, train_error)`` in closed form, or ``None`` (quadrature)."""
        return None

    def closed_form_test_errors(self, T: int, Q0: float, q: float, m: float, noise: float) -> dict[str, float] | None:
        """Test errors in closed form, or ``None`` (quadrature of :meth:`attention`)."""
        return None

    def fit_hessian_constant(self) -> float | None:
        """``c`` when the fit loss's Hessian is ``c I`` everywhere (closed-form replicon), else ``None``."""
        return None

    # ---------------------------------------------------------------- AMP and Bayes
    def label_logits(self, labels: np.ndarray, beta: float) -> np.ndarray | None:
        """Field ``K``-vectors whose outputs at ``beta`` are the ``T x T`` ``labels`` (``None``: unknown)."""
        return None

    def observed_projection(self, T: int) -> np.ndarray:
        """Projector on the field directions the labels reveal (Bayes output step); default identity."""
        return np.eye(T * (T + 1) // 2)


@dataclass(frozen=True)
class Seq2Lab(Channel):
    """Row-wise softmax ``sigma(beta h)``: the label of a sequence is its attention matrix.

    The labels fix the logits up to one shift of every row, so ``c_T = K - 1`` field directions are
    informative (THEORY §4); the prox is non-convex and is started from ``z``, the interpolating
    point and their midpoint.

    Examples
    --------
    >>> import numpy as np
    >>> Seq2Lab().attention(np.zeros((1, 2, 2)), beta=1.0).tolist()
    [[[0.5, 0.5], [0.5, 0.5]]]
    """

    name: ClassVar[str] = "seq2lab"

    def attention(self, h: Array, beta: float) -> Array:
        return _softmax(beta * h)

    def loss_and_logit_grad(self, h: Any, target: Any, M: Any, beta: float) -> tuple[Any, Any]:
        A = (beta * h).softmax(dim=-1)
        R = A - target
        dA = 2.0 * R
        return (R * R).sum(), beta * A * (dA - (dA * A).sum(dim=-1, keepdim=True))

    def informative_directions(self, T: int) -> int:
        # the labels fix the logits up to one global shift of every row (none left at T = 1)
        return T * (T + 1) // 2 - 1

    def labels(self, y: np.ndarray, T: int, beta0: float) -> np.ndarray:
        return softmax_rows(beta0 * vec_to_mat(y, T))

    def fit_loss(self, h, labels, beta, order=2):
        return softmax_fit_loss(h, labels, beta, order=order)

    def prox_starts(self, z, y, *, T, beta, beta0):
        # z, the interpolating point (the prox point as Sigma -> inf) and their midpoint
        hi = interpolating_start(z, y, beta0 / beta, T)
        return [z, hi, 0.5 * (z + hi)]

    def label_logits(self, labels: np.ndarray, beta: float) -> np.ndarray:
        # log A_ab = beta H_ab - c_a: undo the row normalisation (sum_a c_a = 0), symmetrise, and
        # drop the global shift that the labels do not determine; exact for realisable labels
        T = labels.shape[-1]
        L = np.log(np.maximum(labels, 1e-300)) / beta
        c = (L.transpose(0, 2, 1) - L).mean(axis=2)
        H = L + c[:, :, None]
        H = 0.5 * (H + H.transpose(0, 2, 1))
        w = mat_to_vec(H)
        u = shift_direction(T)
        return w - (w @ u)[:, None] * u

    def observed_projection(self, T: int) -> np.ndarray:
        u = shift_direction(T)
        return np.eye(T * (T + 1) // 2) - np.outer(u, u)


@dataclass(frozen=True)
class Seq2Seq(Seq2Lab):
    """``sigma(beta h) X / sqrt(d)`` (value = identity); its theory is :class:`Seq2Lab`'s.

    The ``1/sqrt(d)`` makes the square loss equal the seq2lab one to leading order; training uses
    the per-sequence Gram constants ``X X^T/d`` and ``y X^T/sqrt(d)``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.ones((1, 2, 4))
    >>> Seq2Seq().output(np.zeros((1, 2, 2)), 1.0, X).tolist()
    [[[0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]]]
    """

    name: ClassVar[str] = "seq2seq"

    def output(self, h: Array, beta: float, X: Array | None = None) -> Array:
        if X is None:
            raise ValueError("X must be given for the seq2seq channel")
        return (self.attention(h, beta) @ X) / math.sqrt(X.shape[-1])

    def attention_labels(self, y: np.ndarray, X: np.ndarray) -> np.ndarray:
        # y = A X/sqrt(d) with A's rows in the span of the T tokens: A = sqrt(d) y X^T (X X^T)^{-1}
        G = np.einsum("nad,nbd->nab", X, X)
        yX = np.einsum("nad,nbd->nab", y, X)
        return math.sqrt(X.shape[-1]) * np.linalg.solve(G, yX.transpose(0, 2, 1)).transpose(0, 2, 1)

    def training_constants(self, X: Any, y: Any) -> tuple[Any, Any, float]:
        # ||A X/sqrt d - y||^2 = <A M, A> - 2 <A, Y> + ||y||^2 with M = X X^T/d, Y = y X^T/sqrt d
        X, y = X.double(), y.double()
        d = X.shape[-1]
        return y @ X.transpose(-1, -2) / math.sqrt(d), X @ X.transpose(-1, -2) / d, float((y * y).sum())

    def loss_and_logit_grad(self, h: Any, target: Any, M: Any, beta: float) -> tuple[Any, Any]:
        A = (beta * h).softmax(dim=-1)
        AM = A @ M
        # float64 sums: the two terms nearly cancel against ||y||^2 (float32 would lose ~1e-5)
        f64 = A.new_empty(0).double().dtype
        loss = (AM * A).sum(dtype=f64) - 2.0 * (A * target).sum(dtype=f64)
        dA = 2.0 * (AM - target)
        return loss, beta * A * (dA - (dA * A).sum(dim=-1, keepdim=True))


@dataclass(frozen=True)
class Linear(Channel):
    """``h`` itself: with ``T = 1`` the quadratic network ``(x^T S0 x - Tr S0)/sqrt(d) + noise``.

    No temperature (``beta`` must be 1); the fit loss is ``2 ||y - h||^2`` in field coordinates
    (Hessian ``4 I``), so the output side, the test errors and the replicon are in closed form.

    Examples
    --------
    >>> Linear().closed_form_test_errors(T=1, Q0=1.5, q=1.0, m=1.0, noise=0.0)["test_error"]
    1.0
    """

    name: ClassVar[str] = "linear"
    convex_prox: ClassVar[bool] = True
    needs_quadrature: ClassVar[bool] = False

    def validate(self, T: int, beta: float, beta0: float) -> None:
        if beta != 1.0:
            raise ValueError(f"beta must be 1 for the linear channel (it has no softmax) (got {beta!r})")

    def attention(self, h: Array, beta: float) -> Array:
        return h

    def loss_and_logit_grad(self, h: Any, target: Any, M: Any, beta: float) -> tuple[Any, Any]:
        R = h - target
        return (R * R).sum(), 2.0 * R

    def logit_scale(self, beta: float, beta0: float) -> float:
        return 1.0

    def labels(self, y: np.ndarray, T: int, beta0: float) -> np.ndarray:
        return y

    def fit_loss(self, h, labels, beta, order=2):
        # ||M(y - h)||_F^2 = 2 ||y - h||^2
        N, K = h.shape
        r = labels - h
        val = 2.0 * np.einsum("nk,nk->n", r, r)
        return (val, None if order < 1 else -4.0 * r,
                None if order < 2 else np.broadcast_to(4.0 * np.eye(K), (N, K, K)))

    def prox_starts(self, z, y, *, T, beta, beta0):
        return []

    def prox_labels(self, z, labels, Sigma, *, beta, starts=None):
        return prox_linear(z, labels, Sigma)

    def closed_form_output_side(self, alpha, T, Q0, q, m, Sigma, noise):
        K = T * (T + 1) // 2
        S4 = Sigma + 0.25
        E = Q0 - 2 * m + q + noise / 2.0
        return 2 * alpha * K * E / S4**2, 2 * alpha * K / S4, 2 * alpha * K / S4, K * E / (8 * S4**2)

    def closed_form_test_errors(self, T, Q0, q, m, noise):
        K = T * (T + 1) // 2
        return {"test_error": 2 * K * (Q0 - 2 * m + q), "test_error_noisy": 2 * K * (Q0 + noise / 2.0 - 2 * m + q),
                "test_error_se": 0.0, "test_error_noisy_se": 0.0}

    def fit_hessian_constant(self) -> float:
        return 4.0

    def labels_from_attention(self, Y: np.ndarray) -> np.ndarray:
        return mat_to_vec(Y)

    def label_logits(self, labels: np.ndarray, beta: float) -> np.ndarray:
        return mat_to_vec(labels)


_REGISTRY: dict[str, type[Channel]] = {}


def register_channel(cls: type[Channel]) -> type[Channel]:
    """Register a :class:`Channel` subclass under ``cls.name`` (usable as a class decorator).

    Registered names are accepted by :class:`~singlehead.problem.Problem`, the CLI and the
    JSON/CSV readers. Re-registering a name replaces the earlier class.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> from typing import ClassVar
    >>> @register_channel
    ... @dataclass(frozen=True)
    ... class Doubled(Linear):
    ...     name: ClassVar[str] = "doubled_linear_example"
    >>> "doubled_linear_example" in channel_names()
    True
    """
    if not (isinstance(cls, type) and issubclass(cls, Channel)) or not cls.name:
        raise ValueError(f"channel must be a Channel subclass with a non-empty name (got {cls!r})")
    _REGISTRY[cls.name] = cls
    return cls


def channel_names() -> tuple[str, ...]:
    """Names of the registered channels, in registration order (the built-in ones first).

    Examples
    --------
    >>> channel_names()[:3]
    ('seq2lab', 'seq2seq', 'linear')
    """
    return tuple(_REGISTRY)


def get_channel(spec: str | Channel) -> Channel:
    """The channel object for a registered name (a :class:`Channel` passes through).

    An unknown name raises ``ValueError`` naming the parameter and the registered names.

    Examples
    --------
    >>> get_channel("linear")
    Linear()
    """
    if isinstance(spec, Channel):
        return spec
    if isinstance(spec, str) and spec in _REGISTRY:
        return _REGISTRY[spec]()
    raise ValueError(f"channel must be one of {channel_names()} (got {spec!r})")


for _cls in (Seq2Lab, Seq2Seq, Linear):
    register_channel(_cls)
