"""The library's one runner: jobs through the result cache, in this process, on local workers or on Dask.

The command line, ``reproduce``, the studies and the explorer all run their computations here:

* a :class:`Job` is a route (:data:`ROUTES`) applied to a full problem, with a seed and the
  route's settings; its :attr:`Job.key` is its key in the result cache
  (:func:`singlehead.runs.cache.result_key`, which carries the numerics version);
* :func:`stream` runs the jobs not in the cache and yields every record as it finishes (the cached
  ones first), storing each in the cache the moment it exists: an interrupted sweep loses only
  the jobs in flight, and a caller may stop between chunks (``alive``);
* :func:`run_jobs` is :func:`stream` with a progress bar, returning the records in the order of
  the jobs;
* :func:`run_calls` runs in-process callables (values that are not routes) on the same workers.

Theory jobs that differ only in ``alpha`` (then ``lam``) form warm-started chains
(:func:`~singlehead.state_evolution.theory_curve`). A chain is cut at the points already cached
(each piece starts from its cached neighbour's fixed point) and, to share it among workers, into
at most ``workers`` contiguous segments; a segment runs as chunks of the sizes ``chunks`` gives
(by default one chunk), each chunk starting from the previous chunk's last fixed point. The fixed
points are those of a cold :func:`~singlehead.theory` to the solver tolerance, whatever the cut.

Local workers are :class:`Workers` (loky processes, reused between calls, started with
``threads_per_worker(workers)`` BLAS/OpenMP threads each: threads x workers <= cores, see
``singlehead.runs.threads``).
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from singlehead.model.problem import Problem
from singlehead.model.results import stable_hash
from singlehead.runs import routes
from singlehead.runs.cache import Cache, result_key
from singlehead.runs.threads import THREAD_ENV_VARS, USER_LIMIT_VAR, available_cores, configure, threads_per_worker

__all__ = [
    "Job",
    "ROUTES",
    "Workers",
    "execute",
    "execute_chain",
    "run_calls",
    "run_jobs",
    "stream",
    "theory_chains",
    "cost_estimate",
]

# route name -> function; each takes (problem, seed, **settings) and returns a JSON-able dict (the route
# functions import their engine when called, so importing them here costs nothing)
ROUTES: dict[str, Callable[..., dict[str, Any]]] = {
    "simulation": routes.run_simulation,
    "theory": routes.run_theory,
    "bayes": routes.run_bayes,
    "thresholds": routes.run_thresholds,
    "amp": routes.run_amp,
}

# what a route raises for a point outside its reach: the job fails alone, with the message in its record
_JOB_ERRORS = (ValueError, ArithmeticError, RuntimeError, np.linalg.LinAlgError)


@dataclass(frozen=True)
class Job:
    """One unit of work: a route applied to a Problem (and a seed for random routes).

    ``key`` hashes the route, the full problem, the seed and the settings: equal keys mean the
    same computation, which is what the result cache relies on.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.runs import Job
    >>> job = Job("theory", Problem(alpha=0.5))
    >>> job.key == Job("theory", Problem(alpha=0.5)).key != Job("theory", Problem(alpha=1.0)).key
    True
    """

    route: str
    problem: Problem
    seed: int | None = None
    settings: tuple[tuple[str, Any], ...] = ()
    tags: tuple[tuple[str, Any], ...] = field(default=(), compare=False)

    @property
    def key(self) -> str:
        """Hash (``singlehead.runs.cache.result_key``) of everything that changes the result: the
        numerics version, the route, the full problem, the seed and the route's settings (device and dtype
        included)."""
        return result_key(self.route, self.problem, self.seed, self.settings)

    def describe(self) -> dict[str, Any]:
        return {"route": self.route, "seed": self.seed, **dict(self.settings), **dict(self.tags)}


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
    except _JOB_ERRORS as exc:
        rec = {"error": f"{type(exc).__name__}: {exc}"}
    return _job_record(rec, job, time.perf_counter() - t0)


def _job_record(rec: dict[str, Any], job: Job, runtime_s: float) -> dict[str, Any]:
    """A route's record with the job's key, route, seed, problem and tags (and a runtime if it has none)."""
    rec = {
        **rec,
        "key": job.key,
        "route": job.route,
        "seed": job.seed,
        "problem": job.problem.to_dict(),
        **{f"tag_{k}": v for k, v in job.tags},
    }
    rec.setdefault("runtime_s", runtime_s)
    return rec


def iter_chain(param: str, jobs: list[Job], init: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """The records of a chain of theory jobs (:func:`theory_chains`), one warm-started sweep, each
    yielded as soon as it is solved; records as :func:`execute`.

    ``init``: the record of the fixed point to start from (a neighbour's). If the sweep raises,
    the jobs not yet yielded are run each on its own (so one bad point fails alone).
    """
    settings = dict(jobs[0].settings)
    done = 0
    t0 = time.perf_counter()
    try:
        for rec in routes.iter_theory_curve([j.problem for j in jobs], param, init=init, **settings):
            t1 = time.perf_counter()
            yield _job_record(rec, jobs[done], t1 - t0)
            done, t0 = done + 1, time.perf_counter()
    except _JOB_ERRORS:
        for j in jobs[done:]:
            yield execute(j)


def execute_chain(param: str, jobs: list[Job], init: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """:func:`iter_chain` as a list (what a worker returns for one chunk of a chain)."""
    return list(iter_chain(param, jobs, init))


# theory jobs that differ only in one of these parameters run as one warm-started sweep
_CHAIN_PARAMS = ("alpha", "lam")


@dataclass
class _Chain:
    """A contiguous piece of a chain: its jobs in order and the record of the cached point before it."""

    param: str
    jobs: list[Job]
    init: dict[str, Any] | None = None


def theory_chains(
    jobs: Sequence[Job], todo: set[str], parts: int = 1, min_piece: int = 6, cache: Cache | None = None
) -> tuple[list[tuple[str, list[Job], dict[str, Any] | None]], list[Job]]:
    """Group the ``theory`` jobs among ``jobs`` into warm-started chains along ``alpha`` (then ``lam``).

    Parameters
    ----------
    jobs : sequence of Job
        Every job of the run, cached or not (a cached point starts the piece after it).
    todo : set of str
        Keys of the jobs to compute.
    parts : int
        Cut each chain's pieces further, longest first, until it has ``parts`` of them (the workers
        that share it), keeping every piece at least ``min_piece`` long.
    cache : Cache, optional
        Where the cached points' records are read (the warm start of the piece after each).

    Returns
    -------
    chains, rest
        ``chains``: ``(param, jobs sorted by param, init record or None)`` of jobs equal in every
        other field (route, settings, problem); ``rest``: the jobs in ``todo`` in no chain, in the
        order of ``jobs``.
    """
    pieces: list[_Chain] = []
    pending = [j for j in jobs if j.route == "theory"]
    for param in _CHAIN_PARAMS:
        groups: dict[str, list[Job]] = {}
        for j in pending:
            spec = {**j.problem.to_dict(), param: None, "settings": dict(j.settings)}
            groups.setdefault(stable_hash(spec), []).append(j)
        pending = []
        for group in groups.values():
            if sum(j.key in todo for j in group) < 2:
                pending.extend(group)
                continue
            pieces.extend(_split(_runs(param, group, todo, cache), parts, min_piece))
    in_chain = {j.key for c in pieces for j in c.jobs}
    in_chain = {j.key for c in pieces for j in c.jobs}
    rest = [j for j in jobs if j.key in todo and j.key not in in_chain]
    return [(c.param, c.jobs, c.init) for c in pieces], rest


def _runs(param: str, group: list[Job], todo: set[str], cache: Cache | None) -> list[_Chain]:
    """The runs of consecutive jobs to compute along ``param``, each with its cached predecessor's record."""
    out: list[_Chain] = []
    prev: Job | None = None
    for j in sorted(group, key=lambda j: getattr(j.problem, param)):
        if j.key in todo:
            if out and prev is out[-1].jobs[-1]:
                out[-1].jobs.append(j)
            else:
                init = cache.get(prev.key) if (prev is not None and cache is not None) else None
                out.append(_Chain(param, [j], init))
        prev = j
    return out


