"""The hardmax channel: one-hot row-argmax labels, fitted by a softmax student (:class:`Hardmax`).

Bayes-optimal output side (docs: Theory, :ref:`theory-bayes`). Conventions: the ``K = T(T+1)/2``
field coordinates ``z`` of ``singlehead.numerics.prox`` (``M(z)`` symmetric, diagonal times
``sqrt 2``; every coordinate of the teacher's logits has variance ``Q0``), label noise
``xi ~ N(0, Delta/2 I_K)`` in the same coordinates, a Gaussian message ``z ~ N(omega, V I_K)``.
The label ``y`` (one-hot argmax of each row of ``M(z + xi)``) is a set of linear inequalities
between logits, so ``Z_out(y; omega, V) = P(argmax_rows M(omega + sqrt(V_eff) zeta) = y)``,
``V_eff = V + Delta/2``, is the Gaussian probability of a polytope, and the Bayes state
evolution's conjugate is ``qhat = 2 alpha E ||grad_omega log Z_out||^2`` (``omega ~ N(0, q I_K)``,
``y ~ Z_out``), the output channel's Fisher information. Labels are invariant under
``z -> c z`` (``c > 0``), so that average is ``J_T(q/V_eff)/V_eff``.

* ``T = 2``: row ``a``'s label is the sign ``s_a`` of the margin ``u_1 = sqrt2 z_11 - z_12`` or
  ``u_2 = sqrt2 z_22 - z_12``; ``(u_1, u_2)`` has variances ``3 V_eff`` and correlation ``1/3``,
  so ``Z_out`` is a bivariate normal orthant probability (:func:`hardmax_log_partition`), and
  ``g_out``, ``tr(-dg_out/domega)`` (``hardmax_bayes_denoiser``) and ``J_2``
  (``hardmax_fisher_information``) are closed forms or exact two-dimensional quadrature.
* ``T >= 3``: ``J_T`` from a fixed nested scrambled Sobol table, the denoiser from a fixed Sobol
  set of noise nodes (posterior moments of ``zeta`` given the label).

Argmax labels are a function of ``z + xi``, so ``J_T <= c_T = K - 1``, the information of labels
revealing the logits up to the shift (softmax channels): the hardmax MMSE is never below theirs.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import special

from singlehead.model.channels.base import Array
from singlehead.model.channels.softmax import Seq2Lab
from singlehead.numerics.attention_maps import shift_direction, vec_to_mat
from singlehead.numerics.orthant import bvn_log_derivatives, log_bvn_cdf
from singlehead.numerics.prox import interpolating_start

__all__ = ["Hardmax", "hardmax_rows", "hardmax_log_partition", "hardmax_fisher_information", "hardmax_bayes_denoiser"]

#: Correlation of the two row margins ``u_1 = sqrt2 z_11 - z_12``, ``u_2 = sqrt2 z_22 - z_12`` at ``T = 2``.
_RHO2 = 1.0 / 3.0
#: ``A`` with ``u = A z`` (``K = 3`` field coordinates ``(z_11, z_12, z_22)``); ``A A^T = 3 R``.
_A2 = np.array([[math.sqrt(2.0), -1.0, 0.0], [0.0, -1.0, math.sqrt(2.0)]])


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


def _t2_signs(labels: np.ndarray) -> np.ndarray:
    """``(n, 2)`` signs of the row margins at ``T = 2``: ``+1`` where row ``a``'s label is its diagonal entry."""
    Y = np.asarray(labels, dtype=float)
    return np.where(np.stack([Y[:, 0, 0], Y[:, 1, 1]], axis=1) > 0.5, 1.0, -1.0)


