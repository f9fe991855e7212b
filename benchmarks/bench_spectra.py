"""Speed of the spectral engine (a plain script printing a table; not a test).

Targets: MP target, J and its derivatives at one point <= 5 ms; a density on 1000
grid points <= 50 ms; finite-d mode at d = 400 <= 0.1 s per draw.

Run: ``python benchmarks/bench_spectra.py``
"""

from __future__ import annotations

import math
import time

import numpy as np

from singlehead.numerics.spectra import (
    DiscreteLaw,
    FiniteDSpectrum,
    MarchenkoPastur,
    free_convolve_semicircle,
    rie_mmse_integral,
    soft_threshold_integrals,
)


def timeit(fn, repeat: int = 20) -> float:
    """Median wall time in seconds (one warm-up call)."""
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def main() -> None:
    mp = MarchenkoPastur(0.5)
    x = np.linspace(-1.0, 5.0, 1000)
    rows = []
    rows.append(
        ("MP J, dJ/ddelta, dJ/deps (delta=0.5, eps=0.3)", timeit(lambda: soft_threshold_integrals(mp, 0.5, 0.3)), 5e-3)
    )
    rows.append(
        ("MP same, rank cap kappa=0.2 (binds)", timeit(lambda: soft_threshold_integrals(mp, 0.5, 0.3, 0.2)), None)
    )
    rows.append(("MP same, two bulks (delta=0.1)", timeit(lambda: soft_threshold_integrals(mp, 0.1, 0.3)), None))
    rows.append(
        (
            "MP density on 1000 points (incl. edges)",
            timeit(lambda: free_convolve_semicircle(mp, 0.25).density(x)),
            50e-3,
        )
    )
    rows.append(("MP RIE integral int mu^3", timeit(lambda: rie_mmse_integral(mp, 0.25)), None))
    for d in (300, 1000):
        law = DiscreteLaw(math.sqrt(d) * np.arange(1, d + 1) ** -1.0)
        rows.append(
            (
                f"power law d={d} (discrete law) J & derivs, delta=1",
                timeit(lambda: soft_threshold_integrals(law, 1.0, 0.5), 5),
                None,
            )
        )
    d, draws = 400, 4
    fd = FiniteDSpectrum(math.sqrt(d) * np.arange(1, d + 1) ** -1.0, draws=draws, seed=0)
    deltas = iter(np.linspace(0.5, 1.5, 1000))
    t = timeit(lambda: fd.threshold_integrals(next(deltas), 0.5), 5)
    rows.append((f"finite-d d={d}, per draw (eigh + HF + divergence)", t / draws, 0.1))
    t = timeit(lambda: fd.threshold_integrals(next(deltas), 0.5, pathwise=False), 5)
    rows.append((f"finite-d d={d}, per draw (eigh, overlap + divergence, the SE's call)", t / draws, None))
    t = timeit(lambda: fd.threshold_integrals(next(deltas), 0.5, rank_cap=0.035, pathwise=False), 5)
    rows.append((f"finite-d d={d}, per draw, rank cap 0.035 (tridiagonal + 14 vectors)", t / draws, None))

    w = max(len(r[0]) for r in rows)
    print(f"{'quantity':<{w}}  {'time':>10}  {'target':>8}  ok")
    for name, t, target in rows:
        tgt = "" if target is None else f"{target * 1e3:.0f} ms"
        ok = "" if target is None else ("yes" if t <= target else "NO")
        print(f"{name:<{w}}  {t * 1e3:8.2f} ms  {tgt:>8}  {ok}")


if __name__ == "__main__":
    main()
