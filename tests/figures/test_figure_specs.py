"""Per-figure specs (frozen, validated, three presets) and the grid -> run -> plot -> caption contract."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest

from singlehead.figures.figspec import FigureDef, FigureRun, build, new_figure
from singlehead.figures.reproduce import FIGURES, Preset
from singlehead.figures.spec import FigureSpec


@pytest.mark.parametrize("name", list(FIGURES))
def test_every_figure_has_three_frozen_presets(name):
    cls = FIGURES[name].spec
    quick, full, smoke = cls.quick(), cls.full(), cls.smoke()
    assert quick == cls() and all(isinstance(s, cls) for s in (full, smoke))
    assert quick.key() == cls.quick().key()  # stable: the presets are values
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(quick, dataclasses.fields(quick)[0].name, None)


@pytest.mark.parametrize(
    "figure,field,value,match",
    [
        ("finite_size", "ds", (25, 0, 50, 70, 100), r"FiniteSizeSpec\.ds must hold values valid"),
        ("finite_size", "seeds", (12, 10), r"FiniteSizeSpec\.seeds must have one entry per entry of ds \(5\)"),
        ("finite_size", "alphas", (), r"FiniteSizeSpec\.alphas must not be empty"),
        ("errors_vs_alpha", "seeds", 0, r"ErrorsSpec\.seeds must be an integer >= 1 \(got 0\)"),
        ("errors_vs_alpha", "adam_alphas", (0.1, 0.7), r"ErrorsSpec\.adam_alphas must be a subset of sim_alphas"),
        ("errors_vs_alpha", "fit_rtol", 0.0, r"ErrorsSpec\.fit_rtol must be a real number > 0"),
        ("interpolation_peak", "sim_lams", (1e-3, -1e-5), r"PeakSpec\.sim_lams must hold values valid"),
        ("bayes_vs_erm", "amp_d", 20, r"BayesSpec\.amp_d must be an integer >= 50"),
        ("power_law", "tail_lam", 0.0, r"PowerLawSpec\.tail_lam must be a real number > 0 \(got 0.0\)"),
        ("power_law", "scaling_points", 1, r"PowerLawSpec\.scaling_points must be an integer >= 2"),
        ("learned_spectra", "fs_seeds", (8, 6), r"LearnedSpectraSpec\.fs_seeds must have one entry per entry of fs_ds"),
        ("error_decomposition", "sim_d", -5, r"DecompositionSpec\.sim_d must be an integer >= 1"),
        ("emergence", "seed", -1, r"EmergenceSpec\.seed must be an integer >= 0"),
        ("tuned_lam", "seeds", 1, r"TunedLamSpec\.seeds must be an integer >= 2 \(got 1\)"),
        ("tuned_lam", "theory_span", 0.5, r"TunedLamSpec\.theory_span must be >= lam_steps \* lam_step = 0\.667"),
        ("tuned_lam", "band", 0.2, r"TunedLamSpec\.band must be a real number in \(0, 0\.1\]"),
        ("tuned_lam", "band", 0.0, r"TunedLamSpec\.band must be a real number > 0"),
        (
            "tuned_lam",
            "lam_range",
            (1.0, 0.1),
            r"TunedLamSpec\.lam_range must be a pair \(low, high\) with 0 < low < high",
        ),
        ("tuned_lam", "fit_rtol", -1e-6, r"TunedLamSpec\.fit_rtol must be a real number > 0"),
    ],
)
def test_a_spec_rejects_an_invalid_field_and_names_it(figure, field, value, match):
    spec = FIGURES[figure].spec.quick()
    with pytest.raises(ValueError, match=match):
        spec.replace(**{field: value})
    with pytest.raises(ValueError, match=match):
        type(spec)(**{field: value})


def test_the_loose_stopping_rule_is_quick_only_and_spares_the_small_lam_students():
    # full presets keep the TrainOptions defaults; the peak's lam < 1e-3 students keep them in every preset
    for name in ("errors_vs_alpha", "factorized_vs_direct", "finite_size", "interpolation_peak"):
        assert FIGURES[name].spec.full().fit_rtol is None
        assert FIGURES[name].spec.quick().fit_rtol == 1e-6
    peak = FIGURES["interpolation_peak"].spec.quick()
    assert peak.fit_options(1e-5) == {}
    assert peak.fit_options(1e-3) == {"tol": 1e-6, "polish_rtol": 1e-6}
    # errors vs alpha and the finite-size scan share their d = 100 runs only with the same rule
    assert FIGURES["finite_size"].spec.quick().fit_rtol == FIGURES["errors_vs_alpha"].spec.quick().fit_rtol


def test_factorized_vs_direct_may_skip_the_extrapolation():
    spec = FIGURES["factorized_vs_direct"].spec.quick().replace(fs_ds=(), fs_seeds=())
    assert spec.fs_ds == ()


def test_preset_holds_one_spec_per_figure_and_replaces_one():
    p = Preset.named("smoke")
    assert [n for n, _ in p.specs] == list(FIGURES) and p.device == "cpu"
    small = p.spec("finite_size").replace(alphas=(0.5,))
    q = p.with_spec("finite_size", small)
    assert q.spec("finite_size") is small and p.spec("finite_size").alphas == (0.25, 1.0)
    assert [n for n, _ in q.specs] == [n for n, _ in p.specs]
    with pytest.raises(ValueError, match="figure must be one of"):
        p.spec("nope")
    with pytest.raises(ValueError, match="mode must be one of"):
        Preset.named("huge")


@dataclass(frozen=True)
class _ToySpec(FigureSpec):
    """A toy figure: the mean of ``n`` draws against its known value 0."""

    n: int = 400
    seeds: int = 3


def _toy_grid(spec: _ToySpec) -> dict[str, Any]:
    return {"seeds": list(range(spec.seeds))}


def _toy_run(ctx: Any, spec: _ToySpec, grid: dict[str, Any]) -> FigureRun:
    means = [float(np.random.default_rng(s).standard_normal(spec.n).mean()) for s in grid["seeds"]]
    se = float(np.std(means, ddof=1) / np.sqrt(len(means)))
    m = float(np.mean(means))
    agr = pd.DataFrame(
        [
            {
                "quantity": "mean",
                "theory": 0.0,
                "simulation": m,
                "se": se,
                "gap": abs(m),
                "dof": len(means) - 1,
                "tol_rel": 0.0,
                "tol_abs": 0.2,
                "tol_reason": "toy margin",
                "n_seeds": spec.seeds,
            }
        ]
    )
    return FigureRun(pd.DataFrame({"seed": grid["seeds"], "mean": means}), agr, {"n": spec.n}, {"means": means})


def _toy_plot(spec: _ToySpec, grid: dict[str, Any], res: FigureRun):
    fig, ax = new_figure(1, 1, figsize=(3, 2))
    ax.plot(grid["seeds"], res.data["means"], "o")
    return fig


def _toy_caption(spec: _ToySpec, grid: dict[str, Any], res: FigureRun) -> str:
    return f"Mean of {spec.n} draws, {len(res.data['means'])} seeds."


def test_a_new_figure_is_a_spec_and_four_functions():
    toy = FigureDef("toy", "Toy", _ToySpec, _toy_grid, _toy_run, _toy_plot, _toy_caption)
    out = build(toy, ctx=None, spec=_ToySpec(seeds=4))
    assert out.name == "toy" and out.caption == "Mean of 400 draws, 4 seeds." and len(out.table) == 4
    # mean of 1600 normal draws (s.e. 0.025) within 0.2 of 0, shown by the equivalence test
    assert set(out.agreement.verdict) == {"agrees"} and "p_equiv_holm" in out.agreement and out.runtime_s >= 0
    with pytest.raises(ValueError, match="spec of figure 'toy' must be a _ToySpec"):
        build(toy, None, FIGURES["finite_size"].spec.quick())
