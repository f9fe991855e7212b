"""Run jobs with the library's one result cache, locally (joblib/loky) or on Dask, with progress bars.

The cache (:class:`singlehead.runs.cache.Cache`) is a directory of JSON files named by
:attr:`Job.key` (the numerics version, route, full problem, seed and settings:
:func:`singlehead.runs.cache.result_key`), each written atomically the moment its job finishes:
an interrupted sweep loses only the jobs in flight, and rerunning it recomputes nothing that is
already there. The CLI's ``--out FILE.jsonl`` is an export of the records of one sweep
(:func:`export_jsonl`), backed by the cache directory ``FILE.jsonl.cache``.
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import Any, Callable, Iterable

import numpy as np

from ..results import stable_hash
from ..runs.cache import Cache, cache_for_export, export_jsonl
from ..threads import available_cores, configure
from . import routes
from .grid import Job

__all__ = ["ROUTES", "Cache", "cache_for_export", "export_jsonl", "execute", "execute_chain", "run_jobs"]

# route name -> function; each takes (problem, seed, **settings) and returns a JSON-able dict (the route
# modules defer torch to the call, so importing them here costs nothing)
ROUTES: dict[str, Callable[..., dict[str, Any]]] = {
    "simulation": routes.run_simulation,
    "theory": routes.run_theory,
    "bayes": routes.run_bayes,
    "thresholds": routes.run_thresholds,
    "amp": routes.run_amp,
}


def _resolve(route: str) -> Callable[..., dict[str, Any]]:
    if route not in ROUTES:
        raise ValueError(f"route must be one of {sorted(ROUTES)} (got {route!r})")
    return ROUTES[route]


def execute(job: Job) -> dict[str, Any]:
    """Run one job in this process; returns its record (config, tags, timing, metrics).

    A job that raises yields a record with ``error`` (the message) and no metrics: one bad
    point must not sink a sweep. Such records are returned but never cached, so a rerun retries.
    """
    t0 = time.perf_counter()
    try:
        rec = _resolve(job.route)(job.problem, job.seed, **dict(job.settings))
    except (ValueError, ArithmeticError, RuntimeError, np.linalg.LinAlgError) as exc:
        rec = {"error": f"{type(exc).__name__}: {exc}"}
    return _job_record(rec, job, time.perf_counter() - t0)


def _job_record(rec: dict[str, Any], job: Job, runtime_s: float) -> dict[str, Any]:
    """A route's record with the job's key, route, seed, problem and tags (and a runtime if it has none)."""
    rec = {**rec, "key": job.key, "route": job.route, "seed": job.seed, "problem": job.problem.to_dict(),
           **{f"tag_{k}": v for k, v in job.tags}}
    rec.setdefault("runtime_s", runtime_s)
    return rec


# theory jobs that differ only in one of these parameters run as one warm-started sweep
_CHAIN_PARAMS = ("alpha", "lam")
# a chain is split into contiguous pieces of at least this many points to feed parallel workers
_MIN_CHAIN_PIECE = 6


def _theory_chains(jobs: list[Job], n_workers: int) -> tuple[list[tuple[str, list[Job]]], list[Job]]:
    """Group ``theory`` jobs into chains along ``alpha`` (then ``lam``); return (chains, the rest).

    A chain is ``(param, jobs sorted by param)`` of jobs equal in every other field (route,
    settings, problem). With several workers a long chain is cut into contiguous pieces so the
    workers share it.
    """
    chains: list[tuple[str, list[Job]]] = []
    rest = [j for j in jobs if j.route != "theory"]
    pending = [j for j in jobs if j.route == "theory"]
    for param in _CHAIN_PARAMS:
        groups: dict[str, list[Job]] = {}
        for j in pending:
            spec = {**j.problem.to_dict(), param: None, "settings": dict(j.settings)}
            groups.setdefault(stable_hash(spec), []).append(j)
        pending = []
        for group in groups.values():
            if len(group) < 2:
                pending.extend(group)
                continue
            group = sorted(group, key=lambda j: getattr(j.problem, param))
            pieces = max(1, min(n_workers, len(group) // _MIN_CHAIN_PIECE))
            for idx in np.array_split(np.arange(len(group)), pieces):
                chains.append((param, [group[i] for i in idx]))
    return chains, rest + pending


def _cost_estimate(job: Job) -> float:
    """Relative cost of a job, for dispatching the dearest first (it decides only the order, not the result).

    A simulation or AMP instance costs about ``n T^2 d p`` per objective evaluation (``n = alpha d^2``), times
    a number of iterations that grows at small ``lam`` (about as ``lam^-1/2`` below 0.01), and Adam takes several times more
    evaluations than L-BFGS; theory points cost little and do not depend on ``d``.
    """
    p = job.problem
    if job.route not in ("simulation", "amp"):
        return 0.0
    cost = p.alpha * float(p.d) ** 4 * p.T**2 * max(1.0, (0.01 / max(p.lam, 1e-12)) ** 0.5)
    return cost * (4.0 if dict(job.settings).get("optimizer") == "adam" else 1.0)


def execute_chain(param: str, jobs: list[Job]) -> list[dict[str, Any]]:
    """Run a chain of theory jobs (see :func:`_theory_chains`) as one sweep; records as :func:`execute`.

    If the sweep raises, every job is run on its own (so one bad point fails alone).
    """
    t0 = time.perf_counter()
    try:
        recs = routes.run_theory_curve([j.problem for j in jobs], param, **dict(jobs[0].settings))
    except (ValueError, ArithmeticError, RuntimeError, np.linalg.LinAlgError):
        return [execute(j) for j in jobs]
    per_point = (time.perf_counter() - t0) / len(jobs)
    return [_job_record(rec, j, per_point) for j, rec in zip(jobs, recs)]


def run_jobs(jobs: Iterable[Job], cache: Cache, *, n_jobs: int = 1, scheduler: str | None = None,
             progress: bool = True, desc: str = "runs", client: Any = None,
             on_record: Callable[[dict[str, Any], Any], None] | None = None) -> list[dict[str, Any]]:
    """Run every job not in ``cache``; return all records in the order of ``jobs``.

    Parameters
    ----------
    n_jobs : int
        Local worker processes (joblib/loky) when no scheduler is given; 1 runs in-process.
    scheduler : str, optional
        Address of a Dask distributed scheduler (``tcp://host:8786``); jobs are submitted
        there and gathered as they complete. ``client`` may pass an existing
        ``distributed.Client`` instead.
    progress : bool
        Show a progress bar (tqdm, on stderr) while more than one job is left to compute.
    on_record : callable, optional
        ``on_record(record, bar)`` for every finished job (cached ones first), e.g. to print it
        through the progress bar ``bar`` (``bar.write(line, file=...)``; without a bar it prints).

    Examples
    --------
    >>> from singlehead.experiments import Cache, expand_grid, run_jobs
    >>> jobs = expand_grid({"route": "theory", "base": {"T": 2, "noise": 0.5}, "sweep": {"alpha": [0.5, 1.0]}})
    >>> cache = Cache(None)
    >>> records = run_jobs(jobs, cache, progress=False)
    >>> [r["problem"]["alpha"] for r in records], all(cache.get(j.key) is not None for j in jobs)
    ([0.5, 1.0], True)
    """
    jobs = list(jobs)
    todo = [j for j in jobs if cache.get(j.key) is None]
    failed: dict[str, dict[str, Any]] = {}

    if progress and len(todo) > 1:
        bar = _progress_bar()(total=len(jobs), initial=len(jobs) - len(todo), desc=desc, leave=False,
                              dynamic_ncols=True)
    else:  # nothing to follow (one run at most, or no progress asked): no bar, and no import of tqdm
        bar = _NoBar()

    def store(rec: dict[str, Any]) -> None:
        if "error" in rec:
            failed[rec["key"]] = rec
        else:
            cache.put(rec)
        if on_record is not None:
            on_record(rec, bar)

    if on_record is not None:
        todo_keys = {j.key for j in todo}
        for j in jobs:
            if j.key not in todo_keys:
                on_record(cache.get(j.key), bar)
    try:
        if todo and (scheduler or client is not None):
            _run_dask(todo, store, bar, scheduler, client)
        elif todo and n_jobs != 1:
            from joblib import Parallel, delayed  # only local parallel runs need it

            workers = n_jobs if n_jobs > 0 else available_cores()
            # one thread policy: threads per worker x workers <= cores (the workers inherit it)
            configure(workers=workers)
            chains, singles = _theory_chains(todo, workers)
            # the theory chains (sequential sweeps) and then the dearest runs first, one per dispatch, so that no
            # worker is left with a long run at the end of a stage (the records return in the order of ``jobs``)
            singles = sorted(singles, key=_cost_estimate, reverse=True)
            tasks = [delayed(execute_chain)(param, js) for param, js in chains]
            tasks += [delayed(execute)(j) for j in singles]
            par = Parallel(n_jobs=n_jobs, backend="loky", return_as="generator_unordered", batch_size=1)
            for out in par(tasks):
                for rec in (out if isinstance(out, list) else [out]):
                    store(rec)
                    bar.update()
        else:
            chains, singles = _theory_chains(todo, 1)
            for param, js in chains:
                for rec in execute_chain(param, js):
                    store(rec)
                    bar.update()
            for j in singles:
                store(execute(j))
                bar.update()
    finally:
        bar.close()
    if failed:
        first = next(iter(failed.values()))
        warnings.warn(f"{desc}: {len(failed)} of {len(jobs)} runs failed (not cached; a rerun retries them); "
                      f"first: {first['error']} at {first['problem']}", RuntimeWarning, stacklevel=2)
    return [failed[j.key] if j.key in failed else cache.get(j.key) for j in jobs]


class _NoBar:
    """What ``on_record`` gets as its bar when none is shown: ``write`` prints the line, the rest does nothing."""

    def write(self, s: str, file: Any = None, end: str = "\n") -> None:
        print(s, file=sys.stdout if file is None else file, end=end)

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bar() -> type:
    """tqdm's notebook-aware bar under IPython, its plain bar elsewhere (which spares the command line the
    import of asyncio that ``tqdm.auto`` brings)."""
    if "IPython" in sys.modules:
        from tqdm.auto import tqdm
    else:
        from tqdm.std import tqdm
    return tqdm


def _run_dask(todo: list[Job], store: Callable[[dict[str, Any]], None], bar: Any, scheduler: str | None,
              client: Any) -> None:
    from distributed import Client, as_completed

    own = client is None
    client = Client(scheduler) if own else client
    try:
        futures = [client.submit(execute, j, key=f"singlehead-{j.key}", pure=False, priority=k)
                   for k, j in enumerate(sorted(todo, key=_cost_estimate))]  # Dask runs higher priorities first
        for fut in as_completed(futures):
            store(fut.result())
            bar.update()
    finally:
        if own:
            client.close()
