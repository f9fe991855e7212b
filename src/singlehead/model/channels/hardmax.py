"""The hardmax channel: one-hot row-argmax labels, fitted by a softmax student (:class:`Hardmax`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from singlehead.numerics.attention_maps import vec_to_mat
from singlehead.numerics.prox import interpolating_start
from singlehead.model.channels.base import Array
from singlehead.model.channels.softmax import Seq2Lab

__all__ = ["Hardmax", "hardmax_rows"]


def hardmax_rows(h: Array) -> Array:
    """One-hot row argmax over the last axis of ``h`` (numpy or torch), same shape and dtype as ``h``.

    Row ``a`` of the result is ``e_b`` with ``b = argmax_c h[..., a, c]`` (ties, of probability
    zero for Gaussian logits, go to the first maximum).

    Examples
    --------
    >>> import numpy as np
    >>> hardmax_rows(np.array([[[0.0, 2.0], [1.0, -1.0]]])).tolist()
    [[[0.0, 1.0], [1.0, 0.0]]]
    """
    if type(h).__module__.startswith("torch"):
        return h.new_zeros(h.shape).scatter_(-1, h.argmax(dim=-1, keepdim=True), 1.0)
    h = np.asarray(h)
    out = np.zeros(h.shape, dtype=h.dtype if np.issubdtype(h.dtype, np.floating) else float)
    np.put_along_axis(out, h.argmax(axis=-1)[..., None], 1.0, axis=-1)
    return out


@dataclass(frozen=True)
class Hardmax(Seq2Lab):
    """Labels ``y = onehot(argmax_b (h(S0) + xi)_ab)`` row by row; the student predicts ``softmax(beta h)``.

    The teacher's map (:meth:`teacher_attention`) is the row-wise hardmax, the ``beta0 -> inf``
    limit of the seq2lab teacher: label noise ``xi`` enters the logits before the argmax, as for
    every channel, and ``beta0`` (accepted, validated ``> 0``) does not change the labels. The
    student's map (:meth:`~singlehead.model.channels.Channel.attention`), the square loss
    ``||softmax(beta h) - y||_F^2``, its training gradient, fit loss and prox are the seq2lab ones
    applied to one-hot labels, so ERM, the state evolution and the test errors run through the
    generic machinery; the state evolution's labels on its quadrature nodes are the hardmax of
    the teacher fields (:meth:`labels`, :meth:`~singlehead.model.channels.Channel.block_labels`).

    No finite logits reproduce a one-hot label through a softmax, so the prox's interpolating
    point of seq2lab does not exist: the Newton starts are ``z`` and, for each ``c`` in
    :attr:`start_scales`, the point closest to ``z`` on ``{(c/beta) y + t u}`` (``u`` the global
    shift) and its midpoint with ``z`` (the prox keeps the lowest objective per node; one scale
    alone can miss the global minimum at some nodes). :meth:`logit_scale` is ``1/beta``, the teacher's
    logits at the student's temperature: a reference scale, not one that reproduces the labels.

    Counts for the thresholds: the labels depend on every field direction except the global shift
    ``u`` (adding ``t u`` moves every logit by ``t``, leaving each row's argmax unchanged), so
    ``c_T = K - 1`` as for seq2lab. They carry inequalities, not equations: a softmax student
    never reaches zero training loss at finite ``S``, and the equation-counting interpolation
    threshold of ``singlehead.thresholds`` has no exact meaning here (the ``lam -> 0`` transition
    is a separability threshold of the argmax inequalities, not derived in this library); ``c_T``
    is the count the labels carry, used for the state evolution's starting points and reported
    by the threshold formulas as they stand.

    No Bayes-optimal baseline (:attr:`labels_reveal_logits` is ``False``: the labels are orthant
    indicators of the logits, not Gaussian observations of them) and no logits behind labels
    (:meth:`label_logits` is ``None``, so Bayes AMP refuses the channel).

    Examples
    --------
    >>> import numpy as np
    >>> ch = Hardmax()
    >>> h = np.array([[[0.3, -1.0], [-1.0, 2.0]]])
    >>> ch.teacher_attention(h, beta0=1.0).tolist()     # labels: one-hot argmax of each row
    [[[1.0, 0.0], [0.0, 1.0]]]
    >>> np.round(ch.attention(h, beta=1.0), 3).tolist()  # the student's softmax rows
    [[[0.786, 0.214], [0.047, 0.953]]]
    """

    name: ClassVar[str] = "hardmax"
    labels_reveal_logits: ClassVar[bool] = False
    #: ``beta`` times the scales of the teacher's logits used as Newton starts of the prox.
    start_scales: ClassVar[tuple[float, ...]] = (1.0, 3.0)

    def teacher_attention(self, h: Array, beta0: float) -> Array:
        return hardmax_rows(h)

    def teacher_output(self, h: Array, beta0: float, X: Array | None = None) -> Array:
        return hardmax_rows(h)

    def labels(self, y: np.ndarray, T: int, beta0: float) -> np.ndarray:
        return hardmax_rows(vec_to_mat(y, T))

    def logit_scale(self, beta: float, beta0: float) -> float:
        return 1.0 / beta

    def prox_starts(self, z, y, *, T, beta, beta0):
        starts = [z]
        for c in self.start_scales:
            hi = interpolating_start(z, y, c / beta, T)
            starts += [hi, 0.5 * (z + hi)]
        return starts

    def label_logits(self, labels: np.ndarray, beta: float) -> None:
        return None
