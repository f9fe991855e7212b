"""Every public function and class has a docstring with its conventions and a runnable example.

Public names: ``singlehead.__all__`` and the ``__all__`` of the public subpackages. Each needs a
summary line, prose beyond it (its conventions: normalisations, which error, units) and a
numpydoc ``Examples`` section with at least one ``>>>`` line; each must appear in the API
reference (``docs/api.rst``). The examples themselves run as doctests: the cheap ones in the
default suite, the ones that train a student or trace a whole curve under ``-m slow``.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "singlehead",
    "singlehead.state_evolution",
    "singlehead.model.channels",
    "singlehead.model.students",
    "singlehead.analysis",
    "singlehead.numerics.spectra",
    "singlehead.amp",
    "singlehead.inspect",
    "singlehead.runs",
)
# Examples that take more than about a second (training, AMP, whole curves): run under -m slow.
SLOW = {
    "simulate",
    "compare_spectrum",
    "power_law_curve",
    "classify_regime",
    "scaling_curve",
    "amp",
    "run_amp",
    "AMPRun",
    "erm_objective",
    "instance_prior",
    "SensingOperator",
    "bayes_optimal",
    "theory_curve",
    "MPTarget",
    "decompose",
    "ErrorDecomposition",
    "stability",
    "Stability",
    "init_student",
    "solve_reference",
    "fit_spectrum",
    "SpectralFit",
    "inspect_model",
    "Inspection",
    "inspect_weights",
    "tune_curve",
    "alpha_for_error",
}
MIN_PROSE_CHARS = 40  # a summary line alone does not state conventions
# Public names whose docstring still lacks its example (strict: the mark fails once the example exists).
NO_EXAMPLE_YET = {"singlehead.TrainOptions": "its docstring (singlehead.sim.simulation) has no Examples section yet"}


def _public() -> dict[str, object]:
    """Public name -> object, each function or class once (under the first package exporting it)."""
    out: dict[str, object] = {}
    seen: set[int] = set()
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            if package == "singlehead" and name == "amp":
                continue  # shadowed by the subpackage once it is imported; checked as singlehead.amp.amp
            obj = getattr(module, name)
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and id(obj) not in seen:
                seen.add(id(obj))
                out[f"{package}.{name}"] = obj
    return out


PUBLIC = _public()


def _split(doc: str) -> tuple[str, str]:
    match = re.search(r"^Examples\n-{8}\n", doc, re.M)
    return (doc, "") if match is None else (doc[: match.start()], doc[match.end() :])


def _marked(name: str, marks: list) -> list:
    if name in NO_EXAMPLE_YET:
        marks = [*marks, pytest.mark.xfail(reason=NO_EXAMPLE_YET[name], strict=True)]
    return marks


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marked(n, []), id=n) for n in sorted(PUBLIC)])
def test_public_name_has_docstring_with_conventions_and_example(name: str) -> None:
    doc = inspect.getdoc(PUBLIC[name]) or ""
    assert doc.strip(), f"{name} has no docstring"
    prose, examples = _split(doc)
    summary, _, rest = prose.strip().partition("\n")
    assert summary.strip(), f"{name}: the docstring must open with a summary line"
    assert len(re.sub(r"\s+", " ", prose).strip()) >= MIN_PROSE_CHARS, (
        f"{name}: the docstring must state its conventions beyond a short summary"
    )
    assert ">>> " in examples, f"{name}: the docstring needs an 'Examples' section (numpydoc) with a >>> example"


def test_every_public_name_is_in_the_api_reference() -> None:
    api = (ROOT / "docs" / "api.rst").read_text()
    documented: set[str] = set()
    module = ""
    for line in api.splitlines():
        if line.startswith(".. currentmodule:: "):
            module = line.split()[-1]
        elif re.fullmatch(r"   [A-Za-z_]\w*", line):
            documented.add(f"{module}.{line.strip()}")
    missing = sorted(set(PUBLIC) - documented)
    assert not missing, f"add these public names to docs/api.rst: {missing}"


def _doctest_params() -> list:
    params = []
    for name in sorted(PUBLIC):
        marks = [pytest.mark.slow] if name.rsplit(".", 1)[-1] in SLOW else []
        params.append(pytest.param(name, marks=_marked(name, marks), id=name))
    return params


@pytest.mark.parametrize("name", _doctest_params())
def test_docstring_example_runs(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    monkeypatch.setenv("MPLBACKEND", "Agg")
    obj = PUBLIC[name]
    finder = doctest.DocTestFinder(recurse=False)
    # The module's globals, as `python -m doctest` and pytest's doctest collection give them.
    tests = [t for t in finder.find(obj, name, module=inspect.getmodule(obj)) if t.examples]
    assert tests, f"{name}: no doctest examples found"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    for test in tests:
        runner.run(test, out=report.append)
    assert runner.failures == 0, f"{name}: {runner.failures} failing example(s)\n" + "".join(report)
    assert os.environ.get("MPLBACKEND") == "Agg"
