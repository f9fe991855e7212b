"""README opens with exactly two commands, and CI runs the second one verbatim."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _blocks(text: str) -> list[str]:
    parts = text.split("```bash\n")[1:]
    return [p.split("```")[0].strip() for p in parts]


def test_readme_opens_with_two_commands_and_ci_runs_the_test_one():
    text = (ROOT / "README.md").read_text()
    head = text.split("\n## ")[0]
    blocks = _blocks(head)
    assert len(blocks) == 2 and all("\n" not in b for b in blocks)
    assert "pytest" in blocks[1] and "singlehead" in blocks[0]
    assert blocks[1] in (ROOT / ".ci" / "run").read_text()
