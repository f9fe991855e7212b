"""The ``multihead`` report figure at its smoke size: rows with verdicts and declared tolerances, finite numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from singlehead import theory
# reproduce first: it registers the figures in the report's order
from singlehead.figures.reproduce import FIGURES, reproduce  # noqa: I001
from singlehead.figures.multihead import MultiheadSpec, diag_offdiag, multihead_grid
from singlehead.report.verdict import VERDICTS


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("multihead")
    res = reproduce("smoke", out, n_jobs=1, progress=False, only=["multihead"])
    (o,) = res.outputs
    return out, o


def test_the_quick_preset_leaves_it_out_and_it_follows_the_untied_figure():
    names = list(FIGURES)
    assert FIGURES["multihead"].presets == ("full", "smoke")
    assert names.index("multihead") == names.index("tied_vs_untied") + 1


def test_rows_have_verdicts_finite_numbers_and_declared_tolerances(built):
    out, o = built
    spec = MultiheadSpec.smoke()
    agr = o.agreement
    linear = agr[agr.quantity.str.contains("linear")]
    soft = agr[agr.quantity.str.startswith("seq2lab")]
    assert len(linear) == len(spec.teacher_heads) * len(spec.alphas_sim)
    assert len(soft) == 3 * len(spec.softmax_alphas)
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
