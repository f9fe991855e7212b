"""The CLI: bad input gives a one-line message naming the parameter; JSON keys; streaming and resume."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from singlehead.cli import main

BAD = [
    (["--lam", "-1"], "lam"),
    (["--T", "0"], "T"),
    (["--kappa0", "0"], "kappa0"),
    (["--alpha", "0"], "alpha"),
    (["--alpha", "-1,2"], "alpha"),
    (["--device", "tpu"], "device"),
    (["--d", "1"], "d"),
    (["--kappa", "1.5"], "kappa"),
    (["--kappa", "0"], "kappa"),
    (["--noise", "-0.1"], "noise"),
    (["--beta", "0"], "beta"),
    (["--beta0", "-1"], "beta0"),
    (["--gamma", "0.3"], "gamma"),
    (["--gamma", "1", "--kappa0", "0.5"], "target"),
    (["--seeds", "0"], "seeds"),
    (["--n-test", "1"], "n-test"),
    (["--task", "foo"], "task"),
    (["--alpha", "nan"], "alpha"),
]


@pytest.mark.parametrize("args,name", BAD)
def test_bad_input_one_line_error(args, name, usage_error):
    usage_error(["simulate", *args], name)


def test_cuda_request_without_gpu_is_refused(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(SystemExit):
        main(["simulate", "--device", "cuda"])
    assert "device" in capsys.readouterr().err


def test_no_traceback_from_console_script():
    out = subprocess.run(
        [sys.executable, "-m", "singlehead", "simulate", "--lam", "-2"], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert out.stderr.strip() == "error: lam must be >= 0 (got -2.0)"


def test_json_keys_stream_and_resume(tmp_path, capsys):
    out = tmp_path / "runs.jsonl"
    args = ["simulate", "--d", "10", "--alpha", "0.5", "--n-test", "200", "--json", "--out", str(out)]
    main([*args, "--seeds", "2"])
    lines = capsys.readouterr().out.strip().splitlines()
    recs = [json.loads(x) for x in lines]
    assert len(recs) == 2 and len(out.read_text().splitlines()) == 2
    for key in (
        "test_error",
        "test_error_noisy",
        "train_error",
        "matrix_error",
        "rank",
        "eigenvalues",
        "problem",
        "seed",
        "version",
        "runtime_s",
    ):
        assert key in recs[0]
    assert recs[0]["problem"]["d"] == 10 and len(recs[0]["eigenvalues"]) == 10
    # Simulate an interruption that left a half-written line, then resume with one more seed.
    with open(out, "a") as fh:
        fh.write('{"key": "trunc')
    main([*args, "--seeds", "3"])
    cap = capsys.readouterr()
    recs2 = [json.loads(x) for x in cap.out.strip().splitlines()]
    assert [r["seed"] for r in recs2] == [0, 1, 2]
    assert recs2[0]["runtime_s"] == recs[0]["runtime_s"]  # reused, not recomputed
    assert "resumed: 2 of 3" in cap.err


def test_spectrum_json_and_plot(tmp_path, capsys):
    plot = tmp_path / "law.png"
    main(
        [
            "spectrum",
            "--target",
            "mp",
            "--kappa0",
            "0.5",
            "--variance",
            "0.1",
            "--threshold",
            "0.3",
            "--scale",
            "2",
            "--json",
            "--plot",
            str(plot),
        ]
    )
    rec = json.loads(capsys.readouterr().out)
    for key in ("grid", "density", "atom_at_zero", "edges", "outliers"):
        assert key in rec
    assert plot.stat().st_size > 1000
    # mass balance: the zero atom plus the density's integral is one
    import numpy as np

    mass = rec["atom_at_zero"] + np.trapezoid(rec["density"], rec["grid"]) + sum(m for _, m in rec["point_masses"])
    assert abs(mass - 1) < 5e-3
    # ReLU(mu - eps) with eps = 0.3 > 0 puts more than the MP atom (1 - kappa0 = 0.5) at zero
    assert rec["atom_at_zero"] > 0.5


def test_spectrum_outlier(capsys):
    main(["spectrum", "--kappa0", "0.5", "--variance", "0.05", "--d", "200", "--spikes", "6", "--json"])
    rec = json.loads(capsys.readouterr().out)
    assert len(rec["outliers"]) == 1


@pytest.mark.parametrize(
    "args,name",
    [
        (["--variance", "-1"], "variance"),
        (["--variance", "0.1", "--threshold", "-1"], "threshold"),
        (["--variance", "0.1", "--scale", "0"], "scale"),
        (["--variance", "0.1", "--kappa0", "-1"], "kappa0"),
        (["--variance", "0.1", "--target", "power-law"], "gamma"),
        (["--variance", "0.1", "--rank-cap", "1.5"], "rank-cap"),
    ],
)
def test_spectrum_bad_input(args, name, usage_error):
    usage_error(["spectrum", *args], name)


def test_scaling_json_is_strict(capsys):
    """Non-finite numbers (e.g. undefined local exponents at the ends of a curve) print as null."""
    main(["scaling", "--gamma", "1.25", "--d", "300", "--json"])
    rec = json.loads(capsys.readouterr().out)  # json.loads accepts NaN; check the text has none
    assert "fit" in rec and 0 < rec["fit"]["exponent"] < 2
    assert "NaN" not in json.dumps(rec) and "Infinity" not in json.dumps(rec)


def test_lazy_command_table_matches_the_commands():
    """`singlehead --help` lists commands from a static table (their modules load on use): it must
    name every command, and each help must begin the command's own docstring."""
    import importlib

    from singlehead.cli import COMMANDS

    for name, (module, attr, text) in COMMANDS.items():
        cmd = importlib.import_module(f"singlehead.cli.{module}").__dict__[attr]
        assert cmd.name == name
        assert " ".join(cmd.help.split()).startswith(text.rstrip(".")), name


def test_help_loads_no_command_module():
    import subprocess
    import sys

    code = (
        "import sys\nfrom singlehead.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('singlehead.cli.') or m in ('torch', 'matplotlib')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
