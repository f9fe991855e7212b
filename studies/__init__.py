"""Studies: questions about the theory answered by running the library (one folder each).

Each ``studies/<name>/`` holds ``study.py`` (``main(quick)`` and a command line), ``README.md``
(the question, the method, how to run it, the conclusion) and ``results/`` (the committed
outputs). Run one from the repository root with ``python -m studies <name> [--quick]``; list them
with ``python -m studies``. Studies use only the public API of ``singlehead`` and cache their runs
in the library's result cache (:class:`singlehead.experiments.Cache`) under ``runs/studies/<name>``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ROOT", "names"]

ROOT = Path(__file__).resolve().parent


def names() -> list[str]:
    """The studies: every folder of ``studies/`` with a ``study.py``, sorted."""
    return sorted(p.parent.name for p in ROOT.glob("*/study.py"))
