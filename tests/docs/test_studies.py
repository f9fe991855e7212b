"""The studies/ folder: one folder per study, public API only, one command to run them.

Structural checks (no study is run here: they take minutes to hours): every ``studies/<name>/``
has ``study.py``, ``README.md`` and ``results/``; no file under ``studies/`` edits ``sys.path``,
imports from ``tests/``, or imports a private name or module of ``singlehead`` (parsed with
``ast``); every study imports and exposes ``main(quick)`` and ``cli(argv)``; ``python -m studies``
lists them all.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUDIES = ROOT / "studies"
NAMES = sorted(p.name for p in STUDIES.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
SOURCES = sorted(STUDIES.rglob("*.py"))


def private_imports(source: str) -> list[str]:
    """``singlehead`` imports in ``source`` whose module path or imported name has a part starting with ``_``,
    and any import of the test suite's modules (``tests``, ``conftest``, ``problem_grids``)."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] in ("tests", "conftest", "problem_grids"):
                bad.append(node.module)
            elif parts[0] == "singlehead":
                bad += [
                    f"{node.module}.{a.name}"
                    for a in node.names
                    if any(p.startswith("_") for p in parts) or a.name.startswith("_")
                ]
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] in ("tests", "conftest", "problem_grids") or (
                    parts[0] == "singlehead" and any(p.startswith("_") for p in parts)
                ):
                    bad.append(a.name)
    return bad


def test_there_are_studies():
    assert len(NAMES) >= 10 and "peak_investigation" in NAMES, NAMES
    assert not (ROOT / "validation").exists()


@pytest.mark.parametrize("name", NAMES)
def test_study_folder_layout(name):
    folder = STUDIES / name
    assert (folder / "study.py").is_file(), f"{name}: no study.py"
    assert (folder / "README.md").is_file(), f"{name}: no README.md"
    assert (folder / "results").is_dir() and any((folder / "results").iterdir()), f"{name}: no results/"
    readme = (folder / "README.md").read_text()
    for section in ("## Question", "## Method", "## Run", "## Results", "## Conclusion"):
        assert section in readme, f"{name}/README.md lacks {section!r}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(STUDIES)))
def test_no_sys_path_edits_or_private_imports(path):
    source = path.read_text()
    assert "sys.path" not in source, f"{path} edits sys.path"
    assert private_imports(source) == [], f"{path} imports private names"


def test_the_import_check_can_fail():
    bad = (
        "from singlehead.numerics.spectra._mp_reference import step\nfrom singlehead.x import _y\n"
        "import singlehead._registry\nfrom problem_grids import random_problems\n"
        "from singlehead.runs import cached\nimport numpy as np\n"
    )
    assert private_imports(bad) == [
        "singlehead.numerics.spectra._mp_reference.step",
        "singlehead.x._y",
        "singlehead._registry",
        "problem_grids",
    ]


def test_no_cache_or_worker_files_tracked():
    """Committed results are a study's outputs: no per-worker or cache files under studies/."""
    out = subprocess.run(["git", "ls-files", "studies"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    tracked = out.stdout.split()
    bad = [f for f in tracked if ".worker" in f or "/cache" in f or f.endswith((".npz", ".tmp", ".pyc"))]
    assert bad == []


@pytest.mark.parametrize("name", NAMES)
def test_study_imports_and_exposes_main(name, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    module = importlib.import_module(f"studies.{name}.study")
    params = inspect.signature(module.main).parameters
    assert list(params)[0] == "quick" and params["quick"].default is False
    assert callable(module.cli)
    with pytest.raises(SystemExit) as exc:
        module.cli(["--help"])
    assert exc.value.code == 0


def test_runner_lists_every_study_and_rejects_an_unknown_one():
    run = lambda *a: subprocess.run([sys.executable, "-m", "studies", *a], cwd=ROOT, capture_output=True, text=True)  # noqa: E731
    listing = run()
    assert listing.returncode == 0, listing.stderr
    assert all(name in listing.stdout for name in NAMES)
    bad = run("no_such_study")
    assert bad.returncode == 2 and "study must be one of" in bad.stderr
