"""The replica-symmetry diagnostic of a figure: where the state evolution is not expected to hold.

The state evolution (SE) is the replica-symmetric (RS) description of the ERM minimiser; for
the softmax channel the loss is not convex and RS can fail.
:func:`singlehead.state_evolution.stability` measures two things at an SE fixed point: the
smooth replicon (de Almeida–Thouless eigenvalue; RS unstable when it reaches 1) and the
share of ``Sigmahat`` carried by jumps of the output prox between its branches (where the
formal replicon is infinite and RS is an approximation of unknown quality).

**Declared failure criterion** (:data:`REPLICON_LIMIT`, :data:`JUMP_SHARE_LIMIT`): the
diagnostic fails at a point when the smooth replicon is ``>= 1`` (the AT instability), or when
the prox-jump share exceeds the relative tolerance the agreement checks grant the theory
(3 % of the predicted value, :data:`~singlehead.report.compare.DEFAULT_ALLOWANCE`): a
part of ``Sigmahat`` larger than that tolerance is outside the RS description's control, so a
3 % check of RS there has no footing. The level is the checks' tolerance, fixed before any
row is judged; it is not chosen from the rows it explains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from singlehead.model.problem import Problem
from singlehead.model.results import Result, stable_hash
from singlehead.report.compare import DEFAULT_ALLOWANCE
from singlehead.state_evolution import stability

__all__ = [
    "JUMP_SHARE_LIMIT",
    "REPLICON_LIMIT",
    "RSPoint",
    "criterion_text",
    "curve_summary",
    "failing_ranges",
    "rs_points",
    "shade_failing",
    "with_rs_diagnostic",
]

#: The smooth replicon at or above which RS is unstable (de Almeida–Thouless).
REPLICON_LIMIT = 1.0
#: The prox-jump share of Sigmahat above which the diagnostic fails: the checks' relative tolerance.
JUMP_SHARE_LIMIT = DEFAULT_ALLOWANCE


@dataclass(frozen=True)
class RSPoint:
    """The RS diagnostic at one SE point: ``replicon``, ``jump`` (share, 0-1) and its quadrature s.e.

    The values are those of :func:`singlehead.stability` at the point (``replicon``, ``prox_jump_share``,
    ``prox_jump_share_se``). The declared criterion: RS fails (:attr:`fails`) where the smooth replicon is at
    least ``REPLICON_LIMIT = 1`` (the de Almeida--Thouless instability) or the prox-jump share exceeds
    ``JUMP_SHARE_LIMIT``, the relative tolerance the agreement checks grant the theory (3 %).

    Examples
    --------
    >>> from singlehead.figures.rs_diagnostic import RSPoint
    >>> RSPoint(replicon=0.4, jump=0.01, jump_err=0.002).fails
    False
    >>> RSPoint(replicon=1.2, jump=0.0, jump_err=0.0).describe()
    'RS fails (replicon >= 1): replicon 1.20, prox jumps 0.0 ± 0.0 %'
    """

    replicon: float
    jump: float
    jump_err: float

    @property
    def fails(self) -> bool:
        """Whether the declared criterion says RS does not hold here (class docstring)."""
        return bool(self.replicon >= REPLICON_LIMIT or self.jump > JUMP_SHARE_LIMIT)

    def describe(self) -> str:
        """One short cell: the values and, when it fails, which part of the criterion."""
        rep = "inf" if math.isinf(self.replicon) else f"{self.replicon:.2f}"
        text = f"replicon {rep}, prox jumps {100 * self.jump:.1f} ± {100 * self.jump_err:.1f} %"
        if not self.fails:
            return text
        why = (
            f"replicon >= {REPLICON_LIMIT:g}"
            if self.replicon >= REPLICON_LIMIT
            else f"jumps > {100 * JUMP_SHARE_LIMIT:g} %"
        )
        return f"RS fails ({why}): {text}"


def criterion_text() -> str:
    """The declared criterion in one sentence, for notes and the report."""
    return (
        f"RS diagnostic (singlehead.state_evolution.stability) fails where the smooth replicon is >= "
        f"{REPLICON_LIMIT:g} (de Almeida-Thouless instability) or the prox-jump share of Sigmahat exceeds "
        f"{100 * JUMP_SHARE_LIMIT:g} % (the relative tolerance the checks grant the theory: a larger share of Sigmahat "
        "lies outside the RS description's control, where the formal replicon is infinite)"
    )


def rs_points(records: list[dict[str, Any]]) -> dict[tuple[float, float], RSPoint]:
    """The diagnostic of each converged SE record, keyed by ``(lam, alpha)`` (a non-symmetric student's record gets
    the two-block check: the replicon of the 2 x 2 map, the larger block's jump share)."""
    out: dict[tuple[float, float], RSPoint] = {}
    for rec in records:
        p = Problem.from_dict(rec["problem"])
        key = (p.lam, p.alpha)
        if key in out or not {"Sigmahat", "Sigmahat_s"} & rec.keys() or not rec.get("converged", True):
            continue
        s = stability(p, Result.from_dict({k: v for k, v in rec.items() if k not in ("key", "route", "seed")}))
        out[key] = RSPoint(float(s.replicon), float(s.prox_jump_share), float(s.prox_jump_share_se))
    return out


def cached_rs_points(ctx: Any, records: list[dict[str, Any]]) -> dict[tuple[float, float], RSPoint]:
    """:func:`rs_points` of ``records``, kept in ``ctx``'s cache under the records' keys (a figure's seed-plan rounds
    judge the same theory points again: their stability is computed once, in this process)."""
    name = "rs-points-" + stable_hash(sorted(r["key"] for r in records))
    # non-finite values kept as text ("inf", "nan"): the cache's JSON has no other spelling for them
    vals = ctx.cached(
        name,
        lambda: [
            [l, a, *(x if math.isfinite(x) else repr(float(x)) for x in (q.replicon, q.jump, q.jump_err))]
            for (l, a), q in sorted(rs_points(records).items())
        ],
    )
    return {(float(v[0]), float(v[1])): RSPoint(*(float(x) for x in v[2:])) for v in vals}


def with_rs_diagnostic(
    agr: pd.DataFrame, points: dict[tuple[float, float], RSPoint], lam: float | None = None
) -> pd.DataFrame:
    """Agreement rows (``cfg_lam``, ``cfg_alpha``) with ``replicon``, ``prox_jump_%``, ``diagnostic``,
    ``diagnostic_fails``.

    Rows without a ``cfg_lam`` column (a figure at one ``lam``) are looked up at ``lam``."""
    if "cfg_lam" not in agr and lam is None:
        raise ValueError("agreement rows without a cfg_lam column need lam (the figure's one lam)")
    lams = agr.cfg_lam if "cfg_lam" in agr else [lam] * len(agr)
    pts = [points.get((l, a)) for l, a in zip(lams, agr.cfg_alpha)]
    return agr.assign(
        replicon=[round(p.replicon, 3) if p else np.nan for p in pts],
        **{"prox_jump_%": [round(100 * p.jump, 1) if p else np.nan for p in pts]},
        diagnostic=[p.describe() if p else "no converged SE point" for p in pts],
        diagnostic_fails=[bool(p and p.fails) for p in pts],
    )


def failing_ranges(alphas: np.ndarray, fails: np.ndarray) -> list[tuple[float, float]]:
    """Alpha intervals where ``fails`` holds on a sorted grid; edges at the geometric midpoints to the neighbours."""
    a = np.asarray(alphas, dtype=float)
    f = np.asarray(fails, dtype=bool)
    out = []
    i = 0
    while i < len(a):
        if not f[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(a) and f[j + 1]:
            j += 1
        lo = math.sqrt(a[i - 1] * a[i]) if i > 0 else a[i]
        hi = math.sqrt(a[j] * a[j + 1]) if j + 1 < len(a) else a[j]
        out.append((float(lo), float(hi)))
        i = j + 1
    return out


def shade_failing(ax: Any, ranges: list[tuple[float, float]], color: Any, label: str) -> None:
    """Shade each alpha range on ``ax`` (one legend entry)."""
    for k, (lo, hi) in enumerate(ranges):
        ax.axvspan(lo, hi, color=color, alpha=0.15, lw=0, label=label if k == 0 else None)


def curve_summary(lam: float, alphas: np.ndarray, points: list[RSPoint]) -> str:
    """One sentence on a theory curve: where the diagnostic fails and its extreme values."""
    if not points:
        return f"lam = {lam:g}: no converged SE point to test."
    fails = np.array([p.fails for p in points])
    jumps = np.array([p.jump for p in points])
    reps = np.array([p.replicon for p in points])
    k = int(np.argmax(jumps))
    ext = (
        f"largest prox-jump share {100 * jumps[k]:.1f} % at alpha = {alphas[k]:.3g}, largest replicon "
        f"{np.max(reps):.2f}"
    )
    if not fails.any():
        return f"lam = {lam:g}: the RS diagnostic holds on the whole grid ({ext})."
    rng = "; ".join(f"{lo:.3g}-{hi:.3g}" for lo, hi in failing_ranges(alphas, fails))
    return f"lam = {lam:g}: the RS diagnostic fails for alpha in {rng} (shaded; {ext})."
