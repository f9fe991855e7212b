"""``singlehead spectrum-theory``, ``decompose``, ``scaling``: the analysis layer on the command line.

Thin wrappers of :mod:`singlehead.analysis` (arXiv 2509.24914 §5–6; arXiv 2509.24882).
"""

from __future__ import annotations

import math
from typing import Any

import click
import numpy as np

from singlehead.analysis import decompose, learned_spectrum, plot_spectrum_comparison
from singlehead.analysis.power_law import power_law_problem
from singlehead.analysis.scaling import SAMPLE_LIMITED_SETTING as SL
from singlehead.analysis.scaling import scaling_curve
from singlehead.cli.common import (
    CHANNEL,
    dumps,
    parse_floats,
    pop_problem_options,
    problem_options,
    problems_from_options,
)
from singlehead.model.problem import PowerLawTarget
from singlehead.state_evolution import theory


def _one_problem(kwargs: dict[str, Any]):
    problems = problems_from_options(**pop_problem_options(kwargs))
    if len(problems) != 1:
        raise ValueError(f"alpha must be a single value for this command (got {len(problems)} values)")
    return problems[0]


def _prior(prior: str) -> str:
    if prior not in ("auto", "asymptotic", "finite"):
        raise ValueError(f"prior must be one of auto, asymptotic, finite (got {prior!r})")
    return prior


@click.command("spectrum-theory")
@problem_options
@click.option("--prior", default="auto", show_default=True, help="State-evolution prior: auto, asymptotic or finite.")
@click.option(
    "--model",
    type=click.Choice(["auto", "discrete", "spiked"]),
    default="auto",
    show_default=True,
    help="Target law for power-law/custom targets.",
)
@click.option("--grid-size", type=int, default=256, show_default=True)
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Write a figure (PNG/PDF).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def spectrum_theory(**kwargs: Any) -> None:
    """Predicted spectrum of the learned S (state evolution, then the law in the docs page Theory, section '10. Spectrum
    of the learned matrix')."""
    if kwargs["grid_size"] < 16:
        raise ValueError(f"grid-size must be an integer >= 16 (got {kwargs['grid_size']})")
    problem = _one_problem(kwargs)
    th = theory(problem, prior=_prior(kwargs["prior"]))
    pred = learned_spectrum(problem, th, model=kwargs["model"], grid_size=kwargs["grid_size"])
    if kwargs["plot"]:
        plot_spectrum_comparison(pred, None, kwargs["plot"])
    if kwargs["as_json"]:
        out = pred.to_dict()
        out.update({"test_error": th.test_error, "matrix_error": th.matrix_error, "converged": th.converged})
        click.echo(dumps(out))
    else:
        click.echo(
            f"zero atom {pred.zero_atom:.6g}; rank {pred.rank}/{problem.d}; bulks "
            + ", ".join(f"[{a:.4g}, {b:.4g}]" for a, b in pred.bulks)
            + (f"; {len(pred.outliers)} outliers" if pred.outliers else "")
            + f"; eta={pred.eta:.4g} delta={pred.delta:.4g} eps={pred.eps:.4g}"
        )


