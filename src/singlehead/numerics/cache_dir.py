"""Where the library keeps what it caches on disk (result records, quadrature node sets).

One resolver for every on-disk cache, so one environment variable turns them all off or moves them.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["library_cache_dir"]


def library_cache_dir(*parts: str) -> Path | None:
    """The library's cache directory (joined with ``parts``), or ``None`` when caching is off.

    ``$SINGLEHEAD_CACHE_DIR`` when set (``off``, ``none``, ``0`` or empty: off), else
    ``$XDG_CACHE_HOME/singlehead``, else ``~/.cache/singlehead``; the quadrature nodes of the state
    evolution are kept in the same directory.

    Examples
    --------
    >>> import os
    >>> from unittest import mock
    >>> from singlehead.numerics.cache_dir import library_cache_dir
    >>> with mock.patch.dict(os.environ, {"SINGLEHEAD_CACHE_DIR": "/tmp/singlehead-cache"}):
    ...     str(library_cache_dir("explore"))
    '/tmp/singlehead-cache/explore'
    >>> with mock.patch.dict(os.environ, {"SINGLEHEAD_CACHE_DIR": "off"}):
    ...     library_cache_dir("explore") is None
    True
    """
    root = os.environ.get("SINGLEHEAD_CACHE_DIR")
    if root is not None and root.strip().lower() in ("", "off", "0", "none"):
        return None
    if root is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "singlehead")
    return Path(root).joinpath(*parts)