def _split(pieces: list[_Chain], parts: int, min_piece: int) -> list[_Chain]:
    """Halve the longest piece (the first half keeps its start) until there are ``parts`` pieces or
    none is at least ``2 * min_piece`` long."""
    pieces = list(pieces)
    while len(pieces) < parts:
        k = max(range(len(pieces)), key=lambda i: len(pieces[i].jobs))
        if len(pieces[k].jobs) < 2 * max(1, min_piece):
            break
        c = pieces.pop(k)
        half = (len(c.jobs) + 1) // 2
        pieces[k:k] = [_Chain(c.param, c.jobs[:half], c.init), _Chain(c.param, c.jobs[half:], None)]
    return pieces


def cost_estimate(job: Job) -> float:
    """Relative cost of a job, for dispatching the dearest first (it decides only the order, not the result).

    A simulation or AMP instance costs about ``n T^2 d p`` per objective evaluation (``n = alpha d^2``), times
    a number of iterations that grows at small ``lam`` (about as ``lam^-1/2`` below 0.01), and Adam takes several times
    more
    evaluations than L-BFGS; theory points cost little and do not depend on ``d``.
    """
    p = job.problem
    if job.route not in ("simulation", "amp"):
        return 0.0
    cost = p.alpha * float(p.d) ** 4 * p.T**2 * max(1.0, (0.01 / max(p.lam, 1e-12)) ** 0.5)
    return cost * (4.0 if dict(job.settings).get("optimizer") == "adam" else 1.0)


