"""The untied law of ``inspect``: d_prior convergence study and the time of one head's fit (a script, not a test).

1. Convergence: KS distance between the sampled singular-value laws of ``Y = M0 + sigma_s Z_s +
   sigma_a Z_a`` at ``d`` and ``2 d`` (the same number of pooled values, 4096, at every ``d``), for
   the whole law and for its top ``1/12`` (the part a MiniLM head's rank cap ``32/384`` keeps),
   beside the Monte-Carlo floor (same ``d = 128``, independent draws). ``d_prior`` is large enough
   when the ``d -> 2d`` distance is at the floor.
2. Time of one head's untied fit (:func:`singlehead.inspect.fit_untied`, default settings): a
   MiniLM-L6 head when the weights package is installed (else a synthetic ``384 x 384`` head of
   rank 32), with a fresh cache (grid laws included) and with the cache of a previous head (the
   per-head cost inside ``inspect``), beside the reference workload.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_untied_inspect.py``
"""

from __future__ import annotations

import math
import time

import numpy as np

from singlehead.inspect import UntiedLawCache, fit_untied, sample_untied_map
from singlehead.runs import reference_seconds

POINTS = (
    ("untied", 0.5, 0.5, 0.25 * math.pi),
    ("tied", 0.5, 0.5, 0.0),
    ("tied", 0.3, 1.0, 0.5 * math.pi),
    ("untied", 0.1, 0.1, 0.25 * math.pi),
)
N_VALUES = 4096
KAPPA = 1 / 12


def _ks(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample KS distance of sorted samples."""
    grid = np.concatenate([a, b])
    return float(
        np.max(
            np.abs(np.searchsorted(a, grid, side="right") / a.size - np.searchsorted(b, grid, side="right") / b.size)
        )
    )


def _tail(v: np.ndarray) -> np.ndarray:
    return v[int(v.size * (1 - KAPPA)) :]


def convergence() -> None:
    print("d_prior convergence: KS(law at d, law at 2d), whole law | top 1/12; floor = same d=128, other draws")
    c, c2 = UntiedLawCache(0), UntiedLawCache(1)
    for t, k0, sg, th in POINTS:
        ss, sa = sg * math.cos(th), sg * math.sin(th)
        laws = {d: c.law(t, k0, ss, sa, d, N_VALUES // d) for d in (64, 128, 256, 512)}
        other = c2.law(t, k0, ss, sa, 128, N_VALUES // 128)
        cells = [
            f"{d}->{2 * d}: {_ks(laws[d], laws[2 * d]):.4f} | {_ks(_tail(laws[d]), _tail(laws[2 * d])):.4f}"
            for d in (64, 128, 256)
        ]
        floor = f"{_ks(laws[128], other):.4f} | {_ks(_tail(laws[128]), _tail(other)):.4f}"
        print(
            f"  {t:6s} kappa0={k0} sigma={sg} ratio={math.tan(th) if th < 1.5 else math.inf:.3g}: "
            + "; ".join(cells)
            + f"; floor {floor}"
        )


def _heads() -> tuple[list[tuple[np.ndarray, float]], str]:
    """Two heads ``(singular values of M_h/sqrt(d_model), asymmetry)`` of MiniLM-L6 layer 1 (else synthetic)."""
    try:
        from singlehead.inspect import head_spectrum, load_attention_weights

        w = load_attention_weights("all-MiniLM-L6-v2", layers=[1])
        out = []
        for h in (0, 1):
            hs = head_spectrum(*w.head(1, h))
            out.append((hs.singular_values / math.sqrt(w.d_model), hs.asymmetry))
        return out, "MiniLM-L6 layer 1 heads 0, 1"
    except Exception:  # the weights package is optional
        out = []
        for seed in (0, 1):
            m = sample_untied_map(384, 0.5, 0.3, 0.3, eps=0.2, rank_cap=32 / 384, seed=seed)
            out.append((np.linalg.svd(m, compute_uv=False), float(np.linalg.norm(m - m.T) / np.linalg.norm(m))))
        return out, "synthetic 384 x 384, rank 32"


def timing() -> None:
    heads, name = _heads()
    cache = UntiedLawCache()
    times, fits = [], []
    for sv, asym in heads:
        t = time.perf_counter()
        fits.append(fit_untied(sv, 384, asymmetry=asym, rank_cap=32 / 384, cache=cache))
        times.append(time.perf_counter() - t)
    print(
        f"one head's untied fit ({name}, d_prior={fits[0].d_prior}, n_samples={fits[0].n_samples}): "
        f"first head {times[0]:.2f} s ({fits[0].evaluations} laws, grid included), second head {times[1]:.2f} s "
        f"({fits[1].evaluations} laws, grid shared); reference workload {reference_seconds():.3f} s"
    )


if __name__ == "__main__":
    convergence()
    timing()
