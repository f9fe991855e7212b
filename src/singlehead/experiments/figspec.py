"""The reproduction's building blocks: sizes per mode (:class:`Scale`), the run context and the figure registry.

Every figure is a function ``(ctx) -> FigureOutput`` registered with :func:`figure`; it reads
its sizes from ``ctx.scale``, builds its :class:`~singlehead.problem.Problem` objects, runs their
jobs through the cached runner and states its parameters from those problems
(:func:`problem_params`).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch
from joblib import Parallel, delayed
from matplotlib.figure import Figure
from tqdm.auto import tqdm

from ..analysis.scaling import SAMPLE_LIMITED_SETTING
from ..problem import MPTarget, PowerLawTarget, Problem
from ..results import Result, stable_hash
from ..simulation import TrainOptions
from ..threads import available_cores, configure
from .grid import Job
from .report import FigureOutput
from .runner import Cache, run_jobs
from .verdict import judge


@dataclass(frozen=True)
class Scale:
    """Every size of one reproduction mode (the figures read their grids here, never the mode name).

    ``d``, ``seeds``, ``sim_alphas``, ``theory_points``, ``n_test``: the MP figures;
    ``spectra_d``: learned spectra and the power-law spectrum; ``fvd_alphas``/``fvd_lams``: the
    factorized-vs-direct lam scan; ``peak_lams``/``peak_sim_alphas``: the interpolation peak;
    ``power_d``/``power_points``: sequential recovery; ``scaling_d``, ``scaling_n_over_d``,
    ``scaling_points``, ``scaling_gammas`` (with label noise), ``scaling_gammas_clean``
    (``Delta = 0``): the scaling curves; ``tail_n_over_d``, ``tail_points``, ``tail_lam``: the
    tail-noise curve (at ``scaling_d``, ``Delta = 0``, fixed ``lam``; K ~ 9 -> 94 at d = 10^5);
    ``phase_d``, ``phase_n_points``, ``phase_lam_points``: the (n/d, lam) phase diagram.
    Per-figure overrides (0 = use ``seeds`` / ``d`` / ``spectra_d``):
    ``adam_seeds`` (Adam runs of errors vs alpha), ``peak_seeds`` and ``peak_sim_lams`` (simulations
    of the interpolation peak; ``peak_small_lam_sim_alphas``: its simulated alphas at ``lam < 1e-4``,
    empty = ``peak_sim_alphas``: deep in the interpolation regime, alpha = 0.1 at ``lam = 1e-5``,
    L-BFGS needs 2500-5000 iterations for the minimum-norm interpolator, 35-96 s a fit), ``spectra_seeds`` and ``spectra_high_alpha_d`` (learned spectra;
    the latter for alpha > 4, where n = alpha d^2 makes d = spectra_d too costly), ``decomp_d``
    (the decomposition's simulation check, a same-d comparison), ``amp_d`` and ``amp_seeds``
    (Bayes-AMP; d at least 50).
    ``fs_ds``, ``fs_seeds`` (one count per size), ``fs_alphas``: the finite-size scan (gap to theory
    vs 1/d, extrapolated to d = inf); ``spectra_fs_ds`` / ``spectra_fs_seeds``: the extra sizes
    (besides the learned-spectra d at alpha = 40) at which the alpha = 40 learned spectrum is
    simulated to extrapolate its checks to d = inf; ``fvd_fs_ds`` / ``fvd_fs_seeds``: the same for
    factorized_vs_direct (its kappa0 = 0.05 target has rank 0.05 d; multiples of 20 keep it whole;
    empty: the d-only rule).
    """

    mode: str
    d: int
    seeds: int
    sim_alphas: tuple[float, ...]
    theory_points: int
    n_test: int
    spectra_d: int
    fvd_alphas: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
    fvd_lams: tuple[float, ...] = tuple(np.round(np.geomspace(1e-3, 10.0, 9), 6))
    peak_lams: tuple[float, ...] = (1e-5, 1e-3, 1e-2, 1e-1)
    peak_sim_alphas: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5, 1.0)
    power_d: int = 1000
    power_points: int = 7
    scaling_d: int = SAMPLE_LIMITED_SETTING["d"]
    scaling_n_over_d: tuple[float, float] = SAMPLE_LIMITED_SETTING["n_over_d"]
    scaling_points: int = 5
    scaling_gammas: tuple[float, ...] = (0.75, 1.25, 2.0)
    scaling_gammas_clean: tuple[float, ...] = (1.25, 2.0)
    tail_n_over_d: tuple[float, float] = (17.7828, 177.828)
    tail_points: int = 5
    tail_lam: float = 0.01
    phase_d: int = 1000
    phase_n_points: int = 10
    phase_lam_points: int = 8
    adam_seeds: int = 0
    peak_seeds: int = 0
    peak_sim_lams: tuple[float, ...] = (1e-3,)
    peak_small_lam_sim_alphas: tuple[float, ...] = ()
    spectra_seeds: int = 0
    spectra_high_alpha_d: int = 0
    decomp_d: int = 0
    amp_d: int = 0
    amp_seeds: int = 0
    fs_ds: tuple[int, ...] = (25, 35, 50, 70, 100)
    fs_seeds: tuple[int, ...] = (12, 10, 8, 6, 8)  # d = 100: the 8 seeds of errors_vs_alpha (cached)
    fs_alphas: tuple[float, ...] = (0.25, 0.5, 1.0)
    fvd_fs_ds: tuple[int, ...] = (40, 60)  # with d = 100; full: (40, 60, 80) (d = 80 is 60 % of the quick scan's cost)
    fvd_fs_seeds: tuple[int, ...] = (16, 12)
    spectra_fs_ds: tuple[int, ...] = (20, 30, 40)
    spectra_fs_seeds: tuple[int, ...] = (8, 6, 4)
    device: str = "cpu"

    def seeds_or(self, n: int) -> int:
        """``n`` if set (> 0), else the scale's ``seeds``."""
        return int(n) if n > 0 else self.seeds


def make_scale(mode: str) -> Scale:
    """``quick`` (laptop: 12-15 min on 2 cores, measured; 13-17 min with the install), ``full`` (paper
    scale), ``smoke`` (tests: < 3 min)."""
    if mode == "smoke":
        return Scale("smoke", d=16, seeds=2, sim_alphas=(0.25, 1.0), theory_points=6, n_test=500, spectra_d=16,
                     fvd_alphas=(0.05, 0.5), fvd_lams=tuple(np.round(np.geomspace(1e-3, 10.0, 3), 6)),
                     peak_lams=(1e-3, 1e-1), peak_sim_alphas=(0.1, 0.5), power_d=200, power_points=5,
                     scaling_d=10_000, scaling_n_over_d=(100.0, 1000.0), scaling_points=3,
                     scaling_gammas=(1.25, 2.0), phase_d=200, phase_n_points=5, phase_lam_points=3,
                     fs_ds=(8, 12, 16), fs_seeds=(3, 3, 3), fs_alphas=(0.25, 1.0), spectra_fs_ds=(8, 12),
                     fvd_fs_ds=(8, 12), fvd_fs_seeds=(3, 3),
                     spectra_fs_seeds=(3, 3))
    if mode == "quick":
        return Scale("quick", d=100, seeds=8, sim_alphas=(0.1, 0.25, 0.5, 1.0, 2.0), theory_points=24,
                     n_test=4000, spectra_d=100, adam_seeds=3, peak_seeds=4, peak_sim_lams=(1e-3, 1e-5),
                     peak_small_lam_sim_alphas=(0.2, 0.3, 0.5, 1.0),
                     spectra_seeds=4, spectra_high_alpha_d=60, decomp_d=50, amp_d=150,
                     amp_seeds=4)
    if mode == "full":

        dev = "cuda" if torch.cuda.is_available() else "cpu"
        return Scale("full", d=100, seeds=8, sim_alphas=(0.1, 0.25, 0.5, 1.0, 2.0, 3.0), theory_points=60,
                     n_test=20000, spectra_d=200, fvd_alphas=tuple(np.round(np.geomspace(0.01, 2, 12), 5)),
                     fvd_lams=tuple(np.round(np.geomspace(1e-3, 10.0, 17), 6)), power_d=10_000, power_points=12,
                     scaling_points=9, scaling_gammas_clean=(0.75, 1.25, 2.0), phase_d=100_000,
                     phase_n_points=13, phase_lam_points=11, fvd_fs_ds=(40, 60, 80),
                     fvd_fs_seeds=(16, 12, 8), device=dev)
    raise ValueError(f"mode must be 'quick', 'full' or 'smoke' (got {mode!r})")


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

    def sim_jobs(self, problems: list[Problem], optimizer: str = "lbfgs", *, seeds: int = 0,
                 **options: Any) -> list[Job]:
        """Simulation jobs over ``seeds`` seeds (0: the scale's); the key covers every TrainOptions
        field and the device."""
        opts = TrainOptions(optimizer=optimizer, n_test=self.scale.n_test, **options)
        st = tuple(sorted({**opts.key_fields(self.scale.device), "device": self.scale.device}.items()))
        return [Job("simulation", p, s, st) for p in problems for s in range(self.scale.seeds_or(seeds))]

    def cached(self, name: str, compute: Callable[[], Any]) -> Any:
        """A JSON-able value computed once and kept in the cache under ``name``."""
        key = self._value_key(name)
        rec = self.cache.get(key)
        if rec is None:

            configure()  # an in-process computation (the workers are idle meanwhile): every core
            rec = {"key": key, "value": compute()}
            self.cache.put(rec)
            rec = self.cache.get(key)
        return rec["value"]

    def _value_key(self, name: str) -> str:
        return "value-" + stable_hash({"mode": self.scale.mode, "name": name})

    def cached_many(self, tasks: dict[str, Callable[[], Any]], desc: str = "in-process curves") -> dict[str, Any]:
        """:meth:`cached` for several values; the missing ones are computed on the local workers.

        Used for in-process computations (scaling curves, phase diagrams) that would otherwise
        run one after another on one core. Each value is cached under its own name as soon as
        it comes back (an interrupted run keeps what finished), with a progress bar named
        ``desc``; with one worker or a Dask scheduler they run here, in order.
        """
        keys = {n: self._value_key(n) for n in tasks}
        missing = [n for n in tasks if self.cache.get(keys[n]) is None]
        if len(missing) > 1 and self.n_jobs != 1 and self.scheduler is None and self.client is None:


            workers = self.n_jobs if self.n_jobs > 0 else available_cores()
            configure(workers=workers)  # one thread policy: threads x workers <= cores
            # one task per dispatch, in the caller's order (callers put the dearest first)
            results = Parallel(n_jobs=min(workers, len(missing)), backend="loky", batch_size=1, pre_dispatch="all",
                               return_as="generator_unordered")(delayed(_named_call)(n, tasks[n]) for n in missing)
            with tqdm(total=len(tasks), initial=len(tasks) - len(missing), desc=desc, disable=not self.progress,
                      leave=False, mininterval=1.0) as bar:
                for n, v in results:
                    self.cache.put({"key": keys[n], "value": v})
                    bar.update(1)
        return {n: self.cached(n, f) for n, f in tasks.items()}

    @staticmethod
    def theory_jobs(problems: list[Problem], route: str = "theory") -> list[Job]:
        return [Job(route, p) for p in problems]


FIGURES: dict[str, Callable[[Context], FigureOutput]] = {}


def figure(name: str) -> Callable:
    """Register a figure builder under ``name``; the wrapper times the build into ``runtime_s`` and judges it.

    A builder ``(ctx) -> FigureOutput`` declares its jobs, runs them through ``ctx``, and returns
    the figure, its tidy table and agreement rows; the runtime is measured here, once for all,
    and the agreement rows, one family, get their Holm verdicts here (:func:`.verdict.judge`).
    """
    def deco(fn: Callable[[Context], FigureOutput]) -> Callable[[Context], FigureOutput]:
        @functools.wraps(fn)
        def timed(ctx: Context) -> FigureOutput:
            t0 = time.perf_counter()
            out = fn(ctx)
            if out.agreement is not None and len(out.agreement):
                out.agreement = judge(out.agreement)
            out.runtime_s = time.perf_counter() - t0
            return out

        FIGURES[name] = timed
        return timed
    return deco


def new_figure(nrows: int, ncols: int, *, figsize: tuple[float, float], **kwargs: Any) -> tuple[Figure, Any]:
    """A figure with a grid of axes (``Figure.subplots`` keywords), drawn off-screen through the object
    API: no pyplot state and no global backend switch."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kwargs)


BASE = dict(T=2, noise=0.5, lam=0.01, beta=1.0, beta0=1.0, target=MPTarget(0.5), channel="seq2lab")


def _params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def problem_params(problem: Problem, *extra: tuple[str, Any]) -> dict[str, Any]:
    """The parameters a figure states, read off its ``Problem`` (THEORY §1 names), plus ``extra`` pairs."""
    t = problem.target
    tgt = {"kappa0": t.kappa0} if isinstance(t, MPTarget) else (
        {"gamma": t.gamma} if isinstance(t, PowerLawTarget) else {"target": "custom"})
    out = {"channel": problem.channel, "T": problem.T, **tgt, "Delta": problem.noise, "lam": problem.lam,
           "beta": problem.beta, "beta0": problem.beta0}
    out.update(dict(extra))
    return out


def _mean_se(df: pd.DataFrame, by: str, qty: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and standard error over seeds per ``by`` value (failed runs, with NaN metrics, are left out)."""
    g = df.dropna(subset=[qty]).groupby(by)[qty]
    m, s, k = g.mean(), g.std(ddof=1), g.size()
    return m.index.values, m.values, (s / np.sqrt(k)).fillna(0.0).values


def _result_from_record(rec: dict[str, Any]):
    """Rebuild a theory :class:`Result` from its cached record (for analysis functions)."""
    return Result.from_dict({k: v for k, v in rec.items() if k not in ("key", "route", "seed")})


def _named_call(name: str, compute: Callable[[], Any]) -> tuple[str, Any]:
    """``(name, compute())``: lets :meth:`Context.cached_many` cache results in the order they finish."""
    return name, compute()
