"""The reproduction's building blocks: the figure registry, the presets and the run context.

A figure is four small functions and a frozen spec (:class:`~.spec.FigureSpec`), registered as
one :class:`FigureDef`:

- ``grid(spec)``: what to compute (the :class:`~singlehead.model.problem.Problem` objects, alphas, names);
- ``run(ctx, spec, grid) -> FigureRun``: the computation through the cached runner
  (:meth:`Context.run`, :meth:`Context.cached_many`), the tidy table, the agreement rows, the
  parameters stated on the figure and the ``data`` the plot and caption read;
- ``plot(spec, grid, run) -> Figure``: matplotlib's object API only (:func:`new_figure`);
- ``caption(spec, grid, run) -> str``: text computed from the spec and the run's results.

:func:`build` chains them, times the whole and judges the agreement rows (declared tolerances, two tests,
Holm per figure, :func:`singlehead.report.verdict.judge`). A :class:`Preset` holds one spec per registered figure
(``quick``,
``full``, ``smoke``: the spec classes' presets); :func:`~.reproduce.reproduce`, the CLI and the
Python API all build one and run it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from tqdm.auto import tqdm

from singlehead.figures.seeds import SeedGroup, SeedPlan, SeedReport, plan_round, seed_columns, served_rows
from singlehead.figures.spec import PRESETS, FigureSpec
from singlehead.model.problem import MPTarget, Problem
from singlehead.model.results import Result
from singlehead.report.verdict import judge, tally
from singlehead.report.write import THEORY_SIMULATION, FigureOutput
from singlehead.runs import Job, Workers, run_calls, run_jobs, run_stages
from singlehead.runs.cache import Cache, value_key
from singlehead.runs.threads import configure
from singlehead.sim.simulation import TrainOptions


@dataclass
class Context:
    """Where a figure's computations run: the result cache, the workers and the simulation device.

    Every result is cached under a key computed from frozen objects: a job's key from its
    :class:`~singlehead.runs.Job` (route, full problem, seed, every :class:`~singlehead.sim.simulation.TrainOptions`
    field and the device), an in-process value's from its name, which the figure builds from its
    spec's fields (:meth:`cached`).
    """

    cache: Cache
    #: local worker processes (an int as in :func:`singlehead.runs.run_jobs`) or a shared pool
    n_jobs: int | Workers = 1
    scheduler: str | None = None
    progress: bool = True
    client: Any = None
    device: str = "cpu"
    #: the seeded points of the figure being built (:meth:`seeded_jobs`), by the jobs' key without a seed
    seed_groups: dict[str, SeedGroup] = field(default_factory=dict)
    #: seed counts granted by the figure's seed plan beyond the declared ones (:func:`build`)
    seed_grants: dict[str, int] = field(default_factory=dict)
    #: seconds of computation in the runs this context started (the records' ``runtime_s``; :func:`build` resets it)
    compute_s: float = 0.0

    def run(self, jobs: list[Job], desc: str) -> list[dict[str, Any]]:
        fresh = self._fresh(jobs)
        recs = run_jobs(
            jobs,
            self.cache,
            n_jobs=self.n_jobs,
            scheduler=self.scheduler,
            progress=self.progress,
            desc=desc,
            client=self.client,
        )
        self._count(fresh, recs)
        return recs

    def run_together(self, stages: list[list[Job]], desc: str) -> list[list[dict[str, Any]]]:
        """Independent stages on the workers at once, each stage's records in its jobs' order
        (:func:`singlehead.runs.run_stages`: each keeps its own warm-start chains)."""
        fresh = self._fresh([j for st in stages for j in st])
        out = run_stages(
            stages,
            self.cache,
            n_jobs=self.n_jobs,
            scheduler=self.scheduler,
            progress=self.progress,
            desc=desc,
            client=self.client,
        )
        self._count(fresh, [r for recs in out for r in recs])
        return out

    def _fresh(self, jobs: list[Job]) -> set[str]:
        return {j.key for j in jobs if self.cache.get(j.key) is None}

    def _count(self, fresh: set[str], recs: list[dict[str, Any]]) -> None:
        """Add the ``runtime_s`` of the records computed by this call (each key once) to :attr:`compute_s`."""
        seen = {r.get("key"): r for r in recs if r.get("key") in fresh}
        self.compute_s += sum(float(r.get("runtime_s") or 0.0) for r in seen.values())

    def sim_jobs(
        self, problems: list[Problem], optimizer: str = "lbfgs", *, seeds: int, n_test: int, **options: Any
    ) -> list[Job]:
        """Simulation jobs of seeds ``0 .. seeds - 1`` per problem, ``n_test`` test sequences each."""
        st = self.sim_settings(optimizer, n_test=n_test, **options)
        return [j for p in problems for j in self.seeded_jobs("simulation", p, st, seeds)]

    def sim_settings(self, optimizer: str = "lbfgs", *, n_test: int, **options: Any) -> tuple[tuple[str, Any], ...]:
        """The settings of a simulation job as :meth:`sim_jobs` keys them: every
        :class:`~singlehead.sim.simulation.TrainOptions` field and the device (for a single job,
        ``Job("simulation", problem, seed, settings)``, that is not one of a point's seed sequence)."""
        opts = TrainOptions(optimizer=optimizer, n_test=n_test, **options)
        return tuple(sorted({**opts.key_fields(self.device), "device": self.device}.items()))

    def seeded_jobs(self, route: str, problem: Problem, settings: tuple[tuple[str, Any], ...], seeds: int) -> list[Job]:
        """Jobs of seeds ``0 .. n - 1`` of one point: ``n = seeds`` as declared, or the count the figure's seed plan
        granted this point (:mod:`singlehead.figures.seeds`); the point is recorded for the plan."""
        base = Job(route, problem, None, settings).key
        n = max(int(seeds), self.seed_grants.get(base, 0))
        self.seed_groups[base] = SeedGroup(base, route, problem, int(seeds), n)
        return [Job(route, problem, s, settings) for s in range(n)]

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
        # the name carries every parameter of the value (the figures build it from their spec's fields)
        return value_key(name)

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
            # on the runner's local workers, one task per dispatch, in the caller's order (callers put the
            # dearest first)
            with tqdm(
                total=len(tasks),
                initial=len(tasks) - len(missing),
                desc=desc,
                disable=not self.progress,
                leave=False,
                mininterval=1.0,
            ) as bar:
                for n, v in run_calls({n: tasks[n] for n in missing}, workers=self.n_jobs):
                    self.cache.put({"key": keys[n], "value": v})
                    bar.update(1)
        return {n: self.cached(n, f) for n, f in tasks.items()}

    @staticmethod
    def theory_jobs(problems: list[Problem], route: str = "theory") -> list[Job]:
        return [Job(route, p) for p in problems]


@dataclass
class FigureRun:
    """What a figure's ``run`` returns: its tidy table, agreement rows and parameters, and its ``data``
    (anything the plot and the caption read: frames, curves, thresholds)."""

    table: pd.DataFrame
    agreement: pd.DataFrame | None
    params: dict[str, Any]
    data: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FigureDef:
    """One registered figure: its name, title, spec class and four functions (module docstring)."""

    name: str
    title: str
    spec: type[FigureSpec]
    grid: Callable[[Any], Any]
    run: Callable[[Context, Any, Any], FigureRun]
    plot: Callable[[Any, Any, FigureRun], Figure]
    caption: Callable[[Any, Any, FigureRun], str]
    checks: str = THEORY_SIMULATION  # what the agreement rows are (the report names it beside the count)
    #: The presets that build this figure. A figure whose smallest meaningful size does not fit the quick
    #: preset's time budget leaves ``"quick"`` out; :func:`~.reproduce.reproduce` then names it as skipped.
    presets: tuple[str, ...] = PRESETS

    def __post_init__(self) -> None:
        bad = [p for p in self.presets if p not in PRESETS]
        if bad or not self.presets:
            raise ValueError(f"presets must be a non-empty subset of {PRESETS} (got {self.presets!r})")


#: Held while a figure is drawn or rendered: matplotlib is not thread-safe (its text layout and mathtext parser are
#: shared), and figures may be built on several threads (:func:`~.reproduce.reproduce`).
DRAWING = threading.Lock()

#: The registered figures, in report order (:func:`register`).
FIGURES: dict[str, FigureDef] = {}


def register(fd: FigureDef) -> FigureDef:
    """Add ``fd`` to :data:`FIGURES` (a later registration under the same name replaces it)."""
    FIGURES[fd.name] = fd
    return fd


def _judged(res: FigureRun) -> pd.DataFrame | None:
    agr = res.agreement
    return judge(agr) if agr is not None and len(agr) else agr


def build(fd: FigureDef, ctx: Context | None, spec: FigureSpec) -> FigureOutput:
    """grid -> run -> judge (-> more seeds -> run -> judge ...) -> plot -> caption for one figure; the runtime,
    the verdicts (:func:`~singlehead.report.verdict.judge`) and the seed plan's report are added here.

    The seed plan (:class:`~singlehead.figures.seeds.SeedPlan` of the spec's ``max_seeds`` and
    ``seed_budget``; :mod:`singlehead.figures.seeds`) is a fixed, declared procedure: after each
    judgement the inconclusive seed-averaged rows get their points' seeds doubled (continuing the
    seed sequence; finished runs come from the cache) within the budget, and the whole figure is
    run and judged again, Holm over all its rows, until no row is served. The rows carry
    ``seeds_declared`` and ``seeds_added``; with an active plan the figure's parameters state it.
    """
    if not isinstance(spec, fd.spec):
        raise ValueError(f"spec of figure {fd.name!r} must be a {fd.spec.__name__} (got {type(spec).__name__})")
    t0 = time.perf_counter()
    grid = fd.grid(spec)
    plan = SeedPlan.of(spec)
    if ctx is not None:
        ctx.seed_groups, ctx.seed_grants, ctx.compute_s = {}, {}, 0.0
    res = fd.run(ctx, spec, grid)
    agr = _judged(res)
    report = SeedReport(plan, first=tally(agr))
    t1 = time.perf_counter()
    while ctx is not None and agr is not None and len(agr):
        grants = plan_round(agr, ctx.seed_groups, plan, report.spent)
        if not grants:
            break
        report.spent += sum(n - ctx.seed_groups[g].granted for g, n in grants.items())
        report.rounds += 1
        ctx.seed_grants.update(grants)
        res = fd.run(ctx, spec, grid)
        agr = _judged(res)
    report.extra_s = time.perf_counter() - t1
    if ctx is not None and agr is not None and len(agr) and ctx.seed_groups:
        agr = seed_columns(agr, ctx.seed_groups)
        report.rows = served_rows(agr)
    if plan.active:
        res.params["seed plan"] = f"{plan.text()}; {report.spent} added"
    with DRAWING:
        fig = fd.plot(spec, grid, res)
    caption = fd.caption(spec, grid, res)
    return FigureOutput(
        fd.name,
        fd.title,
        caption,
        res.params,
        fig,
        res.table,
        agr,
        runtime_s=time.perf_counter() - t0,
        compute_s=ctx.compute_s if ctx is not None else 0.0,
        notes=list(res.notes),
        checks=fd.checks,
        diagnostics=list(res.diagnostics),
        seeds=report,
    )


@dataclass(frozen=True)
class Preset:
    """One spec per figure and the simulation device: what a reproduction computes.

    Examples
    --------
    >>> from singlehead.figures.reproduce import Preset
    >>> p = Preset.named("quick")
    >>> p.spec("finite_size").ds
    (25, 35, 50, 70, 100)
    >>> p.with_spec("finite_size", p.spec("finite_size").replace(alphas=(0.5,))).spec("finite_size").alphas
    (0.5,)
    """

    name: str
    specs: tuple[tuple[str, FigureSpec], ...]
    device: str = "cpu"

    @classmethod
    def named(cls, name: str, figures: Mapping[str, FigureDef] | None = None) -> Preset:
        """The ``quick``, ``full`` or ``smoke`` preset of every figure in ``figures`` (default: :data:`FIGURES`);
        ``full`` simulates on a GPU when torch sees one."""
        if name not in PRESETS:
            raise ValueError(f"mode must be one of {', '.join(map(repr, PRESETS))} (got {name!r})")
        figs = FIGURES if figures is None else figures
        dev = "cuda" if name == "full" and torch.cuda.is_available() else "cpu"
        return cls(name, tuple((n, fd.spec.preset(name)) for n, fd in figs.items()), dev)

    def spec(self, figure: str) -> FigureSpec:
        """The spec of ``figure``."""
        for n, s in self.specs:
            if n == figure:
                return s
        raise ValueError(f"figure must be one of {[n for n, _ in self.specs]} (got {figure!r})")

    def with_spec(self, figure: str, spec: FigureSpec) -> Preset:
        """A copy with ``figure``'s spec replaced (or added)."""
        if any(n == figure for n, _ in self.specs):
            specs = tuple((n, spec if n == figure else s) for n, s in self.specs)
        else:
            specs = (*self.specs, (figure, spec))
        return Preset(self.name, specs, self.device)


def new_figure(nrows: int, ncols: int, *, figsize: tuple[float, float], **kwargs: Any) -> tuple[Figure, Any]:
    """A figure with a grid of axes (``Figure.subplots`` keywords), drawn off-screen through the object
    API: no pyplot state and no global backend switch."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kwargs)


BASE = dict(T=2, noise=0.5, lam=0.01, beta=1.0, beta0=1.0, target=MPTarget(0.5), channel="seq2lab")


def stopping_rule(fit_rtol: float | None) -> dict[str, float]:
    """The L-BFGS options of a figure's ``fit_rtol``: the relative objective change at which both the float32
    phase and the float64 polish stop (``tol``, ``polish_rtol``); empty for ``None`` (the
    :class:`~singlehead.sim.simulation.TrainOptions` defaults). ``benchmarks/bench_stopping_rule.py`` measures
    what a rule changes against the seed spread."""
    return {} if fit_rtol is None else {"tol": fit_rtol, "polish_rtol": fit_rtol}


def params_text(params: dict[str, Any]) -> str:
    """``"k1=v1, k2=v2"``: a figure's stated parameters in one line (captions and titles)."""
    return ", ".join(f"{k}={v}" for k, v in params.items())


def problem_params(problem: Problem, *extra: tuple[str, Any]) -> dict[str, Any]:
    """The parameters a figure states, read off its ``Problem`` (names of docs: Theory, :ref:`theory-sizes`), plus
    ``extra`` pairs."""
    out = {
        "channel": problem.channel,
        "T": problem.T,
        **problem.target.caption(),
        "Delta": problem.noise,
        "lam": problem.lam,
        "beta": problem.beta,
        "beta0": problem.beta0,
    }
    out.update(dict(extra))
    return out


def mean_se(df: pd.DataFrame, by: str, qty: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and standard error over seeds per ``by`` value (failed runs, with NaN metrics, are left out)."""
    g = df.dropna(subset=[qty]).groupby(by)[qty]
    m, s, k = g.mean(), g.std(ddof=1), g.size()
    return m.index.values, m.values, (s / np.sqrt(k)).fillna(0.0).values


def result_from_record(rec: dict[str, Any]):
    """Rebuild a theory :class:`Result` from its cached record (for analysis functions)."""
    return Result.from_dict({k: v for k, v in rec.items() if k not in ("key", "route", "seed")})
