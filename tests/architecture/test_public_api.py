"""The public API boundary: what ``docs/api.rst`` lists is public, everything else is internal.

* every ``.py`` under ``studies/``, ``examples/`` and ``benchmarks/`` (parsed with ``ast``, never imported)
  imports from ``singlehead`` only names the API reference lists: ``from M import N`` needs ``M.N`` listed
  (``M`` is ``singlehead`` or a module the reference documents), ``import M`` needs ``M`` to be ``singlehead``
  or a documented module, and an attribute chain ``singlehead.a.b`` must reach a listed name or module;
* none of those files edits ``sys.path`` (or ``PYTHONPATH`` in ``os.environ``, or calls ``site.addsitedir``);
* every name in ``singlehead.__all__`` is importable from ``singlehead`` and listed in the reference;
* the python code blocks of the pages a new user reads first (``index.rst``, ``getting_started.rst``) use
  only the public API too.

The checker's own tests feed it sources with violations, so a check that cannot fail is caught here too.
"""

from __future__ import annotations

import ast
import importlib
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api.rst"
FOLDERS = ("studies", "examples", "benchmarks")
SOURCES = sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def documented(text: str) -> tuple[set[str], set[str]]:
    """``(names, modules)`` the API reference ``text`` lists: each autosummary entry as ``module.name`` under
    the ``.. currentmodule::`` in force, and every such module."""
    names: set[str] = set()
    modules: set[str] = set()
    module = ""
    for line in text.splitlines():
        if line.startswith(".. currentmodule:: "):
            module = line.split()[-1]
            modules.add(module)
        elif re.fullmatch(r"   [A-Za-z_]\w*", line) and module:
            names.add(f"{module}.{line.strip()}")
    return names, modules


NAMES, MODULES = documented(API.read_text())


def _listed(dotted: str, names: set[str], modules: set[str]) -> bool:
    return dotted in names or dotted in modules


def violations(source: str, names: set[str] = NAMES, modules: set[str] = MODULES) -> list[str]:
    """What in ``source`` uses ``singlehead`` beyond the listed ``names`` and ``modules``, or edits the import
    path; one line each (``line N: ...``)."""
    out: list[str] = []
    tree = ast.parse(source)
    aliases: dict[str, str] = {}  # local name -> the singlehead module it is bound to by `import`
    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            root = node.module.split(".")[0]
            if root == "singlehead":
                for a in node.names:
                    dotted = f"{node.module}.{a.name}"
                    if a.name == "*" or not _listed(dotted, names, modules):
                        out.append(f"{where}: from {node.module} import {a.name}")
            elif node.module == "sys" and any(a.name == "path" for a in node.names):
                out.append(f"{where}: from sys import path")
            elif node.module == "site" and any(a.name == "addsitedir" for a in node.names):
                out.append(f"{where}: from site import addsitedir")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] != "singlehead":
                    continue
                if a.name != "singlehead" and a.name not in modules:
                    out.append(f"{where}: import {a.name}")
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    aliases["singlehead"] = "singlehead"
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "sys" and node.attr == "path":
                out.append(f"{where}: sys.path")
            elif node.value.id == "site" and node.attr == "addsitedir":
                out.append(f"{where}: site.addsitedir")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0].value
            if (
                fname == "import_module"
                and isinstance(arg, str)
                and arg.split(".")[0] == "singlehead"
                and (arg != "singlehead" and arg not in modules)
            ):
                out.append(f"{where}: import_module({arg!r})")
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and node.slice.value == "PYTHONPATH"
        ):
            out.append(f"{where}: PYTHONPATH")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("setdefault", "update", "putenv")
            and any(isinstance(x, ast.Constant) and x.value == "PYTHONPATH" for x in node.args)
        ):
            out.append(f"{where}: PYTHONPATH")
    out += _attribute_chains(tree, aliases, names, modules)
    return out


