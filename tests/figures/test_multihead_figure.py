"""The ``multihead`` report figure at its smoke size: rows with verdicts and declared tolerances, finite numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from singlehead import theory

# reproduce first: it registers the figures in the report's order (its imports' order)
from singlehead.figures.reproduce import FIGURES, reproduce

# isort: split
from singlehead.figures.multihead import (
    BRANCH_INDEX,
    MultiheadSpec,
    diag_offdiag,
    lower_objective,
    multihead_grid,
    transitions,
)
from singlehead.report.verdict import VERDICTS


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("multihead")
    res = reproduce("smoke", out, n_jobs=1, progress=False, only=["multihead"])
    (o,) = res.outputs
    return out, o


def test_every_preset_builds_it_and_it_follows_the_untied_figure():
    names = list(FIGURES)
    assert FIGURES["multihead"].presets == ("quick", "full", "smoke")
    assert names.index("multihead") == names.index("tied_vs_untied") + 1


def test_rows_have_verdicts_finite_numbers_and_declared_tolerances(built):
    out, o = built
    spec = MultiheadSpec.smoke()
    agr = o.agreement
    linear = agr[agr.quantity.str.contains("linear")]
    soft = agr[agr.quantity.str.startswith("seq2lab")]
    assert len(linear) == len(spec.teacher_heads) * len(spec.alphas_sim)
    # two rows at an unspecialised point (test error, mean overlap), three at a specialised one
    per_alpha = soft.groupby("cfg_alpha").quantity.agg(list)
    assert len(per_alpha) == len(spec.softmax_alphas)
    for qs in per_alpha:
        unspec = all("unspecialised point" in q for q in qs)
        assert len(qs) == (2 if unspec else 3), qs
    assert any(n.startswith("Transitions of the softmax part") for n in o.notes)
    assert set(agr.verdict) <= set(VERDICTS)
    assert (agr.tolerance > 0).all() and agr.tol_reason.astype(str).str.len().gt(0).all()
    assert (agr.tol_rel <= 0.10).all()
    for col in ("theory", "simulation", "se", "gap"):
        assert np.all(np.isfinite(agr[col].astype(float))), col
    for ext in ("png", "pdf", "csv"):
        assert (out / "figures" / f"multihead.{ext}").stat().st_size > 0
    for ax in o.figure.axes:
        for line in ax.get_lines():
            xy = np.asarray(line.get_xydata(), dtype=float)
            assert np.all(np.isfinite(xy)), line.get_label()
    assert math.isfinite(o.runtime_s)


def test_linear_rows_carry_the_exact_multihead_theory(built):
    _, o = built
    spec = MultiheadSpec.smoke()
    grid = multihead_grid(spec)
    agr = o.agreement
    for h0, problems in grid["theory"].items():
        for p in problems:
            if p.alpha not in spec.alphas_sim:
                continue
            row = agr[(agr.cfg_teacher_heads == h0) & (agr.cfg_alpha == p.alpha)]
            # the runner's point (warm-started chain) and a cold solve: the same fixed point to the SE tolerance
            assert float(row.theory.iloc[0]) == pytest.approx(theory(p).test_error, rel=1e-5)
    assert {1, 2} <= set(agr.cfg_teacher_heads.dropna().astype(int))


def test_diag_offdiag():
    assert diag_offdiag(np.array([[2.0, 1.0], [0.0, 4.0]])) == (3.0, 0.5)
    d, off = diag_offdiag(np.array([[1.5]]))
    assert d == 1.5 and math.isnan(off)


def test_spec_refuses_one_head_and_mismatched_seeds():
    with pytest.raises(ValueError, match="heads"):
        MultiheadSpec.smoke().replace(heads=1)
    with pytest.raises(ValueError, match="seeds"):
        MultiheadSpec.smoke().replace(seeds=(2,))


def _pt(objective, index=0.0, converged=True, lam=0.5):
    return {
        "objective": objective,
        "objective_se": 1e-4,
        "specialisation": index,
        "converged": converged,
        "lambda": lam,
    }


def test_transitions_interpolate_the_objective_crossing_and_the_eigenvalue_in_their_brackets():
    alphas = [1.0, 1.5, 2.0, 2.5]
    unspec = {1.0: _pt(0.05, lam=0.4), 1.5: _pt(0.055, lam=0.8), 2.0: _pt(0.058, lam=1.2), 2.5: _pt(0.06, lam=1.4)}
    # the specialised branch: gone at 1.0, above the unspecialised point at 1.5, below it from 2.0
    spec = {2.5: _pt(0.059, 0.7), 2.0: _pt(0.0575, 0.6), 1.5: _pt(0.0555, 0.5), 1.0: _pt(0.05, 0.05)}
    tr = transitions(alphas, unspec, spec)
    c, s = tr["crossing"], tr["stability"]
    # difference +0.5e-3 at 1.5, -0.5e-3 at 2.0: zero half-way; error = quoted objective error / slope
    assert c["bracket"] == (1.5, 2.0) and c["value"] == pytest.approx(1.75)
    assert c["error"] == pytest.approx(math.sqrt(2) * 1e-4 / 2e-3)
    # eigenvalue 0.8 at 1.5, 1.2 at 2.0: 1 half-way; no error estimate of its own
    assert s["bracket"] == (1.5, 2.0) and s["value"] == pytest.approx(1.75) and math.isnan(s["error"])


def test_transitions_say_where_the_branch_ends_or_nothing_crosses():
    alphas = [1.0, 2.0, 3.0]
    unspec = {a: _pt(0.05, lam=0.2) for a in alphas}
    # the branch is the lower down to 2.0 and gone at 1.0 (index below BRANCH_INDEX): a first-order end
    spec = {3.0: _pt(0.04, 0.7), 2.0: _pt(0.045, 0.6), 1.0: _pt(0.05, BRANCH_INDEX / 2)}
    tr = transitions(alphas, unspec, spec)
    assert math.isnan(tr["crossing"]["value"]) and tr["crossing"]["bracket"] == (1.0, 2.0)
    assert "ends" in tr["crossing"]["note"]
    assert math.isnan(tr["stability"]["value"]) and "below 1" in tr["stability"]["note"]
    # an unconverged branch point does not count: with none left there is no branch
    tr = transitions(alphas, unspec, {a: _pt(0.04, 0.7, converged=False) for a in alphas})
    assert tr["crossing"]["note"] == "no specialised branch"
    # the branch above the unspecialised point at the top of the grid: the crossing is above the grid
    tr = transitions(alphas, unspec, {a: _pt(0.06, 0.7) for a in alphas})
    assert "above the grid" in tr["crossing"]["note"]
    # below everywhere: below the grid; a branch at the lowest alpha alone, above the unspecialised point: above
    assert transitions(alphas, unspec, {a: _pt(0.04, 0.7) for a in alphas})["crossing"]["note"] == "below the grid"
    tr = transitions(alphas, unspec, {3.0: _pt(0.06, 0.1), 2.0: _pt(0.06, 0.1), 1.0: _pt(0.06, 0.7)})
    assert "above the grid" in tr["crossing"]["note"] and math.isnan(tr["crossing"]["value"])


def test_lower_objective_keeps_the_unspecialised_point_unless_the_branch_is_there_and_lower():
    u = _pt(0.05)
    assert lower_objective(u, None) is u
    assert lower_objective(u, _pt(0.04, 0.7)) == _pt(0.04, 0.7)
    assert lower_objective(u, _pt(0.06, 0.7)) is u
    assert lower_objective(u, _pt(0.04, BRANCH_INDEX / 2)) is u
    assert lower_objective(u, _pt(0.04, 0.7, converged=False)) is u
