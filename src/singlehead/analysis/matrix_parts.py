"""The matrix-side parts of the error decomposition (docs: Theory, :ref:`theory-decomposition`): the orthogonal error
``r`` of the
learned map split by spectral region of its law (over-fitted bulk, unrecovered target directions,
error along recovered outliers). Used by :func:`singlehead.analysis.decompose`; conventions in
:mod:`singlehead.analysis.decomposition`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from singlehead.numerics.spectra import (
    DiscreteLaw,
    MarchenkoPastur,
    SpikedLaw,
    free_convolve_semicircle,
    soft_threshold_integrals,
)


def _signal(x: np.ndarray, H: np.ndarray, v: float) -> np.ndarray:
    """``xi(x) = x - 2 v H(x)``: signal ``u^T S0 u`` along an eigenvector of ``Y`` at ``x``."""
    return x - 2.0 * v * H


def _component_kinds(law: Any, cl: Any, bulks: list[tuple[float, float]]) -> list[tuple[str, float, float]]:
    """Which continuous components of ``mu_delta`` (from the top) are recovered signal:
    ``("atom", s, w)`` (a target eigenvalue's own bulk), ``("upper", nan, w)`` (the recovered range
    of an MP target with ``kappa0 < 1``) or ``("bulk", nan, nan)`` (fitted noise)."""
    kinds: list[tuple[str, float, float]] = []
    if isinstance(law, DiscreteLaw):  # single-atom bulks from the top
        tpos, tmass = (a[::-1] for a in law.atoms())
        j = 0
        for lo, hi in bulks:
            Mb = float(np.sum(cl.rule(lo, hi).w))
            if j < tpos.size and abs(Mb - tmass[j]) <= 1e-6 * max(Mb, 1e-300) + 1e-9:
                kinds.append(("atom", float(tpos[j]), float(tmass[j])))
                j += 1
            else:
                break
    elif isinstance(law, MarchenkoPastur) and law.kappa0 < 1 and len(bulks) >= 2:
        # the lowest component is the bulk of the null space of S0 (mass 1 - kappa0); the ones
        # above it are the recovered range of S0
        kinds = [("upper", math.nan, float(np.sum(cl.rule(lo, hi).w))) for lo, hi in bulks[:-1]]
    return kinds + [("bulk", math.nan, math.nan)] * (len(bulks) - len(kinds))


def _outlier_parts(
    law: Any, cl: Any, pos: np.ndarray, amass: np.ndarray, c: float, v: float, eta: float, eps: float, rho: float
) -> tuple[float, float, float, float, float, float, list[dict[str, float]]]:
    """The point masses of ``mu_delta`` above the cutoff (spike outliers): their shares
    ``(E_over, xi2_B, E_sh, E_mis, rec_energy, E_self)`` and recovered modes."""
    E_over = xi2_B = E_sh = E_mis = rec_energy = E_self = 0.0
    modes: list[dict[str, float]] = []
    if not pos.size:
        return E_over, xi2_B, E_sh, E_mis, rec_energy, E_self, modes
    full = cl.rule()
    outl = {round(o.position, 12): o for o in cl.outliers()}
    spikes = np.asarray(getattr(law, "spikes", ()), dtype=float)
    for a, w in zip(pos[pos > c], amass[pos > c]):
        others = pos != a
        Ha = float(np.sum(full.w / (a - full.x))) + float(np.sum(amass[others] / (a - pos[others])))
        xi = a - 2.0 * v * Ha
        err2 = w * (eta * (a - eps) - rho * xi) ** 2
        o = outl.get(round(float(a), 12))
        if o is None:  # an atom that is not a spike outlier (v = 0): count it in the bulk
            E_over += err2
            xi2_B += w * xi * xi
            continue
        s = float(o.spike)
        e_i = max(s * s, xi * xi)
        E_sh += err2
        E_mis += w * (e_i - xi * xi)
        rec_energy += w * e_i
        E_self += 2.0 * eta * v * w * w
        mode = 1 + int(np.argmin(np.abs(spikes - s))) if spikes.size else 0
        modes.append(
            {"mode": float(mode), "spike": s, "position": float(a), "signal": xi, "overlap": xi / s, "mass": float(w)}
        )
    return E_over, xi2_B, E_sh, E_mis, rec_energy, E_self, modes


def matrix_error_parts(law, v: float, eta: float, eps: float, cap: float | None) -> dict[str, Any]:
    """Identity-1 parts of ``r = ||Shat - rho S0||^2`` at ``rho = m/Q0`` (``m`` from the law)."""
    cl = free_convolve_semicircle(law, v)
    ti = soft_threshold_integrals(cl, math.sqrt(v), eps, rank_cap=cap)
    c = float(ti.cutoff)
    Q0 = float(law.second_moment())
    q_law = eta * eta * float(ti.J)
    m_law = eta * (float(ti.J) - 0.5 * math.sqrt(v) * float(ti.dJ_ddelta) - 0.5 * eps * float(ti.dJ_deps))
    rho = m_law / Q0
    pos, amass = cl.atoms()

    def H_at(rule) -> np.ndarray:
        return rule.H + ((1.0 / (rule.x[:, None] - pos[None, :])) @ amass if pos.size else 0.0)

    bulks = sorted(cl.edges(), key=lambda e: -e[1])  # from the top
    kinds = _component_kinds(law, cl, bulks)
    modes: list[dict[str, float]] = []
    E_over = E_sh = E_mis = xi2_B = rec_energy = 0.0
    upper_kept_xi2 = 0.0
    upper_idx: list[int] = []
    xi2_whole = []
    mode_offset = len(law.spikes) if isinstance(law, SpikedLaw) else 0
    for k, ((lo, hi), (kind, s, w)) in enumerate(zip(bulks, kinds)):
        rb = cl.rule(lo, hi)
        xib = _signal(rb.x, H_at(rb), v)
        xi2_whole.append(float(np.sum(rb.w * xib * xib)))
        if hi <= c:
            continue
        rk = cl.rule(max(lo, c), hi)
        if rk.x.size == 0:
            continue
        xi = _signal(rk.x, H_at(rk), v)
        err2 = float(np.sum(rk.w * (eta * (rk.x - eps) - rho * xi) ** 2))
        kept_xi2 = float(np.sum(rk.w * xi * xi))
        if kind == "bulk":
            E_over += err2
            xi2_B += kept_xi2
            continue
        E_sh += err2
        sig = float(np.sum(rb.w * xib))
        if kind == "atom":
            E_mis += w * s * s - kept_xi2
            rec_energy += w * s * s
            modes.append(
                {
                    "mode": float(mode_offset + len(modes) + 1),
                    "spike": s,
                    "position": 0.5 * (lo + hi),
                    "signal": sig / w,
                    "overlap": sig / (w * s) if s > 0 else math.nan,
                    "mass": w,
                }
            )
        else:  # separated upper bulk: energy assigned after the loop
            upper_idx.append(k)
            upper_kept_xi2 += kept_xi2
            modes.append(
                {
                    "mode": 0.0,
                    "spike": math.nan,
                    "position": 0.5 * (lo + hi),
                    "signal": sig / w,
                    "overlap": math.nan,
                    "mass": w,
                }
            )
    if upper_idx:
        e_R = Q0 - sum(x for k, x in enumerate(xi2_whole) if k not in upper_idx)
        E_mis += e_R - upper_kept_xi2
        rec_energy += e_R
    # point masses (spike outliers)
    o = _outlier_parts(law, cl, pos, amass, c, v, eta, eps, rho)
    E_over, xi2_B, E_sh, E_mis, rec_energy = (E_over + o[0], xi2_B + o[1], E_sh + o[2], E_mis + o[3], rec_energy + o[4])
    E_self = o[5]
    modes += o[6]
    r2 = rho * rho
    modes.sort(key=lambda d: d["mode"])
    return {
        "E_over": E_over,
        "E_under": r2 * (Q0 - rec_energy - xi2_B),
        "E_approx_shrinkage": E_sh,
        "E_approx_misalignment": r2 * E_mis,
        "E_approx_self": rho * E_self,
        "Q0": Q0,
        "q_law": q_law,
        "m_law": m_law,
        "rho": rho,
        "recovered": modes,
        "cutoff": c,
    }