def hardmax_log_partition(labels: np.ndarray, omega: np.ndarray, V: float, noise: float) -> np.ndarray:
    """``log Z_out(y; omega, V)`` at ``T = 2``: the bivariate normal orthant probability of the label.

    ``Z_out = P(onehot argmax_rows M(omega + sqrt(V_eff) xi) = y)``, ``V_eff = V + noise/2``, ``xi ~ N(0, I_3)``.
    The label fixes the signs ``s_a`` of the row margins ``u_1 = sqrt2 z_11 - z_12``,
    ``u_2 = sqrt2 z_22 - z_12`` (``s_a = +1``: row ``a``'s argmax is its diagonal entry), which are
    Gaussian with variance ``3 V_eff`` and covariance ``V_eff`` (correlation ``1/3``, the shared
    ``z_12``); so ``Z_out = Phi2(s_1 a_1, s_2 a_2; s_1 s_2/3)``, ``a = A omega/sqrt(3 V_eff)``.

    Examples
    --------
    >>> import numpy as np
    >>> Y = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    >>> round(float(np.exp(hardmax_log_partition(Y, np.zeros((1, 3)), 1.0, 0.0))[0]), 6)  # 1/4 + asin(1/3)/(2 pi)
    0.304087
    """
    Y = np.asarray(labels, dtype=float)
    if Y.ndim != 3 or Y.shape[1:] != (2, 2):
        raise ValueError(f"labels must have shape (n, 2, 2) (got {Y.shape})")
    Ve = V + noise / 2.0
    sg = _t2_signs(Y)
    a = np.asarray(omega, dtype=float) @ _A2.T / math.sqrt(3.0 * Ve)
    return log_bvn_cdf(sg[:, 0] * a[:, 0], sg[:, 1] * a[:, 1], sg[:, 0] * sg[:, 1] * _RHO2)


def _t2_fisher_density(a1: np.ndarray, a2: np.ndarray) -> np.ndarray:
    """``F(a) = sum_y Z_y ||grad_a log Z_y||_R^2`` at standardised margins ``a`` (unit noise), ``T = 2``."""
    a1, a2 = np.ravel(a1), np.ravel(a2)
    out = np.zeros(a1.shape)
    for s1 in (1.0, -1.0):
        for s2 in (1.0, -1.0):
            r = s1 * s2 * _RHO2
            L, G, _ = bvn_log_derivatives(s1 * a1, s2 * a2, r)
            out += np.exp(L) * (G[:, 0] ** 2 + G[:, 1] ** 2 + 2.0 * r * G[:, 0] * G[:, 1])
    return out


def _t2_fisher(s: float, n_nodes: int = 64) -> float:
    """``J(s) = E_{a ~ N(0, s R)} F(a)`` at ``T = 2`` (``R = [[1, 1/3], [1/3, 1]]``), by Gauss–Legendre.

    ``F`` vanishes (below ``1e-20``) where both ``|a_i| > 10`` and tends to
    ``F_inf(a_1) = phi(a_1)^2/(Phi(a_1) Phi(-a_1))`` as ``|a_2| -> inf``; with ``B = min(10, 10 sqrt s)``
    and the ``a_1 <-> a_2`` symmetry, ``J = 2 I_strip - I_box``: ``I_strip`` over ``|a_1| <= B`` (``|a_2| <= B``
    by quadrature, beyond it ``F_inf`` times the conditional Gaussian tail mass), ``I_box`` over the square.
    """
    if s <= 0:
        return float(_t2_fisher_density(np.zeros(1), np.zeros(1))[0])
    B = min(10.0, 10.0 * math.sqrt(s))
    x, w = np.polynomial.legendre.leggauss(n_nodes)
    x, w = B * x, B * w
    rho = _RHO2
    sc = math.sqrt(s * (1.0 - rho * rho))  # sd of a2 given a1
    p1 = np.exp(-0.5 * x * x / s) / math.sqrt(2.0 * math.pi * s)
    A1, A2 = np.meshgrid(x, x, indexing="ij")
    F = _t2_fisher_density(A1, A2).reshape(A1.shape)
    pc = np.exp(-0.5 * ((A2 - rho * A1) / sc) ** 2) / (math.sqrt(2.0 * math.pi) * sc)
    box = float(np.einsum("i,j,ij,i,ij->", w, w, F, p1, pc))
    lphi = -0.5 * x * x - 0.5 * math.log(2 * math.pi)
    Finf = np.exp(2 * lphi - special.log_ndtr(x) - special.log_ndtr(-x))
    tail = special.ndtr((-B - rho * x) / sc) + special.ndtr((-B + rho * x) / sc)
    strip = box + float(np.sum(w * p1 * Finf * tail))
    return 2.0 * strip - box


