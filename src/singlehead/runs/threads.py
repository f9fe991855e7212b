"""One thread policy for the library: BLAS/OpenMP/torch threads x parallel workers <= cores.

Small linear algebra (the d x d eigendecompositions, the ``20000 x 100`` GEMMs of a training
step, the state-evolution solver) suffers badly when more threads than cores compete: every
OpenMP region ends in a barrier, and a thread that has lost its core makes the others spin.
On a 2-core machine, two workers with two threads each run such work several times slower
than two workers with one thread each (measured by ``benchmarks/bench_training.py
--threads``). The policy is therefore explicit and applied in one place:

* ``threads_per_worker`` -- ``max(1, cores // workers)``;
* :func:`configure` -- sets this process's torch intra-op threads, the BLAS pools already
  loaded (through ``threadpoolctl``) and the ``OMP_NUM_THREADS`` family
  of environment variables, which worker processes started afterwards (joblib/loky,
  multiprocessing) inherit before they import numpy or torch.

A computation that runs its own threads takes the size of the BLAS pool as its allotment and
holds BLAS at one thread meanwhile (:func:`~singlehead.numerics.thread_map.thread_map`; the multi-head state
evolution's ``SEOptions.threads``), so threads x workers stays within the cores.

Call ``configure(workers=n_jobs)`` before starting ``n_jobs`` workers, and ``configure()``
(one worker: all cores) in a single-process command. Nothing happens on import.
"""

from __future__ import annotations

import os
from typing import Any

USER_LIMIT_VAR = "SINGLEHEAD_USER_OMP_NUM_THREADS"
THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity set; ``os.cpu_count()`` where unavailable)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def threads_per_worker(workers: int = 1, cores: int | None = None) -> int:
    """``max(1, cores // workers)``: threads each of ``workers`` processes may use.

    Raises ``ValueError`` for ``workers < 1`` or ``cores < 1``.
    """
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1 (got {workers!r})")
    c = available_cores() if cores is None else cores
    if not isinstance(c, int) or isinstance(c, bool) or c < 1:
        raise ValueError(f"cores must be an integer >= 1 (got {cores!r})")
    return max(1, c // workers)


def configure(workers: int = 1, threads: int | None = None, *, cores: int | None = None) -> int:
    """Apply the thread policy to this process and to the workers it starts later.

    Parameters
    ----------
    workers : int
        Parallel worker processes about to run (``>= 1``).
    threads : int, optional
        Threads per worker; default ``threads_per_worker``, capped by the user's
        ``OMP_NUM_THREADS`` (the value found before the first call, kept in
        ``SINGLEHEAD_USER_OMP_NUM_THREADS``; a user's limit wins when smaller, the values this
        function set do not cap later calls).
        An explicit value with
        ``threads * workers > cores`` is refused (``ValueError``): that is the
        oversubscription this policy exists to prevent.
    cores : int, optional
        Override of ``available_cores`` (tests).

    Returns
    -------
    int
        The number of threads per worker that was set.
    """
    c = available_cores() if cores is None else cores
    n = threads_per_worker(workers, c)
    # the user's limit is the OMP_NUM_THREADS found before the first call (kept, in the environment, under
    # USER_LIMIT_VAR), not the value an earlier call set: after a parallel stage (1 thread per worker) an
    # in-process computation gets every core again
    if USER_LIMIT_VAR not in os.environ:
        os.environ[USER_LIMIT_VAR] = os.environ.get("OMP_NUM_THREADS", "")
    env = os.environ[USER_LIMIT_VAR]
    if threads is None and env.isdigit() and int(env) >= 1:
        n = min(n, int(env))
    if threads is not None:
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ValueError(f"threads must be an integer >= 1 (got {threads!r})")
        if threads * workers > c:
            raise ValueError(
                f"threads must be <= cores // workers = {n} with {workers} worker(s) on {c} core(s) (got {threads})"
            )
        n = threads
    for var in THREAD_ENV_VARS:
        os.environ[var] = str(n)
    import torch

    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n)
    return n


def joblib_config(workers: int) -> dict[str, Any]:
    """Keyword arguments for ``joblib.parallel_config`` that cap the threads in loky workers.

    ``with joblib.parallel_config(**joblib_config(n_jobs)): Parallel(n_jobs)(...)``.
    """
    return {"backend": "loky", "n_jobs": workers, "inner_max_num_threads": threads_per_worker(workers)}
