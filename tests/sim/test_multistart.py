"""Multi-start ERM (``TrainOptions.n_starts``): several initialisations on the same data, the lowest objective kept."""

from __future__ import annotations

import pytest

from singlehead import Problem, simulate
from singlehead.sim.simulation import TrainOptions

P = Problem(d=30, T=2, alpha=1.0, noise=0.5, lam=0.01, student="untied")


def test_one_start_is_the_default_fit_and_keeps_its_cache_key():
    assert "n_starts" not in TrainOptions().key_fields()
    assert TrainOptions(n_starts=3).key_fields()["n_starts"] == 3
    a, b = simulate(P, seed=2), simulate(P, seed=2, options=TrainOptions(n_starts=1))
    assert a.test_error == b.test_error and a.extras["objective"] == b.extras["objective"]
    assert "start_objectives" not in a.extras


def test_the_lowest_objective_of_the_starts_is_kept():
    single = simulate(P, seed=2)
    multi = simulate(P, seed=2, options=TrainOptions(n_starts=3))
    objs = multi.extras["start_objectives"]
    assert len(objs) == 3 and objs[0] == single.extras["objective"]  # the first start is the single-start fit
    assert multi.extras["objective"] == min(objs) == objs[multi.extras["best_start"]]
    assert multi.extras["objective_spread"] == pytest.approx(max(objs) - min(objs), abs=0.0)
    assert len(set(objs)) > 1  # the other starts are other initialisations
    errs = multi.extras["start_test_errors"]
    assert len(errs) == 3 and errs[0] == pytest.approx(single.test_error, rel=1e-12)
    assert errs[multi.extras["best_start"]] == multi.test_error
    assert multi.extras["test_error_spread"] == pytest.approx(max(errs) - min(errs), abs=0.0)
    assert len(set(errs)) > 1


def test_bad_options_are_refused_by_name():
    with pytest.raises(ValueError, match="n_starts"):
        TrainOptions(n_starts=0)
    with pytest.raises(ValueError, match="record_every"):
        TrainOptions(n_starts=2, record_every=5)


def test_cli_option(capsys):
    import json

    from singlehead.cli import main

    main(
        ["simulate", "--student", "untied", "--d", "20", "--alpha", "1", "--noise", "0.5", "--n-starts", "2", "--json"]
    )
    rec = json.loads(capsys.readouterr().out.splitlines()[0])
    assert len(rec["start_objectives"]) == 2 and rec["objective"] == min(rec["start_objectives"])
