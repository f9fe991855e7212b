"""``singlehead reproduce``: the paper's figures, theory as lines and simulations as points.

Every figure is a function ``(ctx) -> FigureOutput`` registered in :data:`FIGURES`; it
declares its jobs (simulations and theory points), runs them through the cached runner,
builds one tidy table (one row per run, full config per row) and the agreement numbers.

Scales: ``quick`` (2 cores, <= 15 minutes: small d and few seeds, stated on each figure)
and ``full`` (paper scale; uses a GPU for the simulations when one is present).
"""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..problem import MPTarget, Problem
from .compare import agreement, records_to_frame
from .grid import Job
from .report import FigureOutput, save_figure, write_report
from .runner import Cache, run_jobs


@dataclass(frozen=True)
class Scale:
    """Sizes of one reproduction mode."""

    mode: str
    d: int
    seeds: int
    sim_alphas: tuple[float, ...]
    theory_points: int
    n_test: int
    spectra_d: int
    device: str = "cpu"


def make_scale(mode: str) -> Scale:
    if mode == "quick":
        return Scale("quick", d=50, seeds=3, sim_alphas=(0.1, 0.25, 0.5, 1.0, 2.0), theory_points=24,
                     n_test=4000, spectra_d=60)
    if mode == "full":
        import torch

        dev = "cuda" if torch.cuda.is_available() else "cpu"
        return Scale("full", d=100, seeds=8, sim_alphas=(0.1, 0.25, 0.5, 1.0, 2.0, 3.0), theory_points=60,
                     n_test=20000, spectra_d=200, device=dev)
    raise ValueError(f"mode must be 'quick' or 'full' (got {mode!r})")


@dataclass
class Context:
    scale: Scale
    cache: Cache
    n_jobs: int = 1
    scheduler: str | None = None
    progress: bool = True
    client: Any = None

    def run(self, jobs: list[Job], desc: str) -> list[dict[str, Any]]:
        return run_jobs(jobs, self.cache, n_jobs=self.n_jobs, scheduler=self.scheduler, progress=self.progress,
                        desc=desc, client=self.client)

    def sim_jobs(self, problems: list[Problem], optimizer: str = "lbfgs", **settings: Any) -> list[Job]:
        st = tuple(sorted({"optimizer": optimizer, "n_test": self.scale.n_test, "device": self.scale.device,
                           **settings}.items()))
        return [Job("simulation", p, s, st) for p in problems for s in range(self.scale.seeds)]

    @staticmethod
    def theory_jobs(problems: list[Problem], route: str = "theory") -> list[Job]:
        return [Job(route, p) for p in problems]


FIGURES: dict[str, Callable[[Context], FigureOutput]] = {}


def figure(name: str) -> Callable:
    def deco(fn: Callable[[Context], FigureOutput]) -> Callable[[Context], FigureOutput]:
        FIGURES[name] = fn
        return fn
    return deco


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


BASE = dict(T=2, noise=0.5, lam=0.01, beta=1.0, beta0=1.0, target=MPTarget(0.5), channel="seq2lab")


def _params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


