"""``singlehead phase``: bad input exits 2 naming the parameter; one JSON row per grid point; --out resumes; --plot."""

from __future__ import annotations

import json

import pytest

from singlehead.cli import main

GRID = ["--x", "alpha=0.1,1", "--y", "lam=log:1e-4:10:2", "--kappa0", "0.5", "--noise", "0.5", "--no-stability"]


@pytest.mark.parametrize(
    "args,name",
    [
        (["--x", "gamma=1,2", "--y", "lam=1,2"], "gamma"),
        (["--x", "alpha", "--y", "lam=1,2"], "x"),
        (["--x", "alpha=1", "--y", "lam=1,2"], "alpha"),
        (["--x", "alpha=1,2", "--y", "lam=0:1:3"], "lam"),  # non-positive on a log axis
        (["--x", "alpha=1,2", "--y", "alpha=1,2"], "alpha"),  # the same parameter twice
        (["--x", "alpha=1,x", "--y", "lam=1,2"], "alpha"),  # the range grammar of `theory --alpha`
        (["--x", "kappa=0.5,2", "--y", "lam=1,2"], "kappa"),
        (["--x", "alpha=1,2", "--y", "lam=1,2", "--workers", "0"], "workers"),
        (["--x", "lam=1,2", "--y", "noise=0,1", "--alpha", "0.5,1"], "alpha"),  # two alphas, alpha no axis
        (["--x", "alpha=1,2", "--y", "lam=1,2", "--beta", "0"], "beta"),  # a problem option
        (["--x", "alpha=0.5,1", "--y", "lam=0.01,0.1", "--heads", "6"], "heads"),  # outside the theory's reach
    ],
)
def test_bad_input_exits_2_naming_the_parameter(args, name, usage_error):
    line = usage_error(["phase", *args], name)
    assert line.startswith("error: ")


def test_json_rows_one_per_point(capsys):
    main(["phase", *GRID, "--json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert len(rows) == 4
    assert {(r["alpha"], r["lam"]) for r in rows} == {(0.1, 1e-4), (1.0, 1e-4), (0.1, 10.0), (1.0, 10.0)}
    for r in rows:
        for key in (
            "test_error",
            "train_error",
            "rank_fraction",
            "converged",
            "diagnosis",
            "replicon",
            "region",
            "alpha_interp",
            "collapse_lam",
            "T",
            "kappa0",
            "problem",
            "i",
            "j",
        ):
            assert key in r, key
        assert r["replicon"] is None  # --no-stability: strict JSON null
    regions = {(r["alpha"], r["lam"]): r["region"] for r in rows}
    assert regions == {
        (0.1, 1e-4): "interpolating",
        (1.0, 1e-4): "ordinary",
        (0.1, 10.0): "collapsed",
        (1.0, 10.0): "collapsed",
    }


def test_out_resumes_and_plot(tmp_path, capsys):
    out, png = tmp_path / "grid.jsonl", tmp_path / "grid.png"
    main(["phase", *GRID, "--out", str(out)])
    first = capsys.readouterr()
    assert len(first.out.strip().splitlines()) == 4 and "region=" in first.out
    assert len(out.read_text().splitlines()) == 4
    main(["phase", *GRID, "--out", str(out), "--plot", str(png), "--json"])
    second = capsys.readouterr()
    assert "resumed: 4 of 4 points" in second.err
    assert len(second.out.strip().splitlines()) == 4 and len(out.read_text().splitlines()) == 4
    assert png.stat().st_size > 1000


def test_listed_in_the_command_table():
    from singlehead.cli import COMMANDS
    from singlehead.cli.phase import phase

    assert phase.help.startswith(COMMANDS["phase"][2])
