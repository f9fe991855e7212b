"""README.md is a newcomer's page: it opens with the two commands, CI runs the second one verbatim,
its Python example runs and agrees with the theory, and it stays short and free of history."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
MAX_LINES = 150


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block, in order."""
    return [(m.group(1), m.group(2).strip()) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)]


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one():
    blocks = _fenced_blocks(README)
    (lang1, cmd1), (lang2, cmd2) = blocks[:2]
    assert lang1 == lang2 == "bash"
    assert "\n" not in cmd1 and "\n" not in cmd2, "each command is one line a newcomer can paste"
    # Nothing but the title and one sentence before them.
    before = README[: README.index("```")]
    assert before.startswith("# singlehead\n") and "##" not in before
    assert cmd1.endswith("singlehead reproduce --quick") and "pip install" in cmd1
    assert cmd2.endswith("python -m pytest -q") and "'.[test]'" in cmd2
    ci = (ROOT / ".ci" / "run").read_text()
    ci_commands = [line.strip() for line in ci.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert cmd2 in ci_commands, ".ci/run must run README command 2 verbatim, as its own line"


def test_readme_is_short_and_has_no_commit_hashes_or_history():
    lines = README.splitlines()
    assert len(lines) <= MAX_LINES, f"README has {len(lines)} lines (at most {MAX_LINES})"
    # A commit hash: 7 to 40 hex digits with at least one digit and one letter, as its own word.
    hashes = [w for w in re.findall(r"\b[0-9a-f]{7,40}\b", README) if re.search(r"\d", w) and re.search(r"[a-f]", w)]
    assert hashes == []
    assert "THEORY" not in README, "every reference must point at a page in the repository"
    # Per-run timings belong on docs/performance.rst, written by benchmarks/run_all.py.
    assert not re.search(r"\d+(\.\d+)?\s*(s|ms|min|minutes|seconds)\b", README), "no measured timings in the README"


def test_readme_links_point_at_files_that_exist_or_are_being_written():
    links = re.findall(r"\]\(([^)]+)\)", README)
    assert "docs/theory.rst" in links and "docs/performance.rst" in links
    missing = [link for link in links if not (ROOT / link).exists() and link != "docs/theory.rst"]
    assert missing == []


def test_readme_cli_at_a_glance_lists_every_subcommand():
    help_text = subprocess.run(
        [sys.executable, "-m", "singlehead", "--help"], capture_output=True, text=True, check=True
    ).stdout
    section = help_text.split("Commands:", 1)[1]
    commands = {m.group(1) for m in re.finditer(r"^  ([a-z][a-z-]*)\s", section, re.M)}
    glance = next(body for lang, body in _fenced_blocks(README) if lang == "text" and "singlehead docs" in body)
    listed = [line.split()[1] for line in glance.splitlines() if line.startswith("singlehead ")]
    assert len(listed) == len(set(listed)) and set(listed) == commands, "one line per subcommand of `singlehead --help`"


@pytest.mark.filterwarnings("ignore")
def test_readme_python_example_runs_and_theory_agrees_with_simulation(capsys):
    code = [body for lang, body in _fenced_blocks(README) if lang == "python"]
    assert len(code) == 1
    namespace: dict = {}
    exec(compile(code[0], "README.md", "exec"), namespace)
    assert "test error: theory" in capsys.readouterr().out
    th, mean, se = namespace["th"].test_error, namespace["mean"], namespace["se"]
    assert namespace["th"].converged and se > 0
    # The example's claim: the d -> infinity theory matches the d = 100 simulations (4 s.e. plus a 3 %
    # finite-size allowance, as the report's checks allow).
    assert abs(mean - th) <= 4 * se + 0.03 * th
