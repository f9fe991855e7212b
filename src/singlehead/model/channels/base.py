"""The :class:`Channel` base class and the square loss (see :mod:`singlehead.model.channels`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from singlehead.numerics.attention_maps import softmax_rows, untied_embedding, vec_to_mat
from singlehead.numerics.newton_steps import add_diagonal, chol_solve, chol_solve_many
from singlehead.numerics.prox import ProxResult, prox_newton

Array = Any  # numpy.ndarray or torch.Tensor

__all__ = ["Channel", "squared_error"]


def _is_torch(x: Array) -> bool:
    return type(x).__module__.startswith("torch")


def stable_softmax(z: Array) -> Array:
    """Row softmax over the last axis of ``z`` (numpy or torch), shifted by the row maximum for stability."""
    return z.softmax(dim=-1) if _is_torch(z) else softmax_rows(z)


def _mean_heads(y: Array) -> Array:
    """Mean over the head axis (the third from last) of per-head outputs, numpy or torch."""
    return y.mean(dim=-3) if _is_torch(y) else np.mean(y, axis=-3)


def squared_error(yhat: Array, y: Array) -> Array:
    """Per-sequence squared Frobenius error ``||yhat - y||_F^2`` (sum over the last two axes).

    The library's loss and test-error convention (docs: Theory, :ref:`theory-metrics`): summed over all entries of one
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

    Subclasses set ``name`` and implement :meth:`~singlehead.model.channels.Channel.attention` (the ``T x T`` map of the
    logit matrix,
    numpy or torch) and :meth:`fit_loss` (the squared Frobenius loss in the ``K = T(T+1)/2`` field
    coordinates of the state evolution, diagonal fields carrying ``sqrt 2``); the rest has generic
    defaults. Instances are immutable and compare by type and fields; register a subclass with
    :func:`register_channel` to use its name in ``Problem`` and the CLI.

    Examples
    --------
    >>> from singlehead.model.channels import get_channel
    >>> ch = get_channel("seq2lab")
    >>> ch.name, ch.informative_directions(T=2)
    ('seq2lab', 2)
    """

    name: ClassVar[str] = ""
    #: The prox objective has a single minimum (no branches to track, no jumps).
    convex_prox: ClassVar[bool] = False
    #: The output side needs quadrature nodes (``False``: closed forms for every expectation).
    needs_quadrature: ClassVar[bool] = True
    #: The labels reveal the teacher's noisy logits along ``observed_projection`` (Gaussian
    #: observations): the premise of the Bayes-optimal baseline (:func:`singlehead.bayes_optimal`).
    labels_reveal_logits: ClassVar[bool] = True
    #: The channel supplies its own Bayes output side (:meth:`bayes_output_information`,
    #: :meth:`bayes_output_denoiser`) instead of the Gaussian observations of ``labels_reveal_logits``.
    own_bayes_output: ClassVar[bool] = False
    #: The state evolution of several heads (``heads > 1`` or ``teacher_heads > 1``) on this channel:
    #: ``"reduction"`` (the output is linear in the logits, so a mean of heads is one head of the mean matrix and the
    #: problem reduces exactly to a single head), ``"heads"`` (the multi-head state evolution of a mean of row-wise
    #: softmax outputs, whose fit loss it hard-wires), or ``None`` (no theory of several heads: ``theory`` refuses
    #: such a problem, naming ``heads``). A subclass that changes the output must say which applies.
    multihead_theory: ClassVar[str | None] = None
    #: The smallest number of tokens ``T`` the channel supports: with fewer, its output does not depend on
    #: the logits (the softmax over a single token is 1). :class:`~singlehead.model.problem.Problem` refuses
    #: ``T < min_T``, naming ``T``; for every ``T >= min_T`` the labels carry
    #: :meth:`informative_directions` ``>= 1`` field directions.
    min_T: ClassVar[int] = 1

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

    def teacher_attention(self, h: Array, beta0: float) -> Array:
        """The teacher's ``T x T`` map of logits ``h`` (``(..., T, T)``) at ``beta0``, numpy or torch: what
        labels, the theory's test errors and the Bayes baseline apply to the target's logits. Default
        :meth:`~singlehead.model.channels.Channel.attention` (teacher and student share one map); a channel
        whose labels are made by another map (``hardmax``: one-hot row argmax) overrides it."""
        return self.attention(h, beta0)

    def teacher_output(self, h: Array, beta0: float, X: Array | None = None) -> Array:
        """The teacher's full output (the labels of data generation); default ``output`` at ``beta0``."""
        return self.output(h, beta0, X)

    def head_output(self, h: Array, beta: float, X: Array | None = None) -> Array:
        """Output of several heads: the mean over the head axis of :meth:`output` of each head's logits.

        ``h`` has shape ``(..., H, T, T)`` (head ``k``'s logits at ``h[..., k, :, :]``) and ``X``
        ``(..., T, d)``; the result has :meth:`output`'s shape for one head. For the built-in channels
        (whose output is linear in the attention matrix) this is the channel applied to the mean of the
        heads' attention matrices: ``mean_k sigma(beta h_k)`` (seq2lab), ``(mean_k sigma(beta h_k)) X/sqrt(d)``
        (seq2seq), ``mean_k h_k`` (linear).
        """
        return _mean_heads(self.output(h, beta, None if X is None else X[..., None, :, :]))

    def teacher_head_output(self, h: Array, beta0: float, X: Array | None = None) -> Array:
        """The teacher's output of several heads (the labels of a multi-head teacher): the mean over the
        head axis of :meth:`teacher_output`, shapes as in :meth:`head_output`."""
        return _mean_heads(self.teacher_output(h, beta0, None if X is None else X[..., None, :, :]))

    def attention_labels(self, y: np.ndarray, X: np.ndarray) -> np.ndarray:
        """The ``T x T`` labels behind raw outputs ``y`` (AMP's output step); default ``y`` itself."""
        return y

    def labels_from_attention(self, Y: np.ndarray) -> np.ndarray:
        """``T x T`` labels in ``fit_loss``'s form (default: the matrices themselves)."""
        return Y

    # ---------------------------------------------------------------- training (torch)
    def training_constants(self, X: Any, y: Any) -> tuple[Any, Any, float]:
        """``(target, M, const)`` per dataset for :meth:`loss_and_logit_grad` (default ``(y, None, 0)``)."""
        return y, None, 0.0

    def loss_and_logit_grad(self, h: Any, target: Any, M: Any, beta: float) -> tuple[Any, Any] | None:
        """Summed data loss of a chunk (float64) and its gradient ``G = dL/dh`` (torch tensors), in
        closed form; ``None`` (the default): the trainer differentiates
        :meth:`~singlehead.model.channels.Channel.attention` by autograd."""
        return None

    # ---------------------------------------------------------------- state evolution: output side
    def informative_directions(self, T: int) -> int:
        """``c_T``: field directions the labels determine (docs: Theory, :ref:`theory-thresholds`); default all
        ``K``."""
        return T * (T + 1) // 2

    def logit_scale(self, beta: float, beta0: float) -> float:
        """The scale ``rho0`` that makes the student's logits reproduce the teacher's outputs."""
        return beta0 / beta

    def labels(self, y: np.ndarray, T: int, beta0: float) -> np.ndarray:
        """Labels ``chan_beta0(M(y))`` of teacher fields ``y`` (``(N, K)``), in ``fit_loss``'s form."""
        return self.teacher_attention(vec_to_mat(y, T), beta0)

    def fit_loss(
        self, h: np.ndarray, labels: np.ndarray, beta: float, order: int = 2
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """``ell(h) = ||labels - chan_beta(M(h))||_F^2`` per node, with gradient and Hessian up to ``order``."""
        raise NotImplementedError

    def prox_tangent_solve(
        self, h: np.ndarray, labels: np.ndarray, beta: float, Sigma: float, B: np.ndarray
    ) -> np.ndarray | None:
        """``(I + Sigma H)^{-1} B`` per node, ``H`` the Hessian of :meth:`fit_loss` at the prox point ``h``
        and ``B`` ``(N, K, R)``: the prox point's derivatives (``dh = (I + Sigma H)^{-1} (dz + g dSigma/Sigma)``).
        Default: the Hessian and a batched Cholesky (LU where it is not positive definite); ``None``
        where the system is singular."""
        _, _, H = self.fit_loss(h, labels, beta, order=2)
        M = Sigma * np.array(H, dtype=float)
        add_diagonal(M, np.ones(h.shape[0]))
        X, ok = chol_solve_many(M, B, np.full(h.shape[0], 1e-12))
        if not ok.all():
            bad = np.nonzero(~ok)[0]
            try:
                X[bad] = np.linalg.solve(M[bad], B[bad])
            except np.linalg.LinAlgError:
                return None
        return X

    def prox_tangent_forms(
        self, h: np.ndarray, labels: np.ndarray, beta: float, Sigma: float, V: np.ndarray
    ) -> np.ndarray | None:
        """The node means ``Q[i, j] = mean_n V_i^T (I + Sigma H)^{-1} V_j`` of ``k`` vector fields ``V``
        (``(N, k, K)``), ``H`` the Hessian of :meth:`fit_loss` at the prox point ``h`` (what the SE map's
        exact Jacobian needs). Default: :meth:`~singlehead.model.channels.Channel.prox_tangent_solve` and one
        contraction; ``None`` where
        the system is singular."""
        X = self.prox_tangent_solve(h, labels, beta, Sigma, V.transpose(0, 2, 1))
        if X is None:
            return None
        return np.tensordot(V, X, axes=([0, 2], [0, 1])) / h.shape[0]

    def prox_hessian_trace(self, h: np.ndarray, labels: np.ndarray, beta: float, Sigma: float) -> np.ndarray | None:
        """Per node ``tr[H (I + Sigma H)^{-1}]`` (``Sigma = 0``: ``tr H``), ``H`` the Hessian of :meth:`fit_loss` at
        ``h``
        (the output side at complete collapse). Default: the dense Hessian; ``None`` where the system is singular."""
        H = np.array(self.fit_loss(h, labels, beta, order=2)[2], dtype=float)
        if Sigma == 0:
            return np.einsum("nkk->n", H)
        try:
            return np.einsum("nkk->n", np.linalg.solve(np.eye(h.shape[1])[None] + Sigma * H, H))
        except np.linalg.LinAlgError:
            return None

    def prox_convex_at(self, h: np.ndarray, labels: np.ndarray, beta: float, Sigma: float) -> np.ndarray:
        """Per node, whether the prox objective's Hessian ``I/Sigma + H(h)`` is (safely) positive definite at ``h``.
        Default: a batched Cholesky with pivots floored at ``1e-12/Sigma``."""
        H = np.array(self.fit_loss(h, labels, beta, order=2)[2], dtype=float)
        inv = np.full(h.shape[0], 1.0 / Sigma)
        add_diagonal(H, inv)
        return chol_solve(H, np.zeros_like(h), 1e-12 * inv)[1]

    def prox_convex_everywhere(self, T: int, beta: float, Sigma: float) -> bool:
        """Whether the prox objective is strictly convex at every ``z`` and label (one minimum: a single Newton
        start finds it, and no other start can find a lower one). Default: the class attribute ``convex_prox``."""
        return self.convex_prox

    def prox_starts(self, z: np.ndarray, y: np.ndarray, *, T: int, beta: float, beta0: float) -> list[np.ndarray]:
        """Default Newton starts of the prox for student fields ``z`` and teacher fields ``y``."""
        return [z]

    def prox(
        self,
        z: np.ndarray,
        y: np.ndarray,
        Sigma: Any,
        *,
        T: int,
        beta: float,
        beta0: float,
        starts: Sequence[np.ndarray] | None = None,
        labels: np.ndarray | None = None,
    ) -> ProxResult:
        """Global prox ``argmin_h ||h - z||^2/(2 Sigma) + ell(h)`` for labels of teacher fields ``y``
        (``labels``: ``self.labels(y, T, beta0)`` when the caller has them)."""
        return self.prox_labels(
            z,
            self.labels(y, T, beta0) if labels is None else labels,
            Sigma,
            beta=beta,
            starts=self.prox_starts(z, y, T=T, beta=beta, beta0=beta0) if starts is None else starts,
        )

    def prox_labels(
        self, z: np.ndarray, labels: np.ndarray, Sigma: Any, *, beta: float, starts: Sequence[np.ndarray] | None = None
    ) -> ProxResult:
        """The prox for given labels (AMP's output step): safeguarded Newton from each start."""
        return prox_newton(z, labels, Sigma, lambda h, lab, order: self.fit_loss(h, lab, beta, order), starts=starts)

    def closed_form_output_side(
        self, alpha: float, T: int, Q0: float, q: float, m: float, Sigma: float, noise: float
    ) -> tuple[float, float, float, float] | None:
        """``(qhat, mhat, Sigmahat, train_error)`` in closed form, or ``None`` (quadrature)."""
        return None

    def closed_form_test_errors(self, T: int, Q0: float, q: float, m: float, noise: float) -> dict[str, float] | None:
        """Test errors in closed form, or ``None`` (quadrature of
        :meth:`~singlehead.model.channels.Channel.attention`)."""
        return None

    def fit_hessian_constant(self) -> float | None:
        """``c`` when the fit loss's Hessian is ``c I`` everywhere (closed-form replicon), else ``None``."""
        return None

    # ---------------------------------------------------------------- field blocks (any student)
    def closed_form_block(
        self, alpha: float, K: int, Q0: float, q: float, m: float, Sigma: float, noise: float
    ) -> dict[str, float] | None:
        """Closed forms of one block of ``K`` independent fields (``qhat, mhat, Sigmahat, train_error,
        test_error, test_error_noisy``; ``noise`` the teacher fields' variance ``2 x`` their noise), or
        ``None`` (quadrature). A symmetric student has one block (``K = T(T+1)/2``), a non-symmetric
        one a symmetric and an antisymmetric block."""
        return None

    def block_labels(self, y: np.ndarray, T: int, beta0: float, blocks: Sequence[Any]) -> np.ndarray:
        """Labels of teacher fields ``y`` laid out in the student's ``blocks``
        (:meth:`~singlehead.model.students.Student.field_blocks`), in :meth:`block_fit_loss`'s form.

        One symmetric block: :meth:`labels`. A symmetric and an antisymmetric block (``T^2``
        fields, the coordinates of ``singlehead.numerics.attention_maps.untied_embedding`` ``P``): the
        ``T x T`` labels ``chan_beta0(P(y))`` (:meth:`teacher_attention`)."""
        if len(blocks) == 1:
            return self.labels(y, T, beta0)
        return self.teacher_attention(np.einsum("abk,nk->nab", untied_embedding(T), y), beta0)

    def block_fit_loss(
        self, h: np.ndarray, labels: np.ndarray, beta: float, order: int = 2, *, blocks: Sequence[Any]
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """``||labels - chan_beta(h)||_F^2`` per node for fields ``h`` laid out in ``blocks``, with gradient
        and Hessian up to ``order``. One symmetric block: :meth:`fit_loss`; a channel that supports
        non-symmetric students overrides the two-block case (``P(h)``, see ``block_labels``)."""
        if len(blocks) == 1:
            return self.fit_loss(h, labels, beta, order)
        raise NotImplementedError(
            f"the {self.name!r} channel has no fit loss on a symmetric and an antisymmetric "
            "block of fields (Channel.block_fit_loss), which a non-symmetric student needs"
        )

    def block_label_equations(self, T: int, blocks: Sequence[Any]) -> tuple[int, bool]:
        """Generic equations the labels of one sequence put on a student's logits laid out in ``blocks``
        (:meth:`~singlehead.model.students.Student.field_blocks`), and whether they reach a block beyond the
        first (for a non-symmetric student: the antisymmetric part of ``M``). Default: all ``T(T+1)/2``
        symmetric ones, no (with the library's symmetric label noise the antisymmetric equations are
        homogeneous, met by ``M_a = 0``)."""
        return T * (T + 1) // 2, False

    # ---------------------------------------------------------------- AMP and Bayes
    def label_logits(self, labels: np.ndarray, beta: float) -> np.ndarray | None:
        """Field ``K``-vectors whose outputs at ``beta`` are the ``T x T`` ``labels`` (``None``: unknown)."""
        return None

    def observed_projection(self, T: int) -> np.ndarray:
        """Projector on the field directions the labels reveal (Bayes output step); default identity."""
        return np.eye(T * (T + 1) // 2)

    def bayes_output_information(self, T: int, q: float, V: float, noise: float) -> float | None:
        """Fisher information ``E_{omega, y} ||g_out(y; omega, V)||^2`` of the output channel, or ``None``.

        ``g_out = grad_omega log Z_out(y; omega, V)``, ``Z_out = int P(y | z) N(z; omega, V I_K) dz``, averaged
        over ``omega ~ N(0, q I_K)`` and ``y ~ Z_out``; the Bayes state evolution's conjugate is
        ``qhat = 2 alpha`` times it (docs: Theory, :ref:`theory-bayes`). ``None`` (the default): the
        Gaussian-observation form ``c_T/(V + noise/2)`` of channels with :attr:`labels_reveal_logits`,
        which ``singlehead.bayes.bayes_overlap`` uses in closed form."""
        return None

    def bayes_output_denoiser(
        self, labels: np.ndarray, omega: np.ndarray, V: float, noise: float
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Bayes-GAMP's output step for ``T x T`` ``labels`` (``(n, T, T)``) and messages ``N(omega, V I_K)``:
        ``(g_out, tr(-dg_out/domega))`` per sample (``(n, K)``, ``(n,)``), or ``None`` (the default: the
        Gaussian-observation denoiser of :meth:`label_logits` and ``observed_projection``)."""
        return None
