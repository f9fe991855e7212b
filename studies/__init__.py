"""Studies: questions about the theory answered by running the library (one folder each).

Each ``studies/<name>/`` holds ``study.py`` (``main(quick)`` and a command line), ``README.md``
(the question, the method, how to run it, the conclusion) and ``results/`` (the committed
outputs). Run one from the repository root with ``python -m studies <name> [--quick]``; list them
with ``python -m studies``. Studies use only the public API of ``singlehead`` and cache their runs
in the library's result cache (:class:`singlehead.runs.Cache`) under ``runs/studies/<name>``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

__all__ = ["ROOT", "names", "study_parser", "echo_into", "write_table"]

ROOT = Path(__file__).resolve().parent


def names() -> list[str]:
    """The studies: every folder of ``studies/`` with a ``study.py``, sorted."""
    return sorted(p.parent.name for p in ROOT.glob("*/study.py"))


def study_parser(here: Path, doc: str | None) -> argparse.ArgumentParser:
    """The command line of the study in folder ``here``: ``python -m studies <name>``, its docstring as help."""
    return argparse.ArgumentParser(
        prog=f"python -m studies {here.name}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def echo_into(lines: list[str]) -> Callable[..., None]:
    """A ``print`` that also appends each printed line to ``lines`` (the table a study writes).

    Keyword arguments (``flush=...``) are accepted and ignored: the line is always flushed.
    """

    def say(*parts: object, **_: object) -> None:
        text = " ".join(map(str, parts))
        print(text, flush=True)
        lines.append(text)

    return say


def write_table(here: Path, lines: list[str]) -> None:
    """Write a study's table (markdown ``lines``) to ``<here>/results/table.md``."""
    (here / "results").mkdir(exist_ok=True)
    (here / "results" / "table.md").write_text("\n".join(lines) + "\n")
