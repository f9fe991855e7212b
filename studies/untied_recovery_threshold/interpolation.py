"""Interpolation of noisy labels by the rank-capped untied student (``kappa < 1``) at ``T = 2``: measured.

The untied student with rank cap ``p = kappa d`` interpolates the ``2 n`` row-difference equations of
noisy softmax labels iff the label vector lies in the image of the rank-``<= p`` matrices under the
equations' linear map. The dimension count (``2 n <= p (2 d - p)``, ``alpha <= kappa (2 - kappa)/2``)
bounds this from above; over the reals the image of a determinantal variety need not be the whole
space, so the count is checked here: Levenberg--Marquardt on ``M = P Q^T`` from several starts, the
smallest relative residual ``||A vec(M) - b|| / ||b||`` kept (interpolated when below ``1e-8``).
"""

from __future__ import annotations

import numpy as np

from studies.untied_recovery_threshold.instances import mp_teacher, t2_measurements


def best_residual(
    A: np.ndarray, b: np.ndarray, d: int, p: int, rng: np.random.Generator, *, starts: int = 3, steps: int = 300
) -> float:
    """Smallest relative residual over ``starts`` Levenberg--Marquardt runs on the factors of ``M = P Q^T``."""
    Ar = A.reshape(A.shape[0], d, d)
    nb = np.linalg.norm(b)
    best = np.inf
    for _ in range(starts):
        P = rng.standard_normal((d, p)) / np.sqrt(d)
        Q = rng.standard_normal((d, p)) / np.sqrt(d)
        lam = 1e-2
        r = np.einsum("kij,ij->k", Ar, P @ Q.T) - b
        cost = r @ r
        for _ in range(steps):
            JP = np.einsum("kij,jc->kic", Ar, Q).reshape(len(b), d * p)  # d r / d P
            JQ = np.einsum("kij,ic->kjc", Ar, P).reshape(len(b), d * p)  # d r / d Q
            J = np.concatenate([JP, JQ], axis=1)
            H = J.T @ J
            g = J.T @ r
            while True:
                step = np.linalg.solve(H + lam * np.diag(np.diag(H) + 1e-12), -g)
                Pn = P + step[: d * p].reshape(d, p)
                Qn = Q + step[d * p :].reshape(d, p)
                rn = np.einsum("kij,ij->k", Ar, Pn @ Qn.T) - b
                if rn @ rn < cost:
                    P, Q, r, cost = Pn, Qn, rn, rn @ rn
                    lam = max(lam / 3, 1e-12)
                    break
                lam *= 4
                if lam > 1e12:
                    break
            if lam > 1e12 or np.sqrt(cost) < 1e-12 * nb:
                break
        best = min(best, float(np.sqrt(cost) / nb))
        if best < 1e-10:
            break
    return best


def measure(d: int, kappa: float, alphas: tuple[float, ...], instances: int, *, noise: float = 0.5) -> list[dict]:
    """Records ``(alpha, instance, residual)``: labels of an MP teacher (``kappa0 = 0.5``) plus Gaussian noise of
    variance ``noise`` on each equation."""
    p = int(round(kappa * d))
    out = []
    for a in alphas:
        for i in range(instances):
            rng = np.random.default_rng([7, d, int(round(1e4 * a)), i])
            M0 = mp_teacher(d, 0.5, rng)
            A, b = t2_measurements(M0, int(round(a * d * d)), rng)
            b = b + np.sqrt(noise) * rng.standard_normal(b.shape)
            res = best_residual(A, b, d, p, rng)
            out.append(dict(d=d, kappa=kappa, alpha=a, instance=i, residual=res))
            print(f"d={d} kappa={kappa} alpha={a:.4f} instance={i} residual={res:.2e}", flush=True)
    return out
