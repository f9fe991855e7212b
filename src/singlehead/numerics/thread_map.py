"""Independent pieces of one computation on several threads, with the BLAS pools at one thread meanwhile.

The library's thread policy (``singlehead.runs.threads``) gives each process a number of threads: the size its
BLAS pool is configured to. Work made of independent pieces of small linear algebra (the prior side's draws, a
jackknife's leave-one-out solves) runs faster as that many Python threads of one BLAS thread each than as one
Python thread whose BLAS calls are split: a ``100 x 100`` eigendecomposition gains nothing from a second BLAS
thread, while numpy's LAPACK calls release the GIL, so two of them run at once. :func:`blas_threads` reads the
allotment, :func:`single_blas_thread` holds the pools at one thread, and :func:`thread_map` runs the pieces.

The pieces must not share mutable state; the results are then those of the serial loop, whatever the number of
threads (each piece computes the same operations in the same order).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["blas_threads", "single_blas_thread", "thread_map"]

T = TypeVar("T")
R = TypeVar("R")


def blas_threads() -> int:
    """The threads of this process's BLAS pools (the largest among those loaded; 1 when none is loaded): the thread
    policy's allotment."""
    from threadpoolctl import threadpool_info

    n = [int(i.get("num_threads") or 1) for i in threadpool_info() if i.get("user_api") == "blas"]
    return max(n) if n else 1


@contextlib.contextmanager
def single_blas_thread(active: bool = True) -> Iterator[None]:
    """Hold every loaded BLAS pool at one thread inside the block (``active=False``: leave them as they are).

    The pools belong to the process, not the thread: blocks that overlap in two threads each restore the sizes
    they found on entry, so the one entered second, if it leaves last, leaves the pools at one thread.
    """
    if not active:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def thread_map(fn: Callable[[T], R], items: Iterable[T], threads: int) -> list[R]:
    """``[fn(x) for x in items]``, on ``min(threads, len(items))`` threads; the order of ``items`` kept.

    ``threads = 1`` (or one item) is the plain loop. The caller holds the BLAS pools at one thread
    (:func:`single_blas_thread`) when ``threads > 1``, so that threads x BLAS threads stays within the allotment.
    An exception of ``fn`` is raised here, after every piece has ended.

    Raises ``ValueError`` for ``threads < 1``.
    """
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1 (got {threads!r})")
    seq: Sequence[Any] = list(items)
    n = min(threads, len(seq))
    if n <= 1:
        return [fn(x) for x in seq]
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(fn, seq))