class Workers:
    """Local worker processes (loky's reusable executor: started once, kept between calls).

    Each worker runs ``threads_per_worker(workers)`` BLAS/OpenMP threads (the thread policy of
    ``singlehead.runs.threads``: threads x workers <= cores); the processes are started by
    fork + exec, so a server running threads may start them.

    Parameters
    ----------
    workers : int
        Number of processes, ``>= 1``; ``-1`` (or any value ``< 1`` other than 0): every core.

    Examples
    --------
    >>> from singlehead.runs import Workers
    >>> from singlehead.runs.threads import available_cores
    >>> pool = Workers(2)                       # nothing starts before the first task
    >>> pool.workers, Workers(-1).workers == available_cores()
    (2, True)
    >>> pool.close()
    """

    def __init__(self, workers: int) -> None:
        if not isinstance(workers, int) or isinstance(workers, bool) or workers == 0:
            raise ValueError(f"workers must be a nonzero integer (-1: every core; got {workers!r})")
        self.workers = workers if workers > 0 else available_cores()
        n = threads_per_worker(self.workers)
        env = {var: str(n) for var in THREAD_ENV_VARS}
        env[USER_LIMIT_VAR] = str(n)
        self._env = env
        self._executor: Any = None

    @property
    def executor(self) -> Any:
        """The executor (``concurrent.futures`` interface), started at first use."""
        from joblib.externals.loky import get_reusable_executor  # only parallel runs need it

        # loky hands back the running executor when the arguments match, else restarts it; an idle one
        # stops its processes after ``timeout`` seconds
        self._executor = get_reusable_executor(max_workers=self.workers, env=self._env, timeout=600)
        return self._executor

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on a worker: a ``concurrent.futures.Future``."""
        return self.executor.submit(fn, *args)

    def close(self) -> None:
        """Stop the processes (a later :meth:`submit` starts new ones)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, kill_workers=True)
            self._executor = None


class _Local:
    """Futures on :class:`Workers`."""

    def __init__(self, workers: Workers) -> None:
        self.workers = workers

    def submit(self, fn: Callable[..., Any], *args: Any, priority: int = 0) -> Any:
        return self.workers.submit(fn, *args)

    def wait(self, pending: set[Any]) -> set[Any]:
        import concurrent.futures as cf  # only parallel runs need it (spares a command-line point the import)

        done, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
        return done

    def close(self) -> None:
        pass


class _Dask:
    """Futures on a Dask distributed cluster (``scheduler`` address or an existing ``client``)."""

    def __init__(self, scheduler: str | None, client: Any) -> None:
        from distributed import Client

        self.own = client is None
        self.client = Client(scheduler) if self.own else client
        self._done: list[Any] = []

    def submit(self, fn: Callable[..., Any], *args: Any, priority: int = 0) -> Any:
        return self.client.submit(fn, *args, pure=False, priority=priority)

    def wait(self, pending: set[Any]) -> set[Any]:
        from distributed import wait

        return set(wait(list(pending), return_when="FIRST_COMPLETED").done)

    def close(self) -> None:
        if self.own:
            self.client.close()