@figure("errors_vs_alpha")
def fig_errors_vs_alpha(ctx: Context) -> FigureOutput:
    """Test and train error vs alpha (T=2, kappa0=0.5, Delta=0.5, lam=0.01), kappa in {0.75, 1}; rank."""
    t0 = time.perf_counter()
    sc = ctx.scale
    kappas = (0.75, 1.0)
    grid = np.round(np.geomspace(0.05, 3.0, sc.theory_points), 6)
    th_problems = [Problem(d=sc.d, alpha=float(a), kappa=k, **BASE) for k in kappas for a in grid]
    sim_problems = [Problem(d=sc.d, alpha=a, kappa=k, **BASE) for k in kappas for a in sc.sim_alphas]
    th = records_to_frame(ctx.run(ctx.theory_jobs(th_problems), "theory: errors vs alpha"))
    sim = records_to_frame(ctx.run(ctx.sim_jobs(sim_problems, "lbfgs"), "L-BFGS: errors vs alpha"))
    adam = records_to_frame(ctx.run(ctx.sim_jobs([p for p in sim_problems if p.kappa == 1.0], "adam"),
                                    "Adam: errors vs alpha"))
    th_at_sim = records_to_frame(ctx.run(ctx.theory_jobs(sim_problems), "theory at simulated alphas"))
    by = ["cfg_alpha", "cfg_kappa"]
    agr = agreement(sim, th_at_sim, by, ["test_error", "train_error", "matrix_error", "rank_fraction"])
    agr.insert(0, "optimizer", "lbfgs")
    agr_adam = agreement(adam, th_at_sim, by, ["test_error", "train_error"])
    agr_adam.insert(0, "optimizer", "adam")
    agr = pd.concat([agr, agr_adam], ignore_index=True)

    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    colors = {0.75: "tab:orange", 1.0: "tab:blue"}
    for k in kappas:
        t = th[th.cfg_kappa == k].sort_values("cfg_alpha")
        s = sim[sim.cfg_kappa == k].groupby("cfg_alpha")
        for ax, qty, ls in ((axes[0], "test_error", "-"), (axes[0], "train_error", "--"), (axes[2], "rank_fraction", "-")):
            ax.plot(t.cfg_alpha, t[qty], ls, color=colors[k], label=f"theory {qty.split('_')[0]}, kappa={k}")
            m, e = s[qty].mean(), s[qty].std(ddof=1) / np.sqrt(s.size())
            ax.errorbar(m.index, m.values, yerr=e.values, fmt="o" if qty != "train_error" else "s", mfc="none",
                        color=colors[k], capsize=2)
        t2 = t
        axes[1].plot(t2.cfg_alpha, t2.matrix_error, color=colors[k], label=f"theory, kappa={k}")
        m = s["matrix_error"].mean()
        axes[1].errorbar(m.index, m.values, yerr=(s["matrix_error"].std(ddof=1) / np.sqrt(s.size())).values, fmt="o",
                         mfc="none", color=colors[k], capsize=2)
    a = adam.groupby("cfg_alpha")
    axes[0].errorbar(a.test_error.mean().index, a.test_error.mean().values,
                     yerr=(a.test_error.std(ddof=1) / np.sqrt(a.size())).values, fmt="x", color="k", label="Adam, kappa=1")
    axes[0].set(xscale="log", yscale="log", xlabel="alpha = n/d^2", ylabel="error per sequence",
                title="test (solid, circles) and train (dashed, squares)")
    axes[1].set(xscale="log", yscale="log", xlabel="alpha", ylabel="||S - S0||_F^2 / d", title="matrix error")
    axes[2].set(xscale="log", xlabel="alpha", ylabel="rank / d", title="predicted vs measured rank")
    axes[0].legend(fontsize=7)
    params = {"T": 2, "kappa0": 0.5, "Delta": 0.5, "lam": 0.01, "beta": 1, "beta0": 1, "d": sc.d,
              "seeds": sc.seeds, "n_test": sc.n_test}
    fig.suptitle(f"Tied attention ERM vs theory — {_params_text(params)}", fontsize=9)
    table = pd.concat([th.assign(kind="theory"), sim.assign(kind="simulation_lbfgs"), adam.assign(kind="simulation_adam")],
                      ignore_index=True)
    return FigureOutput("errors_vs_alpha", "Test and train error vs alpha", 
                        "Lines: state evolution. Points: L-BFGS simulations (circles test, squares train; mean ± s.e. "
                        "over seeds); crosses: full-batch Adam (paper protocol).", params, fig, table, agr,
                        time.perf_counter() - t0)


def reproduce(mode: str = "quick", out: str | Path = "singlehead-report", *, n_jobs: int = 1,
              scheduler: str | None = None, only: list[str] | None = None, progress: bool = True) -> Path:
    """Build every figure (or those in ``only``), save PNG/PDF/CSV and the HTML report under ``out``.

    Results are cached under ``out/cache``: an interrupted reproduction resumes where it stopped.
    Returns the path of ``report.html``.
    """
    scale = make_scale(mode)
    out = Path(out)
    names = list(FIGURES) if not only else only
    for n in names:
        if n not in FIGURES:
            raise ValueError(f"figure must be one of {list(FIGURES)} (got {n!r})")
    ctx = Context(scale, Cache(out / "cache"), n_jobs=n_jobs, scheduler=scheduler, progress=progress)
    t0 = time.perf_counter()
    outputs = []
    for n in names:
        o = FIGURES[n](ctx)
        save_figure(o, out / "figures")
        outputs.append(o)
    import torch

    from .. import __version__

    env = {"singlehead": __version__, "torch": torch.__version__, "python": platform.python_version(),
           "cpus": __import__("os").cpu_count(), "device": scale.device}
    return write_report(outputs, out / "report.html", title="singlehead: reproduction of arXiv 2509.24914",
                        mode=mode, total_runtime_s=time.perf_counter() - t0, environment=env)
