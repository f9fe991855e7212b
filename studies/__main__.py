"""usage: python -m studies [NAME [--quick] [study options]]  (without NAME: list the studies)

Without a name, lists every study with the first line of its README. With a name, runs
``studies/<name>/study.py``'s command line with the remaining arguments (``--quick`` for a small
version that writes nothing into ``results/``; ``--help`` for the study's own options).
"""

from __future__ import annotations

import importlib
import sys

from . import ROOT, names


def summary(name: str) -> str:
    """The README's title line of study ``name``, without the leading ``#``."""
    readme = ROOT / name / "README.md"
    if not readme.exists():
        return ""
    first = next((line for line in readme.read_text().splitlines() if line.strip()), "")
    return first.lstrip("# ").strip()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(__doc__.strip().splitlines()[0] + "\n")
        width = max(map(len, names()))
        for name in names():
            print(f"  {name:<{width}}  {summary(name)}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in names():
        print(f"error: study must be one of {', '.join(names())} (got {name!r})", file=sys.stderr)
        return 2
    module = importlib.import_module(f"studies.{name}.study")
    return int(module.cli(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