def _chunk_sizes(chunks: Sequence[int] | None) -> Callable[[int], int | None]:
    """``k -> size of the k-th chunk of a segment`` (the last size repeats; ``None``: the whole segment)."""
    if not chunks:
        return lambda k: None
    if any(not isinstance(c, int) or c < 1 for c in chunks):
        raise ValueError(f"chunks must be positive integers (got {list(chunks)!r})")
    return lambda k: chunks[min(k, len(chunks) - 1)]


def stream(
    jobs: Iterable[Job],
    cache: Cache,
    *,
    workers: int | Workers = 1,
    scheduler: str | None = None,
    client: Any = None,
    alive: Callable[[], bool] | None = None,
    chunks: Sequence[int] | None = None,
    min_piece: int = 6,
    groups: Sequence[int] | None = None,
) -> Iterator[dict[str, Any]]:
    """Every record of ``jobs``: the cached ones first (in the order of ``jobs``), then the others as they finish.

    Each computed record is stored in ``cache`` the moment it exists (also when it comes back after
    the caller stopped); a record with ``error`` (a job that raised) is yielded but not stored.

    Parameters
    ----------
    workers : int or Workers
        ``1``: run here (a chain's points one at a time); ``n > 1`` (or ``-1``, every core):
        that many local worker processes; a :class:`Workers`: those (kept by the caller between
        calls, e.g. warm worker processes of a server).
    scheduler, client
        A Dask distributed scheduler's address (``tcp://host:8786``) or an existing
        ``distributed.Client``: the jobs run there.
    alive : callable, optional
        Checked between points (here) or between chunks (workers): once it returns ``False`` no
        new work starts, the unstarted work is dropped and the stream ends.
    chunks : sequence of int, optional
        Sizes of the successive chunks of a chain segment on workers, the last size repeating
        (e.g. ``(1, 2, 3, 4)``: the first point of every segment comes back after one solve);
        default: a segment is one chunk.
    min_piece : int
        Shortest segment a chain is cut into to share it among workers.
    groups : sequence of int, optional
        One label per job: theory chains are formed within a label only (stages of a computation
        that run together but keep their own warm-start chains, :func:`run_stages`); default: one group.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.runs import Cache, Job, stream
    >>> jobs = [Job("theory", Problem(T=2, noise=0.5, alpha=a)) for a in (0.5, 1.0)]
    >>> [rec["problem"]["alpha"] for rec in stream(jobs, Cache(None))]
    [0.5, 1.0]
    """
    jobs = list(jobs)
    if groups is not None and len(groups) != len(jobs):
        raise ValueError(f"groups must give one label per job ({len(jobs)} jobs, got {len(groups)} labels)")
    alive = alive or (lambda: True)
    size = _chunk_sizes(chunks)  # validated before anything runs
    todo: set[str] = set()
    for j in jobs:
        rec = cache.get(j.key)
        if rec is None:
            todo.add(j.key)
        else:
            yield rec
    if not todo:
        return
    remote = scheduler is not None or client is not None
    if not remote and not isinstance(workers, Workers) and workers == 1:
        yield from _stream_here(jobs, todo, cache, alive, groups)
        return
    if remote:
        backend: Any = _Dask(scheduler, client)
        parts = len(todo)
    else:
        pool = workers if isinstance(workers, Workers) else Workers(workers)
        backend = _Local(pool)
        parts = pool.workers
        if pool is not workers:  # a run of its own: this process idles meanwhile, under the same policy
            configure(workers=parts)
    try:
        yield from _stream_futures(backend, jobs, todo, cache, alive, parts, size, min_piece, groups)
    finally:
        backend.close()


def _grouped_chains(
    jobs: list[Job], todo: set[str], parts: int, min_piece: int, cache: Cache, groups: Sequence[int] | None
) -> tuple[list[tuple[str, list[Job], dict[str, Any] | None]], list[Job]]:
    """:func:`theory_chains` within each group of ``groups`` (all jobs one group when ``None``); a key to compute
    is computed once, in the first group that holds it."""
    if groups is None:
        return theory_chains(jobs, todo, parts, min_piece, cache)
    chains: list[tuple[str, list[Job], dict[str, Any] | None]] = []
    singles: list[Job] = []
    left = set(todo)
    for g in dict.fromkeys(groups):
        sub = [j for j, h in zip(jobs, groups) if h == g]
        here = {j.key for j in sub} & left
        c, r = theory_chains(sub, here, parts, min_piece, cache)
        chains += c
        singles += r
        left -= here
    return chains, singles