def _sobol_normal(dim: int, m: int, seed: int) -> np.ndarray:
    from scipy.stats import qmc  # here: scipy.stats costs a second at import, and only T >= 3 tables need it

    u = qmc.Sobol(d=dim, scramble=True, seed=np.random.default_rng(seed)).random_base2(m)
    return special.ndtri(np.clip(u, 1e-12, 1 - 1e-12))


def _label_codes(Z: np.ndarray, T: int) -> np.ndarray:
    """Integer code ``sum_a argmax_b M(z)_ab T^a`` of the hardmax label of field vectors ``Z`` (``(..., K)``)."""
    arg = vec_to_mat(Z.reshape(-1, Z.shape[-1]), T).argmax(axis=-1)
    return (arg * (T ** np.arange(T))[None, :]).sum(axis=1).reshape(Z.shape[:-1])


#: QMC settings of ``T >= 3``: log2 of the outer (omega) and inner (noise) scrambled Sobol sizes, and the seed.
QMC_LOG2_OUTER, QMC_LOG2_INNER, QMC_SEED = 10, 11, 0
#: The ``s = q/V_eff`` grid of the ``T >= 3`` table (log-spaced, four per decade; above it the
#: ``sqrt(s)`` law, whose constant at ``s = 100`` is within 1.1% of its limit at ``T = 2``).
QMC_S_GRID = np.logspace(-2.0, 2.0, 17)


