"""GAMP on instances against the state evolution, for ERM and for the Bayes-optimal estimator (README.md).

1. ERM-GAMP, softmax (seq2lab), T = 2, d = 150, lam = 0.01: final matrix error and test error
   against the SE fixed point ``theory(problem)`` (acceptance: within 5%), and the overlaps
   ``q_t, m_t`` of the undamped iterations against the SE iterates
   :func:`singlehead.amp.se_iterates` started at AMP's ``(q_0, m_0, V_0)``.
2. Bayes-GAMP (GAMP-RIE), noiseless softmax, T = 2, kappa0 = 0.5, d = 150, at three alphas below
   the Bayes perfect-recovery threshold ``(kappa0 - kappa0^2/2)/c_T = 0.1875``: matrix error vs
   the Bayes-optimal MMSE of :func:`singlehead.bayes.bayes_overlap` (acceptance: within 5%).

``--quick``: d = 100, one point of each.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from singlehead import AMPOptions, MPTarget, Problem, theory
from singlehead.amp import amp, se_iterates
from singlehead.bayes import bayes_overlap
from studies import echo_into, study_parser, write_table

HERE = Path(__file__).resolve().parent


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def main(quick: bool = False, *, seed: int = 0) -> int:
    """Print the comparisons; 0 when every relative error is below 5 %."""
    lines: list[str] = []

    say = echo_into(lines)

    d = 100 if quick else 150
    torch.set_num_threads(1)
    ok = True

    say(f"== ERM-GAMP vs state evolution: seq2lab, T = 2, d = {d}, lam = 0.01, kappa0 = 0.5 ==")
    cases = [(0.1, 0.0), (0.2, 0.0), (0.3, 0.5)] if not quick else [(0.2, 0.0)]
    rows = []
    for alpha, noise in cases:
        p = Problem(d=d, T=2, alpha=alpha, noise=noise, lam=0.01, target=MPTarget(0.5))
        t0 = time.perf_counter()
        r = amp(p, seed, options=AMPOptions(max_iter=400, tol=1e-6))
        t_amp = time.perf_counter() - t0
        th = theory(p)
        h = r["history"]
        n_und = next((i for i, dmp in enumerate(h["damping"]) if dmp < 1), len(h["q"]) - 1)
        n_se = min(n_und, 15)
        se = se_iterates(p, h["q"][0], h["m"][0], h["Sigma"][0], n_se)
        say(
            f"\nalpha = {alpha}, Delta = {noise}: {r['iterations']} iterations ({t_amp:.0f} s), "
            f"converged = {r['converged']}, undamped for {n_und}"
        )
        say("   t |   q_AMP    q_SE  |   m_AMP    m_SE  | Sigma_AMP Sigma_SE")
        for t in range(n_se + 1):
            say(
                f"  {t:2d} | {h['q'][t]:7.4f} {se['q'][t]:7.4f} | {h['m'][t]:7.4f} {se['m'][t]:7.4f} | "
                f"{h['Sigma'][t]:8.4f} {se['Sigma'][t]:8.4f}"
            )
        rows.append((alpha, noise, r, th))
    say(
        "\n alpha Delta | matrix_err AMP    SE   rel  | test_err AMP    SE    rel  | train AMP    SE   "
        "| q AMP   SE    | m AMP   SE"
    )
    for alpha, noise, r, th in rows:
        em, et = rel(r.matrix_error, th.matrix_error), rel(r.test_error, th.test_error)
        ok &= em < 0.05 and et < 0.05
        say(
            f" {alpha:5.2f} {noise:4.1f}  |  {r.matrix_error:8.4f} {th.matrix_error:8.4f} {em:5.1%} | "
            f"{r.test_error:8.5f} {th.test_error:8.5f} {et:5.1%} | {r.train_error:7.5f} {th.train_error:7.5f} | "
            f"{r['q']:.4f} {th['q']:.4f} | {r['m']:.4f} {th['m']:.4f}"
        )

    say(f"\n== Bayes-GAMP (GAMP-RIE) vs Bayes-optimal SE: noiseless seq2lab, T = 2, kappa0 = 0.5, d = {d} ==")
    say(" alpha | MSE AMP   MMSE SE   rel   | iterations | Q0 sample")
    for alpha in [0.05, 0.1, 0.15] if not quick else [0.1]:
        p = Problem(d=d, T=2, alpha=alpha, noise=0.0, target=MPTarget(0.5))
        r = amp(p, seed, options=AMPOptions(bayes=True, max_iter=200, tol=1e-6, n_test=2000))
        bo = bayes_overlap(p)
        e = rel(r.matrix_error, bo["mmse"])
        ok &= e < 0.05
        say(
            f" {alpha:5.2f} | {r.matrix_error:8.4f} {bo['mmse']:8.4f}  {e:5.1%} | {r['iterations']:4d} "
            f"({'conv' if r['converged'] else 'not conv'}) | {r['Q0']:.4f}"
        )
    say("\nPASS" if ok else "\nFAIL (some relative error >= 5%)")
    if not quick:
        write_table(HERE, lines)
    return 0 if ok else 1


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument("--quick", action="store_true", help="d = 100, fewer points")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    return main(a.quick, seed=a.seed)


if __name__ == "__main__":
    raise SystemExit(cli())