def _stream_here(
    jobs: list[Job], todo: set[str], cache: Cache, alive: Callable[[], bool], groups: Sequence[int] | None = None
) -> Iterator[dict[str, Any]]:
    chains, singles = _grouped_chains(jobs, todo, 1, 6, cache, groups)
    for param, js, init in chains:
        for rec in iter_chain(param, js, init):
            _store(cache, rec)
            yield rec
            if not alive():
                return
    for j in singles:
        if not alive():
            return
        rec = execute(j)
        _store(cache, rec)
        yield rec


def _store(cache: Cache, rec: dict[str, Any]) -> None:
    if "error" not in rec:
        cache.put(rec)


def _store_late(cache: Cache) -> Callable[[Any], None]:
    """A done-callback that stores the records of a chunk that finishes after the stream stopped."""

    def store(fut: Any) -> None:
        if fut.cancelled() or fut.exception() is not None:
            return
        out = fut.result()
        for rec in out if isinstance(out, list) else [out]:
            _store(cache, rec)

    return store


def _stream_futures(
    backend: Any,
    jobs: list[Job],
    todo: set[str],
    cache: Cache,
    alive: Callable[[], bool],
    parts: int,
    size: Callable[[int], int | None],
    min_piece: int,
    groups: Sequence[int] | None = None,
) -> Iterator[dict[str, Any]]:
    chains, singles = _grouped_chains(jobs, todo, parts, min_piece, cache, groups)
    # chain -> (rest of its segment, number of chunks sent)
    state: dict[Any, tuple[str, list[Job], int]] = {}

    def send(param: str, seg: list[Job], k: int, init: dict[str, Any] | None) -> None:
        n = size(k) or len(seg)
        fut = backend.submit(execute_chain, param, seg[:n], init, priority=len(jobs) + 1)
        state[fut] = (param, seg[n:], k + 1)

    # the theory chains (sequential sweeps) first, then the dearest runs, so that no worker is left with a long
    # run at the end of a stage
    for param, seg, init in chains:
        send(param, seg, 0, init)
    for rank, j in enumerate(sorted(singles, key=cost_estimate, reverse=True)):
        state[backend.submit(execute, j, priority=len(singles) - rank)] = ("", [], 0)
    while state:
        for fut in backend.wait(set(state)):
            param, rest, k = state.pop(fut)
            out = fut.result()
            recs = out if isinstance(out, list) else [out]
            for rec in recs:
                _store(cache, rec)
                yield rec
            if rest and alive():
                send(param, rest, k, recs[-1] if "error" not in recs[-1] else None)
        if not alive():
            for fut in state:
                if not fut.cancel():
                    fut.add_done_callback(_store_late(cache))
            return


def run_calls(tasks: dict[str, Callable[[], Any]], *, workers: int | Workers = 1) -> Iterator[tuple[str, Any]]:
    """``(name, value)`` of every ``tasks[name]()`` as it finishes (in order here; on local workers in any
    order, one task per dispatch in the caller's order, so callers put the dearest first).

    For in-process values that are not routes (curves, phase diagrams); the callables must be
    picklable for workers (``functools.partial`` of module-level functions). ``workers`` as in
    :func:`stream`; local workers never outnumber the tasks.

    Examples
    --------
    >>> import functools
    >>> from singlehead.runs import run_calls
    >>> dict(run_calls({"a": functools.partial(pow, 2, 3), "b": functools.partial(pow, 3, 2)}))
    {'a': 8, 'b': 9}
    """
    if not isinstance(workers, Workers) and (workers == 1 or len(tasks) < 2):
        for name, f in tasks.items():
            yield name, f()
        return
    if isinstance(workers, Workers):
        pool = workers
    else:  # no more processes than tasks
        pool = Workers(min(workers if workers > 0 else available_cores(), len(tasks)))
        configure(workers=pool.workers)
    import concurrent.futures as cf

    futs = {pool.submit(_named_call, name, f): name for name, f in tasks.items()}
    pending = set(futs)
    try:
        while pending:
            done, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for fut in done:
                yield fut.result()
    finally:
        for fut in pending:
            fut.cancel()


