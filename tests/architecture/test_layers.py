"""The architecture as a test: the import layers of README's layout, and theory without torch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_import_layers_contract():
    """``lint-imports`` checks the layers contract of pyproject.toml (no upward import, no cycle)."""
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    if not Path(exe).exists():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "1 kept, 0 broken" in out.stdout


def test_theory_imports_no_torch_or_matplotlib():
    code = (
        "import sys, singlehead.state_evolution, singlehead.analysis, singlehead.numerics.spectra, singlehead.bayes, "
        "singlehead.thresholds; print(sorted(m for m in ('torch', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_one_theory_point_loads_no_heavy_scipy_module():
    """Start-up: a softmax SE point needs neither scipy.stats (~1.3 s to import) nor
    scipy.linalg / scipy.optimize (~0.5 s each); the quadrature nodes come from the node cache."""
    code = (
        "import sys\nfrom singlehead import MPTarget, Problem\nfrom singlehead.state_evolution import theory\n"
        "theory(Problem(T=2, alpha=0.5, noise=0.5, lam=0.01, target=MPTarget(0.5)))\n"
        "print(sorted(m for m in ('scipy.stats', 'scipy.linalg', 'scipy.optimize', 'scipy.integrate', 'torch')"
        " if m in sys.modules))"
    )
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)  # fills the node cache
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cli_theory_point_loads_no_heavy_module(tmp_path):
    """Start-up of the command line: ``singlehead theory`` for one tied point goes through the CLI,
    the runner and its route table without importing SciPy's stats, optimize or integrate, torch,
    pandas or matplotlib (the Bayes, threshold, simulation and figure code they serve is imported
    by the routes and commands that run it). Structural, not timed; the first run fills the
    quadrature-node cache (a miss imports scipy.stats to draw the nodes)."""
    heavy = ("scipy.stats", "scipy.optimize", "scipy.integrate", "torch", "pandas", "matplotlib")
    code = (
        "import sys\nfrom singlehead.cli import main\nmain(['theory', '--alpha', '1', '--T', '2'])\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))\n"
        "print(sorted(m for m in sys.modules if m.startswith('singlehead.')))"
    )
    env = {**os.environ, "SINGLEHEAD_CACHE_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    *_, theory_line, loaded, modules = out.stdout.strip().splitlines()
    assert theory_line.startswith("alpha=1: test_error=") and "converged=True" in theory_line
    assert loaded == "[]", f"a CLI theory point imported {loaded}"
    for lazy in ("singlehead.bayes", "singlehead.thresholds", "singlehead.sim.simulation", "singlehead.amp"):
        assert f"'{lazy}'" not in modules, f"a CLI theory point imported {lazy}"


def test_no_import_cycle():
    """No module imports itself back through any chain (lazy, function-level imports included)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("singlehead")
    # Tarjan's strongly connected components; a component of size > 1 is a cycle
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    assert cycles == []
