"""Studies: questions about the theory answered by running the library (one folder each).

Each ``studies/<name>/`` holds ``study.py`` (``main(quick)`` and a command line), ``README.md``
(the question, the method, how to run it, the conclusion) and ``results/`` (the committed
outputs). Run one from the repository root with ``python -m studies <name> [--quick]``; list them
with ``python -m studies``. Studies use only the public API of ``singlehead`` and cache their runs
in the library's result cache (:class:`singlehead.experiments.Cache`) under ``runs/studies/<name>``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["ROOT", "names", "study_parser", "write_table"]

ROOT = Path(__file__).resolve().parent


def names() -> list[str]:
    """The studies: every folder of ``studies/`` with a ``study.py``, sorted."""
    return sorted(p.parent.name for p in ROOT.glob("*/study.py"))


def study_parser(here: Path, doc: str | None) -> argparse.ArgumentParser:
    """The command line of the study in folder ``here``: ``python -m studies <name>``, its docstring as help."""
    return argparse.ArgumentParser(prog=f"python -m studies {here.name}", description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def write_table(here: Path, lines: list[str]) -> None:
    """Write a study's table (markdown ``lines``) to ``<here>/results/table.md``."""
    (here / "results").mkdir(exist_ok=True)
    (here / "results" / "table.md").write_text("\n".join(lines) + "\n")