def _named_call(name: str, f: Callable[[], Any]) -> tuple[str, Any]:
    return name, f()


def run_jobs(
    jobs: Iterable[Job],
    cache: Cache,
    *,
    n_jobs: int = 1,
    scheduler: str | None = None,
    progress: bool = True,
    desc: str = "runs",
    client: Any = None,
    on_record: Callable[[dict[str, Any], Any], None] | None = None,
    groups: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """Run every job not in ``cache`` (:func:`stream`); return all records in the order of ``jobs``.

    Parameters
    ----------
    n_jobs : int
        Local worker processes when no scheduler is given (``-1``: every core); 1 runs in-process.
    scheduler : str, optional
        Address of a Dask distributed scheduler (``tcp://host:8786``); jobs are submitted
        there and gathered as they complete. ``client`` may pass an existing
        ``distributed.Client`` instead.
    progress : bool
        Show a progress bar (tqdm, on stderr) while more than one job is left to compute.
    on_record : callable, optional
        ``on_record(record, bar)`` for every finished job (cached ones first), e.g. to print it
        through the progress bar ``bar`` (``bar.write(line, file=...)``; without a bar it prints).
    groups : sequence of int, optional
        Chain labels, one per job (:func:`stream`).

    Examples
    --------
    >>> from singlehead.runs import expand_grid
    >>> from singlehead.runs import Cache, run_jobs
    >>> jobs = expand_grid({"route": "theory", "base": {"T": 2, "noise": 0.5}, "sweep": {"alpha": [0.5, 1.0]}})
    >>> cache = Cache(None)
    >>> records = run_jobs(jobs, cache, progress=False)
    >>> [r["problem"]["alpha"] for r in records], all(cache.get(j.key) is not None for j in jobs)
    ([0.5, 1.0], True)
    """
    jobs = list(jobs)
    left = sum(cache.get(j.key) is None for j in jobs)
    if progress and left > 1:
        bar = _progress_bar()(total=len(jobs), initial=len(jobs) - left, desc=desc, leave=False, dynamic_ncols=True)
    else:  # nothing to follow (one run at most, or no progress asked): no bar, and no import of tqdm
        bar = _NoBar()
    failed: dict[str, dict[str, Any]] = {}
    try:
        for n, rec in enumerate(stream(jobs, cache, workers=n_jobs, scheduler=scheduler, client=client, groups=groups)):
            if "error" in rec:
                failed[rec["key"]] = rec
            if on_record is not None:
                on_record(rec, bar)
            if n >= len(jobs) - left:
                bar.update()
    finally:
        bar.close()
    if failed:
        first = next(iter(failed.values()))
        warnings.warn(
            f"{desc}: {len(failed)} of {len(jobs)} runs failed (not cached; a rerun retries them); "
            f"first: {first['error']} at {first['problem']}",
            RuntimeWarning,
            stacklevel=2,
        )
    return [failed[j.key] if j.key in failed else cache.get(j.key) for j in jobs]


def run_stages(stages: Sequence[Sequence[Job]], cache: Cache, **kwargs: Any) -> list[list[dict[str, Any]]]:
    """Run independent stages together (:func:`run_jobs` on their union): the workers take any stage's work, so a
    long warm-started theory chain of one stage overlaps the simulations of another instead of leaving a core
    idle; each stage keeps its own chains (``groups``). Returns each stage's records in its jobs' order.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.runs import Cache, Job, run_stages
    >>> a = [Job("theory", Problem(T=2, noise=0.5, alpha=x)) for x in (0.5, 1.0)]
    >>> b = [Job("theory", Problem(T=2, noise=0.5, alpha=2.0))]
    >>> [[r["problem"]["alpha"] for r in recs] for recs in run_stages([a, b], Cache(None), progress=False)]
    [[0.5, 1.0], [2.0]]
    """
    flat = [j for st in stages for j in st]
    labels = [i for i, st in enumerate(stages) for _ in st]
    recs = run_jobs(flat, cache, groups=labels, **kwargs)
    out, k = [], 0
    for st in stages:
        out.append(recs[k : k + len(st)])
        k += len(st)
    return out


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