@functools.lru_cache(maxsize=8)
def _qmc_fisher_table(T: int, log2_outer: int, log2_inner: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``J_T(s)`` on ``QMC_S_GRID`` (unit noise) by nested scrambled Sobol quadrature.

    Outer nodes ``omega = sqrt(s) w`` (the same ``w`` for every ``s``); two independently scrambled
    inner sets of noise nodes ``xi``, projected orthogonally to the shift ``u`` (labels do not
    depend on ``xi . u``). Per outer node and label ``y``, each inner set estimates
    ``Z_y`` and ``grad Z_y = E[1_y xi]``; ``||grad Z_y||^2/Z_y`` is estimated by the product of the two
    (independent, hence unbiased) gradient estimates over the mean of the two ``Z_y`` estimates.
    """
    K = T * (T + 1) // 2
    ss = np.random.SeedSequence(seed)
    s_out, s_a, s_b = (int(x.generate_state(1)[0]) for x in ss.spawn(3))
    W = _sobol_normal(K, log2_outer, s_out)
    u = shift_direction(T)
    inner = []
    for sd in (s_a, s_b):
        Xi = _sobol_normal(K, log2_inner, sd)
        inner.append(Xi - np.outer(Xi @ u, u))
    N = inner[0].shape[0]
    n_codes = T**T
    J = np.empty(QMC_S_GRID.size)
    for i, sv in enumerate(QMC_S_GRID):
        tot = 0.0
        for chunk in np.array_split(np.arange(W.shape[0]), max(1, W.shape[0] * N // 500_000)):
            nb = len(chunk) * n_codes
            est = []
            for Xi in inner:
                codes = _label_codes(math.sqrt(sv) * W[chunk, None, :] + Xi[None, :, :], T)  # (c, N)
                flat = (codes + n_codes * np.arange(len(chunk))[:, None]).ravel()
                cnt = np.bincount(flat, minlength=nb) / N
                grad = (
                    np.stack(
                        [
                            np.bincount(flat, weights=np.broadcast_to(Xi[:, k], codes.shape).ravel(), minlength=nb)
                            for k in range(K)
                        ],
                        axis=1,
                    )
                    / N
                )
                est.append((cnt, grad))
            Zm = 0.5 * (est[0][0] + est[1][0])
            ok = (est[0][0] > 0) & (est[1][0] > 0)
            tot += float(np.sum(np.einsum("bk,bk->b", est[0][1][ok], est[1][1][ok]) / Zm[ok]))
        J[i] = tot / W.shape[0]
    return QMC_S_GRID.copy(), J


def hardmax_fisher_information(T: int, q: float, V: float, noise: float) -> float:
    """``E_{omega, y} ||g_out(y; omega, V)||^2`` of the hardmax channel (docs: Theory, :ref:`theory-bayes`).

    ``omega ~ N(0, q I_K)`` (the posterior-mean fields), ``y`` the one-hot row argmax of
    ``M(omega + sqrt(V_eff) xi)``, ``V_eff = V + noise/2``, ``g_out = grad_omega log Z_out``. The labels
    are invariant under ``h -> c h`` (``c > 0``), so the result is ``J_T(q/V_eff)/V_eff`` with
    ``J_T(s)`` the information at unit noise: exact quadrature of bivariate normal orthant
    probabilities at ``T = 2`` (``_t2_fisher``, relative error below ``1e-8``), a fixed nested
    scrambled Sobol table for ``T >= 3`` (``QMC_S_GRID``, ``2^10`` outer and twice ``2^11``
    inner nodes, seed ``QMC_SEED``; interpolated linearly in ``(log s, log J)``, ``J(s) = J(s_min)``
    below the grid and ``J(s_max) sqrt(s_max/s)`` above it, the boundary-layer law of a hard
    threshold). Quadrature error of the ``T >= 3`` table, measured by running the same scheme
    at ``T = 2`` against the exact values: below ``0.1%`` for ``s <= 2``, about ``0.5%`` at
    ``s = 10 .. 100``, about ``1.5%`` beyond (the extrapolation). The
    Gaussian-observation bound ``(K - 1)/V_eff`` (labels that reveal the noisy logits up to the
    shift) holds: argmax labels are a function of the noisy logits.

    Examples
    --------
    >>> round(hardmax_fisher_information(2, q=0.0, V=1.0, noise=0.0), 6)   # at omega = 0: below (K-1)/V = 2
    1.239432
    """
    if T < 2:
        raise ValueError(f"T must be >= 2 for the hardmax channel (got {T})")
    Ve = V + noise / 2.0
    if not Ve > 0:
        return math.inf
    sv = max(q, 0.0) / Ve
    if T == 2:
        return _t2_fisher(sv) / Ve
    grid, J = _qmc_fisher_table(T, QMC_LOG2_OUTER, QMC_LOG2_INNER, QMC_SEED)
    if sv <= grid[0]:
        return float(J[0]) / Ve
    if sv >= grid[-1]:
        return float(J[-1] * math.sqrt(grid[-1] / sv)) / Ve
    return float(np.exp(np.interp(math.log(sv), np.log(grid), np.log(J)))) / Ve


def hardmax_bayes_denoiser(
    labels: np.ndarray,
    omega: np.ndarray,
    V: float,
    noise: float,
    *,
    method: str = "auto",
    log2_inner: int = 12,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Bayes output denoiser of the hardmax channel: ``g_out = grad_omega log Z_out`` and ``tr(-dg_out/domega)``.

    ``Z_out(y; omega, V) = P(onehot argmax_rows M(omega + sqrt(V_eff) xi) = y)``, ``V_eff = V + noise/2``,
    ``xi ~ N(0, I_K)``; ``E[z | y] = omega + V g_out`` is the posterior mean of the noiseless fields.

    * ``T = 2``: ``Z_out = Phi2(s_1 a_1, s_2 a_2; s_1 s_2/3)`` with ``a = A omega/sqrt(3 V_eff)`` the
      standardised row margins (``A`` rows ``(sqrt2, -1, 0)``, ``(0, -1, sqrt2)``), ``s_a = +1`` where row
      ``a``'s label is its diagonal; ``g_out = A^T grad_a log Z/sqrt(3 V_eff)`` and
      ``tr(-dg_out/domega) = -tr(R Hess_a log Z)/V_eff``, ``R = A A^T/3``: closed forms.
    * ``T >= 3``: ``g_out = E[xi | y]/sqrt(V_eff)`` and ``tr(-dg_out/domega) = (K - 1 - tr Cov(P xi | y))/V_eff``
      (``P`` the projector orthogonal to the shift) over a fixed scrambled Sobol set of
      ``2^log2_inner`` noise nodes (``seed``); a sample whose label fewer than two nodes reproduce
      gets ``g = 0`` and trace 0. ``method="qmc"`` uses this route at ``T = 2`` too (a check of it).

    Parameters
    ----------
    labels : (n, T, T) array
        One-hot rows.
    omega : (n, K) array
        Field means (GAMP's ``omega``).
    V, noise : float
        Field variance of the message and the label-noise level (``Delta``).

    Returns
    -------
    g : (n, K) array
    trace : (n,) array
        ``tr(-dg_out/domega)`` per sample.
    """
    if method not in ("auto", "qmc"):
        raise ValueError(f"method must be 'auto' or 'qmc' (got {method!r})")
    Y = np.asarray(labels, dtype=float)
    n, T = Y.shape[0], Y.shape[1]
    Ve = V + noise / 2.0
    if T == 2 and method == "auto":
        sg = _t2_signs(Y)
        a = omega @ _A2.T / math.sqrt(3.0 * Ve)
        r = sg[:, 0] * sg[:, 1] * _RHO2
        _, Gx, Hx = bvn_log_derivatives(sg[:, 0] * a[:, 0], sg[:, 1] * a[:, 1], r)
        Ga = sg * Gx
        Ha = Hx * sg[:, :, None] * sg[:, None, :]
        g = Ga @ _A2 / math.sqrt(3.0 * Ve)
        R = np.array([[1.0, _RHO2], [_RHO2, 1.0]])
        return g, -np.einsum("nij,ji->n", Ha, R) / Ve
    K = T * (T + 1) // 2
    u = shift_direction(T)
    Xi = _sobol_normal(K, log2_inner, seed)
    Xi = Xi - np.outer(Xi @ u, u)
    code_y = (Y.argmax(axis=-1) * (T ** np.arange(T))[None, :]).sum(axis=1)
    g = np.zeros((n, K))
    tr = np.zeros(n)
    sd = math.sqrt(Ve)
    for chunk in np.array_split(np.arange(n), max(1, n * Xi.shape[0] // 500_000)):
        hit = (_label_codes(omega[chunk, None, :] + sd * Xi[None, :, :], T) == code_y[chunk, None]).astype(float)
        cnt = hit.sum(axis=1)
        ok = cnt >= 2
        m = hit @ Xi / np.maximum(cnt, 1.0)[:, None]
        m2 = hit @ np.einsum("jk,jk->j", Xi, Xi) / np.maximum(cnt, 1.0)
        var = (m2 - np.einsum("nk,nk->n", m, m)) * cnt / np.maximum(cnt - 1.0, 1.0)
        g[chunk] = np.where(ok[:, None], m / sd, 0.0)
        tr[chunk] = np.where(ok, (K - 1 - var) / Ve, 0.0)
    return g, tr


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

    Bayes-optimal output side (:attr:`own_bayes_output`): the labels are orthant indicators of
    the noisy logits, not Gaussian observations of them (:attr:`labels_reveal_logits` is ``False``,
    :meth:`label_logits` ``None``); ``Z_out`` is a Gaussian polytope probability, whose Fisher
    information (:meth:`bayes_output_information`, ``hardmax_fisher_information``) enters the
    Bayes state evolution and whose log-derivatives (:meth:`bayes_output_denoiser`,
    ``hardmax_bayes_denoiser``) are Bayes-GAMP's output step.

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
    own_bayes_output: ClassVar[bool] = True
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

    def bayes_output_information(self, T: int, q: float, V: float, noise: float) -> float:
        return hardmax_fisher_information(T, q, V, noise)

    def bayes_output_denoiser(
        self, labels: np.ndarray, omega: np.ndarray, V: float, noise: float
    ) -> tuple[np.ndarray, np.ndarray]:
        return hardmax_bayes_denoiser(labels, omega, V, noise)