def _attribute_chains(tree: ast.AST, aliases: dict[str, str], names: set[str], modules: set[str]) -> list[str]:
    """Attribute chains ``alias.a.b`` on a name bound by ``import singlehead[...]``: the chain must reach a listed
    name (its longest prefix that is not a listed module must be listed); ``__version__`` is public."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        parts, cur = [], node
        while isinstance(cur, ast.Attribute):
            parts.append(cur.attr)
            cur = cur.value
        if not isinstance(cur, ast.Name) or cur.id not in aliases:
            continue
        chain = [aliases[cur.id], *reversed(parts)]
        if chain[1:2] == ["__version__"]:
            continue
        # the longest prefix that is a listed module; the next part must be a listed name or module
        i = max(k for k in range(1, len(chain) + 1) if ".".join(chain[:k]) in modules | {"singlehead"})
        if i == len(chain) or _listed(".".join(chain[: i + 1]), names, modules):
            continue
        out.append(f"line {node.lineno}: {'.'.join(chain[: i + 1])}")
    # only the outermost chain of each expression counts once: drop duplicates
    return sorted(set(out), key=out.index)


# The remaining scripts that measure or probe internals no public route reaches (the figure specs' curve
# loop, the reference engine of the MP prior, the single-head and multi-head maps evaluated at given points, the
# prox's interpolating start, the multi-head figure's transition finder). Each entry is exact: a new internal
# import fails, and so does an entry that is no longer needed (the list can only shrink).
KNOWN_INTERNAL: dict[str, set[str]] = {
    "benchmarks/bench_power_law_curves.py": {
        "from singlehead.figures import figspec",
        "from singlehead.figures.figspec import FIGURES",
        "from singlehead.figures.figspec import Context",
        "from singlehead.figures.figspec import Preset",
        "from singlehead.figures.figspec import build",
        "import singlehead.figures.reproduce",
    },
    "benchmarks/bench_prior_side.py": {"from singlehead.numerics.spectra._mp_reference import reference_routes"},
    "studies/multihead_validation/study.py": {
        "from singlehead.figures.multihead import transition_text",
        "from singlehead.figures.multihead import transitions",
    },
    "studies/peak_investigation/branches.py": {"from singlehead.numerics.prox import interpolating_start"},
    "studies/se_fixed_points/study.py": {
        "from singlehead.state_evolution.se_map import SEMap",
        "from singlehead.state_evolution.se_map import residual_floor",
    },
}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_scripts_use_only_the_public_api(path: Path) -> None:
    name = str(path.relative_to(ROOT))
    found = violations(path.read_text())
    assert not any("sys.path" in v or "PYTHONPATH" in v or "addsitedir" in v for v in found), (
        f"{name} edits the import path: {found}"
    )
    uses = {v.split(": ", 1)[1] for v in found}
    known = KNOWN_INTERNAL.get(name, set())
    assert uses <= known, f"{name} uses what docs/api.rst does not list: {sorted(uses - known)}"
    assert known <= uses, f"{name} no longer uses {sorted(known - uses)}: remove it from KNOWN_INTERNAL"


def test_known_internal_uses_name_existing_files() -> None:
    assert all((ROOT / name).is_file() for name in KNOWN_INTERNAL), sorted(KNOWN_INTERNAL)


FIRST_PAGES = ("index.rst", "getting_started.rst")  # what a new user reads first: public API only


def python_blocks(rst: str) -> list[str]:
    """The ``.. code-block:: python`` bodies of a reST page, dedented."""
    blocks = re.findall(r"^\.\. code-block:: python\n((?:\n|[ ]{3,}.*\n)+)", rst, re.M)
    return [textwrap.dedent(b) for b in blocks]


@pytest.mark.parametrize("page", FIRST_PAGES)
def test_first_pages_use_only_the_public_api(page: str) -> None:
    blocks = python_blocks((ROOT / "docs" / page).read_text())
    assert blocks, f"docs/{page} has no python code block"
    for block in blocks:
        assert violations(block) == [], f"docs/{page}: {violations(block)}"


def test_code_blocks_are_found_and_checked() -> None:
    rst = "Title\n\n.. code-block:: python\n\n   from singlehead.sim.simulation import TrainOptions\n\nText.\n"
    (block,) = python_blocks(rst)
    assert violations(block) == ["line 2: from singlehead.sim.simulation import TrainOptions"]


def test_there_are_scripts_in_every_folder() -> None:
    for folder in FOLDERS:
        assert any(p.is_relative_to(ROOT / folder) for p in SOURCES), folder


def test_the_reference_lists_public_modules() -> None:
    assert "singlehead" in MODULES and "singlehead.Problem" in NAMES and "singlehead.SEOptions" in NAMES
    for module in MODULES:
        importlib.import_module(module)


@pytest.mark.parametrize("name", [n for n in importlib.import_module("singlehead").__all__ if n != "__version__"])
def test_every_exported_name_is_importable_and_documented(name: str) -> None:
    package = importlib.import_module("singlehead")
    namespace: dict = {}
    exec(f"from singlehead import {name}", namespace)  # noqa: S102  (the user's spelling of the import)
    assert namespace[name] is not None
    assert hasattr(package, name)
    assert _listed(f"singlehead.{name}", NAMES, MODULES), f"singlehead.{name} is exported but not in docs/api.rst"


def test_every_documented_name_exists() -> None:
    missing = []
    for dotted in sorted(NAMES):
        module, _, name = dotted.rpartition(".")
        if not hasattr(importlib.import_module(module), name):
            missing.append(dotted)
    assert missing == [], f"docs/api.rst lists names that do not exist: {missing}"


# ---- the checker itself can fail ------------------------------------------------------------------------------

LISTED = {"singlehead.Problem", "singlehead.theory", "singlehead.analysis.decompose"}
PUBLIC_MODULES = {"singlehead", "singlehead.analysis"}


@pytest.mark.parametrize(
    "source, expected",
    [
        (
            "from singlehead import Problem, theory\nfrom singlehead.analysis import decompose\nimport singlehead\n"
            "import singlehead.analysis\nimport numpy as np\nv = singlehead.__version__\nsinglehead.theory(None)\n"
            "singlehead.analysis.decompose\n",
            [],
        ),
        (
            "from singlehead.sim.simulation import TrainOptions\n",
            ["line 1: from singlehead.sim.simulation import TrainOptions"],
        ),
        ("from singlehead import BlockSetup\n", ["line 1: from singlehead import BlockSetup"]),
        ("from singlehead.analysis import _private\n", ["line 1: from singlehead.analysis import _private"]),
        ("from singlehead import *\n", ["line 1: from singlehead import *"]),
        (
            "def f():\n    from singlehead.numerics import prox_rows\n",
            ["line 2: from singlehead.numerics import prox_rows"],
        ),
        ("import singlehead.figures.reproduce\n", ["line 1: import singlehead.figures.reproduce"]),
        ("import singlehead\nsinglehead.model.problem.Problem\n", ["line 2: singlehead.model"]),
        ("import singlehead.analysis as an\nan.finite_size.gaps\n", ["line 2: singlehead.analysis.finite_size"]),
        (
            "import importlib\nimportlib.import_module('singlehead.sim.data')\n",
            ["line 2: import_module('singlehead.sim.data')"],
        ),
        ("import sys\nsys.path.insert(0, 'tests')\n", ["line 2: sys.path"]),
        ("from sys import path\npath.append('x')\n", ["line 1: from sys import path"]),
        ("import os\nos.environ['PYTHONPATH'] = 'src'\n", ["line 2: PYTHONPATH"]),
        ("import site\nsite.addsitedir('src')\n", ["line 2: site.addsitedir"]),
    ],
)
def test_the_checker_flags_violations(source: str, expected: list[str]) -> None:
    assert violations(source, LISTED, PUBLIC_MODULES) == expected


def test_the_reference_parser_reads_currentmodule_sections() -> None:
    text = (
        ".. currentmodule:: singlehead\n\n.. autosummary::\n   :toctree: generated\n\n   Problem\n   theory\n\n"
        ".. currentmodule:: singlehead.analysis\n\n.. autosummary::\n\n   decompose\n"
    )
    assert documented(text) == (LISTED, PUBLIC_MODULES)


@pytest.mark.slow
def test_the_first_curve_of_getting_started_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's first block, as printed (a theory curve and six simulations at d = 40; about 20 s)."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    block = python_blocks((ROOT / "docs" / "getting_started.rst").read_text())[0]
    namespace: dict = {}
    exec(compile(block, "getting_started.rst", "exec"), namespace)  # noqa: S102
    curve, sims = namespace["curve"], namespace["sims"]
    assert len(curve) == 12 and all(r.converged for r in curve)
    assert sorted(sims) == [0.5, 1.5, 2.5] and all(len(v) == 2 for v in sims.values())
