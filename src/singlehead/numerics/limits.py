"""Size limits of the numerics: the memory a request may use and the largest sizes the library serves.

Every request that would exceed a limit is refused *before* anything large is allocated, with a
``ValueError`` that names the parameter, the limit and the reason (the CLI prints it as one line, the
explorer shows it beside the control).

Memory limit
------------
The memory one computation may use is read from the environment variable ``SINGLEHEAD_MEMORY_LIMIT``
each time a size is checked (``memory_limit``): a number of bytes, optionally with a unit
``K``, ``M``, ``G``, ``T`` (powers of 1024; ``KiB``/``KB``/``k`` ... are accepted too), e.g.
``SINGLEHEAD_MEMORY_LIMIT=8G``. Unset or empty: 2 GiB (``DEFAULT_MEMORY_LIMIT``). Estimates
(:func:`check_memory`'s ``nbytes``) are computed from the sizes alone, before allocating; they count
the arrays a computation holds at once, not Python's or the libraries' own overhead.

Hard limits
-----------
* :data:`SOBOL_MAX_DIM`: SciPy's Sobol generator supports at most 21201 dimensions, so the output
  quadrature of a symmetric student (``2K = T(T+1)`` dimensions) serves ``T <= 145``
  (:func:`max_tokens_for_dim`).
"""

from __future__ import annotations

import math
import os
import re

__all__ = [
    "MEMORY_LIMIT_ENV",
    "DEFAULT_MEMORY_LIMIT",
    "SOBOL_MAX_DIM",
    "memory_limit",
    "check_memory",
    "format_bytes",
    "max_tokens_for_dim",
]

#: Environment variable holding the memory limit (see the module docstring).
MEMORY_LIMIT_ENV = "SINGLEHEAD_MEMORY_LIMIT"
#: The memory limit when ``SINGLEHEAD_MEMORY_LIMIT`` is unset: 2 GiB.
DEFAULT_MEMORY_LIMIT = 2 * 2**30
#: The most dimensions SciPy's Sobol generator supports (its direction numbers).
SOBOL_MAX_DIM = 21201

_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def memory_limit() -> int:
    """The memory limit in bytes: ``SINGLEHEAD_MEMORY_LIMIT`` (read now), else ``DEFAULT_MEMORY_LIMIT``.

    Raises ``ValueError`` naming the variable when it is set to something that is not a positive size.

    Examples
    --------
    >>> import os
    >>> from singlehead.numerics.limits import memory_limit
    >>> os.environ["SINGLEHEAD_MEMORY_LIMIT"] = "512M"
    >>> memory_limit()
    536870912
    >>> del os.environ["SINGLEHEAD_MEMORY_LIMIT"]
    """
    text = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if not text:
        return DEFAULT_MEMORY_LIMIT
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGtT]?)(?:i?[bB])?", text)
    if m is None or not float(m.group(1)) > 0:
        raise ValueError(
            f"{MEMORY_LIMIT_ENV} must be a positive size in bytes, optionally with a unit K, M, G or T "
            f"(powers of 1024), e.g. 4G (got {text!r})"
        )
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def format_bytes(n: float) -> str:
    """``n`` bytes in the largest binary unit below it (``'1.5 GiB'``)."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def check_memory(nbytes: float, parameter: str, what: str, remedy: str = "") -> None:
    """Raise ``ValueError`` when ``nbytes`` (an estimate made before allocating) exceeds ``memory_limit``.

    The message starts with ``parameter`` (the input that sets the size), says ``what`` needs the memory,
    the estimate, the limit and how to raise it, then ``remedy`` (what to change instead).

    Examples
    --------
    >>> from singlehead.numerics.limits import check_memory
    >>> check_memory(1e15, "d", "the target's spectrum")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: d is too large: the target's spectrum would need about 909 TiB, above the memory limit 2 GiB ...
    """
    limit = memory_limit()
    if not (math.isfinite(nbytes) and nbytes <= limit):
        tail = f"; {remedy}" if remedy else ""
        raise ValueError(
            f"{parameter} is too large: {what} would need about {format_bytes(nbytes)}, above the memory "
            f"limit {format_bytes(limit)} (set {MEMORY_LIMIT_ENV}, e.g. {MEMORY_LIMIT_ENV}=8G, to raise "
            f"it){tail}"
        )


def max_tokens_for_dim(dim_of_T, limit: int = SOBOL_MAX_DIM) -> int:
    """The largest ``T`` with ``dim_of_T(T) <= limit`` (``dim_of_T`` increasing in ``T``)."""
    T = 1
    while dim_of_T(T + 1) <= limit:
        T += 1
    return T