@click.command("decompose")
@problem_options
@click.option("--prior", default="auto", show_default=True, help="State-evolution prior: auto, asymptotic or finite.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def decompose_cmd(**kwargs: Any) -> None:
    """Test error = e0 + c_r (E_over + E_under + E_approx + E_mismatch), four parts >= 0 (see the docs page Theory,
    section '11. Error decomposition')."""
    problem = _one_problem(kwargs)
    if not problem.student.thresholded:
        raise ValueError(f"student must be factorized for decompose (got {problem.student.name!r})")
    res = decompose(problem, prior=_prior(kwargs["prior"]))
    out = res.to_dict()
    if kwargs["as_json"]:
        click.echo(dumps(out))
    else:
        click.echo(
            " ".join(
                f"{k}={out[k]:.6g}"
                for k in ("e0", "c_r", "E_over", "E_under", "E_approx", "E_mismatch", "test_error", "test_error_sum")
            )
        )
        click.echo(
            f"scale rho/rho0={out['scale']:.4g} (best at fixed r: {out['rho_best'] / out['rho0']:.4g}); "
            f"orthogonal error r={out['r']:.6g}; recovered modes: {out['n_recovered']}"
        )


@click.command("scaling")
@click.option("--gamma", type=float, required=True, help="Power-law exponent (> 0.5).")
@click.option("--d", type=int, default=1000, show_default=True, help="Dimension (>= 2).")
@click.option(
    "--n", "n_spec", default=None, help="Sample sizes: list or 'log:start:stop:num' (default log:10d:d^2/10:9)."
)
@click.option(
    "--lam", type=float, default=3.0, show_default=True, help="Regularisation (or its prefactor, see --lam-scaling)."
)
@click.option(
    "--lam-scaling",
    type=click.Choice(["sqrt_alpha", "constant"]),
    default="sqrt_alpha",
    show_default=True,
    help="lam(alpha) = LAM*sqrt(alpha) (threshold at the noise scale) or constant LAM.",
)
@click.option("--noise", type=float, default=0.1, show_default=True, help="Label noise Delta (>= 0).")
@click.option("--normalisation", type=click.Choice(["sqrt_d", "unit_q0"]), default="sqrt_d", show_default=True)
@click.option("--prior", type=click.Choice(["spiked", "asymptotic", "finite"]), default="spiked", show_default=True)
@click.option(
    "--channel",
    type=CHANNEL,
    default="linear",
    show_default=True,
    help="Output channel (the softmax channels need --T >= 2).",
)
@click.option("--T", "T", type=int, default=1, show_default=True, help="Tokens per sequence.")
@click.option("--level", type=float, default=0.95, show_default=True, help="Confidence level of the exponent interval.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def scaling_cmd(gamma, d, n_spec, lam, lam_scaling, noise, normalisation, prior, channel, T, level, as_json) -> None:
    """Excess-error curve over n for a power-law target: regimes by mechanism, local and fitted exponents."""
    PowerLawTarget(gamma=gamma, normalisation=normalisation)  # validates gamma
    if d < 2:
        raise ValueError(f"d must be an integer >= 2 (got {d})")
    if not (math.isfinite(lam) and lam >= 0):
        raise ValueError(f"lam must be >= 0 (got {lam})")
    if not (math.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be >= 0 (got {noise})")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1) (got {level})")
    ns = parse_floats(n_spec, "n") if n_spec else [float(x) for x in np.geomspace(10 * d, d * d / 10, 9)]
    if len(ns) < 3 or min(ns) <= 0:
        raise ValueError(f"n must contain at least 3 sample sizes > 0 (got {len(ns)})")
    lam_fn = (lambda a: lam * math.sqrt(a)) if lam_scaling == "sqrt_alpha" else lam
    power_law_problem(gamma, d, ns[0], channel=channel, T=T)  # T for the channel, refused before the curve runs
    res = scaling_curve(
        gamma,
        d,
        sorted(ns),
        lam=lam_fn,
        noise=noise,
        normalisation=normalisation,
        prior=prior,
        level=level,
        channel=channel,
        T=T,
    )
    df = res["curve"]
    out = {
        "gamma": gamma,
        "d": d,
        "lam": lam,
        "lam_scaling": lam_scaling,
        "noise": noise,
        "prior": prior,
        "channel": channel,
        "T": T,
        "regime_counts": res["regime_counts"],
        "regime": res["regime"],
        "points": [
            {k: (v if not hasattr(v, "item") else v.item()) for k, v in row.items() if k != "recovered"}
            for row in df.to_dict(orient="records")
        ],
        "fit": res["fit"].to_dict(),
        "predicted_exponent": res["predicted"],
        "switch_on": res["switch_on"],
    }
    if as_json:
        click.echo(dumps(out))
    else:
        f = res["fit"]
        click.echo(
            f"exponent {f.exponent:.4f} [{f.ci_low:.4f}, {f.ci_high:.4f}] (predicted {res['predicted']:.4f} for "
            f"the majority regime '{res['regime']}'); K(n) = {df['K'].tolist()}"
        )
        click.echo(
            "regimes (scale that sets the last recovered mode): "
            + ", ".join(
                f"n={r.n:.3g}: {r.regime} (local {r.local_exponent_n:.3f}, predicted {r.predicted_exponent:.3f})"
                for r in df.itertuples()
            )
        )
        if len(res["regime_counts"]) > 1:
            dd, (lo, hi) = SL["d"], SL["n_over_d"]
            click.echo(
                f"note: the curve crosses regimes ({res['regime_counts']}); compare the fit with the prediction "
                f"only inside one regime. Threshold-limited with lam ∝ sqrt(alpha), exponent 1 - 1/(2 gamma): "
                f"--d {dd} --lam {SL['lam_prefactor']:g} --n log:{lo * dd:g}:{hi * dd:g}:9 (any --noise)"
            )
