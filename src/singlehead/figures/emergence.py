"""Emergence during training: the learned spectrum's outliers switching on under Adam.

A power-law target ``s_i = sqrt(d) i^-gamma`` (arXiv 2509.24914, §5) has a few isolated
eigenvalues (spikes). Started near ``S = 0`` (small initial weights), full-batch Adam learns
the target's directions one after another: each spike of ``S`` switches on in turn, and the
test error drops at each switch and sits on a plateau in between. The end point is the ERM
minimiser, which the theory describes: the state-evolution test error
(:func:`singlehead.theory`) and the outlier positions of the learned-spectrum
law (:func:`singlehead.analysis.learned_spectrum.learned_spectrum`,
``eta (s + delta^2/s - eps)`` for each surviving spike ``s``).

:func:`emergence_data` runs one recorded simulation (``TrainOptions.record_every``) and the
theory; :func:`plot_emergence` draws test/train error and the top eigenvalues of ``S`` against
the Adam step with the theory's end points marked; :func:`emergence_figure` does both and
writes ``emergence.json`` and ``emergence.png``/``.pdf``. In the reproduction the figure is
:class:`EmergenceSpec` with its four functions (:mod:`.figspec`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from singlehead.analysis.learned_spectrum import learned_spectrum
from singlehead.figures.figspec import Context, FigureDef, FigureRun, register
from singlehead.figures.spec import FigureSpec
from singlehead.model.problem import PowerLawTarget, Problem
from singlehead.model.results import jsonable, stable_hash
from singlehead.report.compare import DEFAULT_ALLOWANCE, tol_columns
from singlehead.sim.simulation import TrainOptions, simulate
from singlehead.state_evolution import theory as se_theory

EMERGENCE_PROBLEM = Problem(
    d=60, T=1, alpha=2.0, channel="linear", noise=0.1, lam=0.05, target=PowerLawTarget(gamma=1.5)
)
"""Quadratic network (linear channel, T = 1), power-law target with gamma = 1.5, d = 60."""

EMERGENCE_OPTIONS = TrainOptions(
    optimizer="adam",
    precision="float64",
    lr=0.005,
    init_scale=1e-5,
    max_steps=2000,
    n_test=2000,
    record_every=5,
    record_top=6,
)
"""Adam at lr 0.005 from weights of scale 1e-5, recorded every 5 steps (up to 2000 steps).
Pure float64 Adam, so every recorded step is an Adam step (``mixed`` would append L-BFGS polish steps)."""


def emergence_data(
    problem: Problem = EMERGENCE_PROBLEM,
    options: TrainOptions = EMERGENCE_OPTIONS,
    seed: int = 0,
    device: str = "cpu",
    theory: bool = True,
) -> dict[str, Any]:
    """One recorded simulation and the theory's end points, as a JSON-able dict.

    Returns
    -------
    dict
        ``config``, ``options``, ``seed``, ``trajectory`` (see :func:`singlehead.simulate`),
        ``final`` (test/train error with standard error, top eigenvalues, steps, runtime),
        ``target_top`` (largest target eigenvalues) and, with ``theory``, ``theory``
        (``test_error``, ``train_error``, ``outliers``: positions of the surviving spikes).
    """
    if options.record_every is None:
        raise ValueError("options.record_every must be an integer >= 1 for an emergence run (got None)")
    r = simulate(problem, seed, options=options, device=device)
    k = options.record_top
    out: dict[str, Any] = {
        "problem": problem.to_dict(),
        "options": options.key_fields(device),
        "seed": int(seed),
        "trajectory": r["trajectory"],
        "final": {
            "test_error": r.test_error,
            "test_error_se": r["test_error_se"],
            "train_error": r.train_error,
            "top_eigenvalues": [float(x) for x in r["eigenvalues"][:k]],
            "steps": r.iterations,
            "converged": r.converged,
            "runtime_s": r.runtime_s,
        },
        "target_top": [float(x) for x in problem.target.spectrum(problem.d)[:k]],  # descending
    }
    if theory:
        th = se_theory(problem)
        ls = learned_spectrum(problem, th)
        out["theory"] = {
            "test_error": th.test_error,
            "train_error": th.train_error,
            "outliers": sorted((float(o["position"]) for o in ls.outliers), reverse=True)[:k],
        }
    return out


def draw_emergence(data: dict[str, Any]):
    """The matplotlib figure of :func:`plot_emergence` (not saved)."""
    tr = data["trajectory"]
    steps = np.asarray(tr["step"], dtype=float)
    top = np.asarray(tr["top_eigenvalues"], dtype=float)
    c = data["problem"]
    fig = Figure(figsize=(7.0, 7.0))
    ax0, ax1 = fig.subplots(2, 1, sharex=True)
    te, se = np.asarray(tr["test_error"]), np.asarray(tr["test_error_se"])
    ax0.plot(steps, te, color="C0", label="test error (simulation)")
    ax0.fill_between(steps, te - 2 * se, te + 2 * se, color="C0", alpha=0.2, lw=0)
    ax0.plot(steps, tr["train_error"], color="C1", label="train error (noisy labels)")
    th = data.get("theory")
    if th:
        ax0.axhline(th["test_error"], color="C0", ls="--", lw=1, label="test error, state evolution (end point)")
        ax0.axhline(th["train_error"], color="C1", ls="--", lw=1, label="train error, state evolution")
    ax0.set_yscale("log")
    ax0.set_ylabel(r"error per sequence $\|\hat y - y\|_F^2$")
    ax0.legend(fontsize=8, loc="upper right")
    for j in range(top.shape[1]):
        ax1.plot(steps, top[:, j], color=f"C{j}", lw=1.5, label=f"$\\lambda_{j + 1}(S)$")
    if th:
        for j, pos in enumerate(th["outliers"]):
            ax1.axhline(pos, color=f"C{j}", ls="--", lw=0.8)
        ax1.plot([], [], color="k", ls="--", lw=0.8, label="theory outliers (end point)")
    for s in data.get("target_top", []):
        ax1.axhline(s, color="0.6", ls=":", lw=0.8)
    ax1.plot([], [], color="0.6", ls=":", lw=0.8, label="target eigenvalues")
    ax1.set_yscale("symlog", linthresh=0.1)
    ax1.set_xscale("log")
    ax1.set_xlabel("Adam step")
    ax1.set_ylabel("top eigenvalues of $S$")
    ax1.legend(fontsize=8, ncol=2, loc="upper left")
    opts = data["options"]
    fig.suptitle(
        f"Emergence under Adam: {c['channel']}, T={c['T']}, d={c['d']}, alpha={c['alpha']:g}, "
        f"power law gamma={c['target'].get('gamma')}, Delta={c['noise']:g}, lam={c['lam']:g}\n"
        f"lr={opts['lr']:g}, init scale {opts['init_scale']:g}, seed {data['seed']}",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def plot_emergence(data: dict[str, Any], path: str | Path) -> list[Path]:
    """Two panels against the Adam step (log axis): errors, and the top eigenvalues of ``S``.

    Theory end points (state-evolution test and train error, outlier positions of the
    learned-spectrum law) are dashed lines; target eigenvalues dotted grey lines.
    Writes ``path`` with suffixes ``.png`` and ``.pdf``; returns the paths.
    """
    fig = draw_emergence(data)
    base = Path(path).with_suffix("")
    base.parent.mkdir(parents=True, exist_ok=True)
    paths = [base.with_suffix(".png"), base.with_suffix(".pdf")]
    for pth in paths:
        fig.savefig(pth, dpi=130)
    return paths


def emergence_figure(
    out_dir: str | Path,
    problem: Problem = EMERGENCE_PROBLEM,
    options: TrainOptions = EMERGENCE_OPTIONS,
    seed: int = 0,
    device: str = "cpu",
) -> dict[str, Any]:
    """Run :func:`emergence_data`, write ``emergence.json`` and the figure into ``out_dir``.

    Returns the data dict with ``files`` (paths written) added.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = emergence_data(problem, options, seed, device)
    (out / "emergence.json").write_text(json.dumps(jsonable(data), allow_nan=False, default=_nan_none))
    files = plot_emergence(data, out / "emergence.png")
    data["files"] = [str(out / "emergence.json"), *map(str, files)]
    return data


