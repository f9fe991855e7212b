"""``singlehead docs``: a clear error without the docs extra, the CI build command, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from singlehead.cli import cli, main
from singlehead.cli import docs as docs_cli


def test_missing_docs_extra_gives_one_line_error(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(docs_cli, "missing_packages", lambda: ["sphinx", "sphinx_gallery"])
    with pytest.raises(SystemExit) as exc:
        main(["docs", "--no-open"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: docs needs the docs extra") and "pip install -e '.[docs]'" in err
    assert err.count("\n") == 1


def test_bad_source_and_port_are_rejected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    monkeypatch.setattr(docs_cli, "missing_packages", lambda: [])
    for args, word in ((["--source", str(tmp_path)], "source"), (["--port", "0"], "port")):
        with pytest.raises(SystemExit) as exc:
            main(["docs", "--no-open", *args])
        assert exc.value.code == 2 and f"error: {word} must be" in capsys.readouterr().err


def test_build_command_is_the_ci_one() -> None:
    cmd = docs_cli.sphinx_command(Path("docs"), Path("out"), gallery=True)
    assert cmd[1:] == ["-m", "sphinx", "-n", "-W", "--keep-going", "-b", "html", "docs", "out"]
    assert docs_cli.sphinx_command(Path("docs"), Path("out"), gallery=False)[-2:] == ["-D", "plot_gallery=0"]
    assert (docs_cli.default_source() / "conf.py").is_file()


def test_docs_is_registered() -> None:
    result = CliRunner().invoke(cli, ["docs", "--help"])
    assert result.exit_code == 0 and "--serve" in result.output
