"""Worker processes for the explorer: warm-started SE sweeps over pieces of the alpha grid, in parallel.

One state-evolution point costs a few tenths of a second, so a 20-point curve takes seconds on
one core. The grid's missing points are cut into ``workers`` contiguous segments; each segment is
a warm-started :func:`singlehead.state_evolution.theory_curve` chain run in chunks (1, 2, 3, then
``max_chunk`` points, each chunk starting from the previous chunk's last fixed point), one worker
process per segment, so the first point of every segment is on screen after one solve and a new
view stops a segment between chunks. The fixed points are those of a cold
:func:`~singlehead.theory` to the solver tolerance, whatever the cut.

Workers are started with ``spawn`` (the server runs threads; forking them is unsafe) and keep
the quadrature nodes and the prior model of the last problems they saw.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
from typing import Any, Callable, Iterator

from .. import bayes  # noqa: F401
from ..bayes import bayes_optimal
from ..problem import Problem
from ..results import Result
from ..state_evolution import SEOptions, prior_model, theory_curve

__all__ = ["WorkerPool", "segments"]

_WORKER_MEMO: dict[str, Any] = {}


def _solver_inputs(problem: Any) -> tuple[Any, Any, Any]:
    """SE options, quadrature nodes and prior model of ``problem`` (memoised per problem less alpha)."""
    key = problem.replace(alpha=1.0).key()
    if key not in _WORKER_MEMO:
        if len(_WORKER_MEMO) > 32:
            _WORKER_MEMO.clear()
        o = SEOptions()
        # a non-symmetric student samples its prior side: it takes the "auto" prior, not a model
        prior = prior_model(problem, "auto", draws=o.draws, seed=o.node_seed) if problem.student.symmetric else "auto"
        _WORKER_MEMO[key] = (o, o.quadrature(problem), prior)
    return _WORKER_MEMO[key]


def run_chunk(problem_dict: dict[str, Any], alphas: list[float], init: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One warm-started sweep over ``alphas`` (records of ``Result.to_dict``); runs in a worker."""
    problem = Problem.from_dict(problem_dict)
    options, quad, prior = _solver_inputs(problem)
    start = Result.from_dict(init) if init is not None else None
    return [r.to_dict() for r in theory_curve(problem.replace(alpha=alphas[0]), alphas, options=options, quad=quad,
                                              prior=prior, init=start)]


def run_bayes(problem_dict: dict[str, Any]) -> dict[str, Any]:
    """One Bayes-optimal point (record); runs in a worker."""
    return bayes_optimal(Problem.from_dict(problem_dict)).to_dict()


def _warm_up() -> None:
    # the imports and the node set of the default view, before the first request needs them

    _solver_inputs(Problem())


def segments(indices: list[int], parts: int) -> list[list[int]]:
    """Cut sorted ``indices`` into at most ``parts`` runs of consecutive integers, the longest cut first."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    while len(runs) < parts:
        k = max(range(len(runs)), key=lambda j: len(runs[j]), default=None)
        if k is None or len(runs[k]) < 2:
            break
        r = runs.pop(k)
        half = (len(r) + 1) // 2
        runs[k:k] = [r[:half], r[half:]]
    return runs


class WorkerPool:
    """``workers`` spawned processes running :func:`run_chunk` and :func:`run_bayes`."""

    def __init__(self, workers: int, max_chunk: int = 4) -> None:
        if workers < 1:
            raise ValueError(f"workers must be an integer >= 1 (got {workers})")
        self.workers, self.max_chunk = workers, max_chunk
        self._pool = cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        for _ in range(workers):
            self._pool.submit(_warm_up)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def sweep(self, problem: Any, alphas: list[float], todo: list[int], first: dict[int, dict[str, Any] | None],
              alive: Callable[[], bool], store: Callable[[int, dict[str, Any]], dict[str, Any]]
              ) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(index, record)`` of the grid points ``todo`` as they finish, segment by segment.

        ``first[i]`` is the warm start of a segment beginning at ``i`` (a neighbour's record or
        ``None``); ``store`` caches a record (also for chunks that finish after a cancel).
        """
        pdict = problem.to_dict()
        state: dict[cf.Future, tuple[list[int], int, list[int]]] = {}  # (rest of segment, next size, chunk)

        def submit(seg: list[int], size: int, init: dict[str, Any] | None) -> None:
            part, rest = seg[:size], seg[size:]
            fut = self._pool.submit(run_chunk, pdict, [alphas[i] for i in part], init)
            fut.add_done_callback(lambda f, part=part: _store_all(f, part, store))
            state[fut] = (rest, min(size + 1, self.max_chunk), part)

        for seg in segments(todo, self.workers):
            submit(seg, 1, first.get(seg[0]))
        while state:
            done, _ = cf.wait(list(state), return_when=cf.FIRST_COMPLETED)
            for fut in done:
                rest, size, part = state.pop(fut)
                recs = fut.result()
                yield from zip(part, recs)
                if rest and alive():
                    submit(rest, size, recs[-1])
            if not alive():
                for fut in state:
                    fut.cancel()
                return

    def bayes(self, problems: list[Any], alive: Callable[[], bool]) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(index, record)`` of Bayes-optimal points as they finish; unstarted ones are dropped on a cancel."""
        futs = {self._pool.submit(run_bayes, p.to_dict()): i for i, p in enumerate(problems)}
        pending = set(futs)
        while pending:
            done, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for fut in done:
                yield futs[fut], fut.result()
            if not alive():
                for fut in pending:
                    fut.cancel()
                return


def _store_all(fut: cf.Future, part: list[int], store: Callable[[int, dict[str, Any]], Any]) -> None:
    if fut.cancelled() or fut.exception() is not None:
        return
    for i, rec in zip(part, fut.result()):
        store(i, rec)