def _nan_none(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if hasattr(x, "tolist"):
        return x.tolist()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def trajectory_table(data: dict[str, Any]):
    """Tidy ``pandas.DataFrame`` of a trajectory: one row per recorded step, ``eig_1..eig_k`` columns."""
    tr = data["trajectory"]
    df = pd.DataFrame({k: tr[k] for k in tr if k != "top_eigenvalues"})
    top = np.asarray(tr["top_eigenvalues"], dtype=float)
    for j in range(top.shape[1]):
        df[f"eig_{j + 1}"] = top[:, j]
    for k, v in data["problem"].items():
        df[f"cfg_{k}"] = str(v) if isinstance(v, dict) else v
    return df


def hash_options(options: TrainOptions) -> str:
    """Short stable hash of :meth:`TrainOptions.to_dict` (cache names; ``singlehead.model.results.stable_hash``)."""
    return stable_hash(options.to_dict(), 12)


@dataclass(frozen=True)
class EmergenceSpec(FigureSpec):
    """The recorded run of the emergence figure: its problem, training options and seed (on the CPU)."""

    problem: Problem = EMERGENCE_PROBLEM
    options: TrainOptions = EMERGENCE_OPTIONS
    seed: int = dataclasses.field(default=0, metadata={"min": 0})

    def check(self) -> None:
        if self.options.record_every is None:
            raise ValueError("EmergenceSpec.options.record_every must be an integer >= 1 (got None)")

    @classmethod
    def smoke(cls) -> EmergenceSpec:
        return cls(
            EMERGENCE_PROBLEM.replace(d=16), EMERGENCE_OPTIONS.replace(max_steps=300, n_test=500, record_every=10)
        )


def emergence_grid(spec: EmergenceSpec) -> dict[str, Any]:
    """The cache name of the one recorded run (from the problem's key, the options' hash and the seed)."""
    return {"name": f"emergence-{spec.problem.key()}-{hash_options(spec.options)}-seed{spec.seed}"}


def emergence_run(ctx: Context, spec: EmergenceSpec, grid: dict[str, Any]) -> FigureRun:
    """The recorded run (cached) and its checks: final test error and each outlier against the theory."""
    data = ctx.cached(grid["name"], lambda: jsonable(emergence_data(spec.problem, spec.options, spec.seed)))
    th, fin = data["theory"], data["final"]
    gap = abs(fin["test_error"] - th["test_error"])
    rows = [
        {
            "quantity": "test error",
            "theory": th["test_error"],
            "simulation": fin["test_error"],
            "se": fin["test_error_se"],
            "gap": gap,
            **tol_columns(
                DEFAULT_ALLOWANCE, 0.005, "one Adam run at finite d and step count; test-set s.e. (normal law)"
            ),
        }
    ]
    for j, (pos, sim) in enumerate(zip(th["outliers"], fin["top_eigenvalues"])):
        rows.append(
            {
                "quantity": f"outlier {j + 1}",
                "theory": pos,
                "simulation": sim,
                "se": float("nan"),
                "gap": abs(sim - pos),
                **tol_columns(
                    0.05, 0.01, "one run at finite d: the top eigenvalue's finite-size shift; floor for small outliers"
                ),
            }
        )
    agr = pd.DataFrame(rows)
    params = {
        **{k: v for k, v in data["problem"].items() if k in ("d", "T", "alpha", "channel", "noise", "lam")},
        "gamma": data["problem"]["target"].get("gamma"),
        "lr": spec.options.lr,
        "init_scale": spec.options.init_scale,
        "steps": fin["steps"],
        "seed": data["seed"],
    }
    return FigureRun(trajectory_table(data), agr, params, {"data": data})


def emergence_plot(spec: EmergenceSpec, grid: dict[str, Any], res: FigureRun) -> Figure:
    return draw_emergence(res.data["data"])


def emergence_caption(spec: EmergenceSpec, grid: dict[str, Any], res: FigureRun) -> str:
    return (
        "Adam from small weights on a power-law target: the top eigenvalues of S switch on one "
        "after another while the test error drops; dashed lines: theory end points (state-"
        "evolution test/train error, outlier positions of the learned-spectrum law); dotted: "
        "target eigenvalues."
    )


register(
    FigureDef(
        "emergence",
        "Emergence of the outliers during Adam training",
        EmergenceSpec,
        emergence_grid,
        emergence_run,
        emergence_plot,
        emergence_caption,
    )
)
