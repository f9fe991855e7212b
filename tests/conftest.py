"""Shared test helpers."""

from __future__ import annotations

import pytest


@pytest.fixture
def usage_error(capsys):
    """Run ``singlehead ARGV`` through ``cli.main``; assert the bad-input contract; return the line.

    The contract (README): exit status 2 and exactly one stderr line, ``error: ...``, naming the
    parameter ``name``, no traceback.
    """
    from singlehead.cli import main

    def run(argv: list[str], name: str) -> str:
        capsys.readouterr()  # drop earlier output
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:")
        assert name in err[0]
        assert "Traceback" not in err[0]
        return err[0]

    return run


@pytest.fixture
def one_torch_thread():
    """Run the test with one torch thread (sized instances; no oversubscription beside other workers)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
