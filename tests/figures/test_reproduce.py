"""Smoke reproduction (< 3 minutes): every figure, the report, finite plotted numbers, a real browser render."""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import numpy as np
import pytest

from singlehead.figures.reproduce import FIGURES, Preset, reproduce
from singlehead.report.verdict import EXPLAINED, VERDICTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return out, reproduce("smoke", out, n_jobs=2, progress=False)


def _plotted_arrays(fig):
    for ax in fig.axes:
        for line in ax.get_lines():
            xy = np.asarray(line.get_xydata(), dtype=float)
            if xy.size:
                yield f"{ax.get_title()}: line {line.get_label()}", xy
        for coll in ax.collections:
            off = np.asarray(coll.get_offsets(), dtype=float)
            if off.size:
                yield f"{ax.get_title()}: collection", off
        for patch in ax.patches:
            yield f"{ax.get_title()}: patch", np.asarray([patch.get_height() if hasattr(patch, "get_height") else 0.0])


def test_report_and_figure_files_exist(smoke):
    out, res = smoke
    assert res.report.exists() and 50_000 < res.report.stat().st_size <= 1_000_000
    html = res.report.read_text()
    assert len(re.findall(r"<img [^>]*src='data:image/(webp|png);base64,", html)) == len(FIGURES)
    for name in FIGURES:
        for ext in ("png", "pdf", "csv"):
            assert (out / "figures" / f"{name}.{ext}").stat().st_size > 0
    assert {o.name for o in res.outputs} == set(FIGURES)


def test_every_plotted_number_is_finite(smoke):
    _, res = smoke
    for o in res.outputs:
        n_arrays = 0
        for where, arr in _plotted_arrays(o.figure):
            n_arrays += 1
            # vertical marker lines (axvline) use axes coordinates in y, still finite numbers
            assert np.all(np.isfinite(arr)), f"{o.name} / {where} has non-finite values"
        assert n_arrays > 0, o.name


def test_agreement_tables_are_complete(smoke):
    _, res = smoke
    for o in res.outputs:
        assert o.agreement is not None and len(o.agreement) > 0, o.name
        for col in (
            "quantity",
            "theory",
            "simulation",
            "gap",
            "tol_rel",
            "tol_abs",
            "tol_reason",
            "tolerance",
            "p_diff",
            "p_diff_holm",
            "p_equiv",
            "p_equiv_holm",
            "verdict",
        ):
            assert col in o.agreement.columns, (o.name, col)
        assert set(o.agreement.verdict) <= set(VERDICTS), o.name
        assert o.agreement.tol_reason.astype(str).str.len().gt(0).all(), o.name
        assert (o.agreement.tolerance > 0).all(), o.name
        th = o.agreement["theory"].astype(float)
        # a distance (KS) has no theory value: such a row is a tolerance check of the distance itself
        distance = o.agreement.quantity.astype(str).str.contains("distance") & o.agreement.se.isna()
        assert np.all(np.isfinite(th[~distance])) and th[distance].isna().all(), o.name
        assert math.isfinite(o.runtime_s)
        # the rule's promise: a row more than 10 % and 0.005 away from its theory value never agrees
        gap = (o.agreement.simulation.astype(float) - th).abs()
        far = (gap > 0.10 * th.abs()) & (gap > 0.005)
        assert not (far & (o.agreement.verdict == "agrees")).any(), (o.name, o.agreement[far])


def test_rerun_hits_the_cache(smoke):
    out, res = smoke
    again = reproduce("smoke", out, n_jobs=1, progress=False, only=["errors_vs_alpha"])
    assert again.runtime_s < 0.5 * next(o.runtime_s for o in res.outputs if o.name == "errors_vs_alpha") + 5


def test_quick_scale_is_stated():
    sc = Preset.named("quick").spec("errors_vs_alpha")
    assert sc.d >= 40 and sc.seeds >= 2
    with pytest.raises(ValueError, match="mode"):
        Preset.named("huge")


@pytest.mark.parametrize("args,name", [(["--jobs", "0"], "jobs"), (["--figure", "nope"], "figure")])
def test_reproduce_cli_validation(args, name, usage_error):
    usage_error(["reproduce", *args], name)


def _render_module():
    spec = importlib.util.spec_from_file_location("render_report", ROOT / "tests" / "render_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if mod.find_browser() is None:
        pytest.skip("no Chromium on this machine (.ci/run installs it)")
    return mod


@pytest.mark.parametrize("width", [1280, 390])
def test_report_renders_in_headless_browser(smoke, tmp_path, width):
    """The smoke report in headless Chromium at a desktop and a phone width: a non-blank screenshot, no
    horizontal scroll of the page body, every figure loaded and inside the viewport's width, and the
    contents still on screen after scrolling to the end."""
    from singlehead.report.write import write_report

    mod = _render_module()
    # written again from the smoke outputs: a cached rerun of this module rewrites the shared report with one figure
    report = write_report(
        smoke[1].outputs,
        tmp_path / "report.html",
        title="smoke",
        mode="smoke",
        total_runtime_s=smoke[1].runtime_s,
        environment={},
    )
    png = mod.screenshot(report, tmp_path / f"shot{width}.png", width=width, height=2000)
    ok, frac = mod.is_rendered(png)
    assert ok, f"blank screenshot ({frac:.1%} non-white pixels)"
    probe = mod.layout_probe(report, width)
    assert probe["innerWidth"] == width
    assert len(probe["images"]) == len(FIGURES)
    assert mod.layout_problems(probe) == []


def test_layout_probe_sees_a_page_wider_than_the_viewport(tmp_path):
    """The probe can fail: a 2000 px block widens the body; a broken image does not load."""
    mod = _render_module()
    page = tmp_path / "wide.html"
    page.write_text(
        "<!doctype html><html><head><meta name='viewport' content='width=device-width'></head><body>"
        "<nav>contents</nav><div style='width:2000px;height:3000px'>wide</div>"
        "<img src='data:image/png;base64,AAAA'></body></html>"
    )
    bad = mod.layout_problems(mod.layout_probe(page, 390))
    assert any("horizontal scroll" in b for b in bad) and any("not loaded" in b for b in bad)
    assert any("contents not on screen" in b for b in bad)  # the nav scrolls away: it is not sticky


def test_report_table_is_compact_and_marks_explained_rows(tmp_path):
    """At most 8 columns per figure table; an explained row has its own class and the diagnostic's value;
    long notes sit in a collapsed details element; the rule and the summary come before the figures; the
    summary gives the four counts and lists each inconclusive row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from singlehead.report.verdict import judge
    from singlehead.report.write import FigureOutput, write_report

    agr = judge(
        pd.DataFrame(
            {
                "cfg_lam": [1e-5, 1e-5],
                "cfg_alpha": [0.2, 0.3],
                "quantity": ["test_error", "test_error"],
                "theory": [0.40, 0.26],
                "simulation": [0.40, 0.23],
                "se": [0.01, 0.002],
                "gap": [0.0, 0.03],
                "dof": [3, 3],
                "tol_rel": [0.03, 0.03],
                "tol_abs": [0.005, 0.005],
                "n_seeds": [4, 4],
                "note": ["a long note " * 30, ""],
                "diagnostic": [
                    "replicon 0.80, prox jumps 2.0 ± 0.3 %",
                    "RS fails (jumps > 3 %): prox jumps 5.6 ± 0.3 %",
                ],
                "diagnostic_fails": [False, True],
            }
        )
    )
    out = FigureOutput(
        "peak",
        "Peak",
        "caption",
        {"lam": 1e-5},
        plt.figure(figsize=(12, 3)),
        pd.DataFrame(),
        agr,
        diagnostics=["lam = 1e-05: the RS diagnostic fails for alpha in 0.195-0.371"],
    )
    html = write_report(
        [out], tmp_path / "r.html", title="t", mode="smoke", total_runtime_s=1.0, environment={}
    ).read_text()
    fig_part = html[html.index("<h2 id='peak'>") :]
    first_table = fig_part[fig_part.index("<table>") : fig_part.index("</table>")]
    assert first_table.split("</tr>")[0].count("<th") <= 8
    assert "<tr class='explained'>" in first_table and "prox jumps 5.6" in first_table
    assert "<tr class='inconclusive'>" in first_table  # 0 ± 0.01 (t, 3 dof) is not within 0.012
    assert fig_part.index("<details class='more'>") < fig_part.index("a long note")
    assert html.index("id='summary'") < html.index("id='rule'") < html.index("<h2 id='peak'>")
    assert "0 of 2 checks agree</b>" in html and "1 deviate, explained" in html and "1 inconclusive" in html
    summary = html[html.index("id='summary'") : html.index("id='rule'")]
    assert "lam=1e-05, alpha=0.2 · test_error" in summary  # the inconclusive row, listed
    holds = html[html.index("<h2 id='holds'>") : html.index("<h2 id='peak'>")]
    assert "fails at 1 of 2 compared points" in holds and "1 deviating rows are explained" in holds
    assert "alpha in 0.195-0.371" in holds


def test_finite_size_figure_and_extrapolated_spectrum_rows(smoke):
    _, res = smoke
    sc = Preset.named("smoke").spec("finite_size")
    out = {o.name: o for o in res.outputs}
    fs = out["finite_size"].agreement
    assert sorted(fs.cfg_alpha) == sorted(sc.alphas)
    assert (fs.quantity.str.contains("extrapolated")).all() and (fs.n_seeds == sum(sc.seeds)).all()
    for r in fs.itertuples():
        assert r.ci_low <= r.simulation <= r.ci_high  # d = inf value and its CI (theory + gap)
        assert (r.p_zero >= 0.05) == (r.ci_low <= r.theory <= r.ci_high)  # the normal law of the CI
        assert r.ci_half == pytest.approx(r.ci_high - r.simulation)
        assert r.tolerance == pytest.approx(max(0.03 * abs(r.theory), 0.005))
    assert "dof" not in fs  # an extrapolated gap: the normal law
    fits = out["finite_size"].table.query("kind == 'fit'")
    assert len(fits) == len(sc.alphas) * len(sc.ds)
    sp = out["learned_spectra"].agreement
    ext = sp[sp.quantity.str.contains("at d = inf, extrapolated")]
    assert len(ext) == 3 and (ext.cfg_alpha == 40.0).all()
    assert not ((sp.cfg_alpha == 40.0) & sp.quantity.str.startswith("zero-atom mass (d =")).any()


def test_tuned_lam_figure_smoke(tmp_path):
    """The tuned_lam figure alone at its smoke preset: three checks per alpha with verdicts. The ERM grid is
    lam* 10^(k step); each seed's pick is validation_pick of its own curve; the picked-lam row compares the mean
    log10 pick with log10 lam* within the valley half-width of the figure's theory curve (no relative part); the
    error rows compare with err* at 3 %, floor 0.005."""
    from singlehead.analysis import validation_pick, valley_halfwidth

    sc = Preset.named("smoke").spec("tuned_lam")
    (o,) = reproduce("smoke", tmp_path, n_jobs=1, progress=False, only=["tuned_lam"]).outputs
    agr, tab = o.agreement, o.table
    assert len(agr) == 3 * len(sc.alphas) and set(agr.verdict) <= set(VERDICTS)
    assert agr.theory_converged.all() and (agr.tolerance > 0).all()
    for a in sc.alphas:
        rows = agr[agr.cfg_alpha == a].set_index("quantity")
        assert list(rows.index) == [
            "test_error at lam*",
            "log10 lam picked by validation",
            "test_error at the validated lam",
        ]
        curve = tab[(tab.kind == "theory") & (tab.cfg_alpha == a)]
        lam_star, err_star = float(curve.lam_star.iloc[0]), float(curve.err_star.iloc[0])
        assert curve.test_error.min() == pytest.approx(err_star, rel=1e-4)  # the curve's minimum is the tuned one
        grid = tab[(tab.kind == "simulation (lam grid)") & (tab.cfg_alpha == a)]
        ks = np.log10(np.sort(grid.cfg_lam.unique()) / lam_star) / sc.lam_step
        np.testing.assert_allclose(ks, np.arange(-sc.lam_steps, sc.lam_steps + 1), atol=1e-5)
        picks = tab[(tab.kind == "validation pick") & (tab.cfg_alpha == a)]
        assert sorted(picks.seed) == list(range(sc.seeds))
        for p in picks.itertuples():
            g = grid[grid.seed == p.seed]
            assert p.lam_pick == pytest.approx(validation_pick(g.cfg_lam, g.test_error), rel=1e-5)
        h = valley_halfwidth(curve.cfg_lam, curve.test_error, lam_star, err_star, sc.band)
        lr = rows.loc["log10 lam picked by validation"]
        assert lr.tol_rel == 0 and lr.tolerance == pytest.approx(h) and f"{h:.3f}" in lr.tol_reason
        assert lr.theory == pytest.approx(math.log10(lam_star))
        assert lr.simulation == pytest.approx(np.log10(picks.lam_pick).mean())
        assert lr.se == pytest.approx(np.log10(picks.lam_pick).std(ddof=1) / math.sqrt(sc.seeds))
        for q in ("test_error at lam*", "test_error at the validated lam"):
            assert rows.loc[q, "theory"] == pytest.approx(err_star)
            assert rows.loc[q, "tolerance"] == pytest.approx(max(0.03 * err_star, 0.005))
            assert rows.loc[q, "n_seeds"] == sc.seeds and rows.loc[q, "dof"] == sc.seeds - 1
        assert rows.loc["test_error at the validated lam", "simulation"] == pytest.approx(picks.test_error.mean())
        at_star = grid[np.isclose(grid.cfg_lam, np.sort(grid.cfg_lam.unique())[sc.lam_steps])]
        assert rows.loc["test_error at lam*", "simulation"] == pytest.approx(at_star.test_error.mean())


def test_agreement_spread_from_more_seeds_replaces_a_small_sample_spread():
    import numpy as np
    import pandas as pd

    from singlehead.report.compare import agreement

    few = pd.DataFrame({"cfg_alpha": [1.0] * 3, "test_error": [0.100, 0.101, 0.102]})
    many = pd.DataFrame({"cfg_alpha": [1.0] * 8, "test_error": [0.09, 0.11, 0.10, 0.12, 0.08, 0.10, 0.095, 0.105]})
    theory = pd.DataFrame({"cfg_alpha": [1.0], "test_error": [0.110]})
    own = agreement(few, theory, ["cfg_alpha"], ["test_error"]).iloc[0]
    pooled = agreement(few, theory, ["cfg_alpha"], ["test_error"], spread_from=many).iloc[0]
    assert own.se == pytest.approx(0.001 / np.sqrt(3))
    assert pooled.se == pytest.approx(np.std(many.test_error, ddof=1) / np.sqrt(3))
    assert pooled.simulation == own.simulation == pytest.approx(0.101)
    assert not own.within and pooled.within  # the 3-seed spread (2 dof) is 11x too small here


def test_agreement_declares_its_tolerance_and_the_seed_count():
    """Theory 0.2, 4 seeds: the tolerance is max(3 % x 0.2, 0.005) = 0.006 (0.005 at theory 0.1: the floor);
    judged, both p-values use Student's t with 3 dof and that tolerance."""
    import pandas as pd
    from scipy import stats

    from singlehead.report.compare import agreement
    from singlehead.report.verdict import judge

    sim = pd.DataFrame(
        {"cfg_alpha": [1.0] * 4 + [2.0] * 4, "test_error": [0.200, 0.204, 0.208, 0.212, 0.100, 0.101, 0.102, 0.103]}
    )
    theory = pd.DataFrame({"cfg_alpha": [1.0, 2.0], "test_error": [0.200, 0.100]})
    agr = agreement(sim, theory, ["cfg_alpha"], ["test_error"], reason="finite size")
    r = agr.iloc[0]
    assert (r.tol_rel, r.tol_abs, r.tol_reason, r.dof) == (0.03, 0.005, "finite size", 3)
    assert r.tolerance == pytest.approx(0.006) and agr.tolerance[1] == pytest.approx(0.005)
    j = judge(agr).iloc[0]
    g, se, tol = r.gap, r.se, 0.006
    assert j.p_diff == pytest.approx(stats.t(3).sf((g - tol) / se) + stats.t(3).sf((g + tol) / se))
    assert j.p_equiv == pytest.approx(stats.t(3).sf((tol - g) / se))
    floors = agreement(sim, theory, ["cfg_alpha"], ["test_error"], tol_abs={"test_error": 0.01})
    assert floors.tolerance.tolist() == pytest.approx([0.01, 0.01])


def test_agreement_joins_the_theorys_own_standard_error_in_quadrature():
    import math

    import pandas as pd

    from singlehead.report.compare import agreement

    sim = pd.DataFrame(
        {"cfg_alpha": [1.0] * 4 + [2.0] * 4, "test_error": [0.200, 0.204, 0.208, 0.212, 0.100, 0.101, 0.102, 0.103]}
    )
    theory = pd.DataFrame(
        {"cfg_alpha": [1.0, 2.0], "test_error": [0.190, 0.100], "test_error_own": [0.005, float("nan")]}
    )
    seeds = agreement(sim, theory, ["cfg_alpha"], ["test_error"]).set_index("cfg_alpha")
    both = agreement(sim, theory, ["cfg_alpha"], ["test_error"], theory_se={"test_error": "test_error_own"}).set_index(
        "cfg_alpha"
    )
    assert both.loc[1.0, "se"] == pytest.approx(math.hypot(seeds.loc[1.0, "se"], 0.005))
    assert both.loc[2.0, "se"] == seeds.loc[2.0, "se"]  # no own error (nan): the seeds' alone
    # the fixed-level check uses the joined error: gap 0.016 > 2 x 0.0026 + 0.0057, but < 2 x 0.0056 + 0.0057
    assert not seeds.loc[1.0, "within"] and both.loc[1.0, "within"]


def test_agreement_refuses_an_unconverged_theory_point():
    import pandas as pd

    from singlehead.report.compare import agreement

    sim = pd.DataFrame({"cfg_alpha": [1.0, 1.0, 2.0, 2.0], "test_error": [0.10, 0.10, 0.05, 0.05]})
    theory = pd.DataFrame({"cfg_alpha": [1.0, 2.0], "test_error": [0.10, 0.05], "converged": [True, False]})
    a = agreement(sim, theory, ["cfg_alpha"], ["test_error"]).set_index("cfg_alpha")
    assert a.loc[1.0, "within"] and a.loc[1.0, "theory_converged"]
    assert not a.loc[2.0, "within"] and not a.loc[2.0, "theory_converged"]  # equal values, but no fixed point


def test_report_states_the_reference_workload_beside_its_runtimes(smoke):
    _, res = smoke
    assert len(res.reference_s) == 2 and all(0 < r < 60 for r in res.reference_s)
    assert len(res.reference_f32_s) == 2 and all(0 < r < 60 for r in res.reference_f32_s)
    html = res.report.read_text()
    assert "reference workload (5 x 1000^3 float64 matmul) at start / end" in html
    # the values, not those of ``res``: a later test of this module rewrites the shared report (a rerun, cached)
    assert re.search(
        r"float32 reference workload \(5 x 1000\^3 float32 torch matmul.{0,40} at start / end "
        r"\d+\.\d{3} s / \d+\.\d{3} s",
        html,
    )


def test_summary_names_what_each_figure_checks(smoke, tmp_path):
    """Theory-simulation figures say so beside their count; a figure of other checks (the pretrained-network
    inspection, when its package is installed) names its own kind instead of passing as theory vs simulation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from singlehead.report.write import FigureOutput, write_report

    _, res = smoke
    for o in res.outputs:
        if o.agreement is not None and len(o.agreement):
            assert ("a pretrained network measured" if o.name == "inspect_minilm" else "theory-simulation") in o.checks
    from singlehead.report.verdict import judge

    agr = judge(
        pd.DataFrame(
            {
                "quantity": ["x"],
                "theory": [1.0],
                "simulation": [1.0],
                "se": [0.01],
                "gap": [0.0],
                "tol_rel": [0.05],
                "tol_abs": [0.005],
            }
        )
    )
    outs = [
        FigureOutput(name, name, "caption", {}, plt.figure(), pd.DataFrame(), agr, **kw)
        for name, kw in (("sim", {}), ("net", {"checks": "layers measured on a network"}))
    ]
    html = write_report(
        outs, tmp_path / "r.html", title="t", mode="smoke", total_runtime_s=1.0, environment={}
    ).read_text()
    start = html.index("<h2 id='summary'>Summary</h2>")
    summary = html[start : html.index("</table>", start)]
    assert "0 inconclusive</span> of 1<br><small>theory-simulation checks" in summary
    assert "0 inconclusive</span> of 1<br><small>layers measured on a network" in summary
    assert "2 of 2 checks agree" in summary


def test_peak_rows_carry_the_replica_symmetry_check(smoke):
    """Every compared point of the interpolation-peak figure states its smooth replicon (a positive
    number, below 1 on these convergent points), its prox-jump share (a percentage) and the diagnostic's
    verdict under the declared criterion; the notes state the criterion and the caption is computed
    from the run (no fixed text about points the run did not make)."""
    from singlehead.figures.rs_diagnostic import JUMP_SHARE_LIMIT, REPLICON_LIMIT

    _, res = smoke
    o = next(o for o in res.outputs if o.name == "interpolation_peak")
    rep = o.agreement["replicon"].astype(float)
    jump = o.agreement["prox_jump_%"].astype(float)
    assert np.all(np.isfinite(rep)) and np.all((rep > 0) & (rep < 1)), rep.tolist()
    assert np.all(np.isfinite(jump)) and np.all((jump > -5) & (jump < 50)), jump.tolist()
    fails = (rep >= REPLICON_LIMIT) | (jump > 100 * JUMP_SHARE_LIMIT + 0.05)  # the table rounds to 0.1 %
    assert (o.agreement["diagnostic_fails"].astype(bool) >= fails).all()
    assert (o.agreement.verdict != EXPLAINED).all() or o.agreement.diagnostic_fails.any()
    assert any("de Almeida-Thouless" in n and "3 %" in n for n in o.notes)
    sc = Preset.named("smoke").spec("interpolation_peak")
    assert all(f"lam = {lam:g}: the RS diagnostic" in o.caption for lam in sc.sim_lams)
    assert len(o.diagnostics) == len(sc.sim_lams) and all(t in o.caption for t in o.diagnostics)
    assert "peak_finite_size" not in " ".join(o.notes) + o.caption


def test_seed_plan_is_stated_and_within_its_budget(smoke, tmp_path):
    """The peak figure declares a seed plan (smoke: at most 4 seeds per point, 4 added runs): the runs it added stay
    within the budget, every row states its declared and added seeds, the rows that got seeds are exactly those
    with ``seeds_added > 0``, and the report and the figure's parameters state the plan."""
    _, res = smoke
    o = next(o for o in res.outputs if o.name == "interpolation_peak")
    sc = Preset.named("smoke").spec("interpolation_peak")
    rep = o.seeds
    assert rep.plan.max_seeds == sc.max_seeds == 4 and rep.plan.budget == sc.seed_budget == 4
    assert 0 <= rep.spent <= rep.plan.budget and rep.first["n"] == len(o.agreement)
    agr = o.agreement
    assert (agr.seeds_declared == sc.seeds).all() and (agr.seeds_added >= 0).all()
    assert (agr.seeds_declared + agr.seeds_added <= sc.max_seeds).all()
    assert len(rep.rows) == len(agr[agr.seeds_added > 0].drop_duplicates(["cfg_lam", "cfg_alpha"]))
    assert "seed plan" in o.params
    from singlehead.report.write import write_report

    # a page of its own: a later test of this module rewrites the shared report
    html = write_report(
        res.outputs, tmp_path / "r.html", title="t", mode="smoke", total_runtime_s=1.0, environment={}
    ).read_text()
    assert "<th>seeds added</th>" in html and f"of {rep.plan.budget} runs added" in html
    assert f"+{rep.spent} of {rep.plan.budget}" in html
    for o2 in res.outputs:  # a figure without a plan adds nothing
        if o2.seeds is not None and not o2.seeds.plan.active:
            assert o2.seeds.spent == 0 and (
                o2.agreement is None or "seeds_added" not in o2.agreement or (o2.agreement.seeds_added == 0).all()
            )


def test_failing_ranges_and_the_declared_criterion():
    from singlehead.figures.rs_diagnostic import RSPoint, failing_ranges

    a = np.array([0.1, 0.2, 0.4, 0.8, 1.6])
    np.testing.assert_allclose(
        failing_ranges(a, [False, True, True, False, True]), [(np.sqrt(0.02), np.sqrt(0.32)), (np.sqrt(1.28), 1.6)]
    )
    assert failing_ranges(a, [False] * 5) == []
    assert RSPoint(0.9, 0.056, 0.003).fails and RSPoint(1.0, 0.0, 0.001).fails
    assert not RSPoint(0.9, 0.029, 0.003).fails
    assert "jumps > 3 %" in RSPoint(0.9, 0.056, 0.003).describe()


def test_a_figure_left_out_of_a_preset_is_skipped_and_named(tmp_path, monkeypatch):
    """A figure whose ``presets`` leave a mode out is not built by that mode, even when asked for by name; the
    reproduction lists it as skipped and the report's environment table says which presets build it."""
    import dataclasses

    from singlehead.figures.figspec import FigureDef

    fd = FIGURES["emergence"]
    monkeypatch.setitem(FIGURES, "emergence", dataclasses.replace(fd, presets=("full",)))
    res = reproduce("smoke", tmp_path, n_jobs=1, progress=False, only=["emergence"])
    assert res.outputs == [] and res.skipped == ["emergence"]
    assert "emergence (full only)" in (tmp_path / "report.html").read_text()
    with pytest.raises(ValueError, match="presets must be a non-empty subset"):
        dataclasses.replace(fd, presets=("fast",))
    with pytest.raises(ValueError, match="presets"):
        FigureDef(**{**{f.name: getattr(fd, f.name) for f in dataclasses.fields(fd)}, "presets": ()})


def test_figures_built_two_at_a_time_give_the_sequential_numbers(smoke, tmp_path):
    """With local workers two figures are built at once on one pool (FIGURES_AT_A_TIME); every run is keyed and
    seeded and chains stay within a figure's stage, so the figures' tables equal a one-process build's. Each
    figure counts the seconds of the runs it started."""
    import pandas as pd

    from singlehead.figures.reproduce import FIGURES_AT_A_TIME

    assert FIGURES_AT_A_TIME == 2
    names = ["finite_size", "emergence"]
    seq = reproduce("smoke", tmp_path, n_jobs=1, progress=False, only=names)
    par = {o.name: o for o in smoke[1].outputs}
    for o in seq.outputs:
        cols = [c for c in ("theory", "simulation", "se", "verdict") if c in o.agreement]
        pd.testing.assert_frame_equal(
            o.agreement[cols].reset_index(drop=True),
            par[o.name].agreement[cols].reset_index(drop=True),
            check_exact=False,
            rtol=1e-9,
        )
        assert par[o.name].compute_s > 0 or o.name == "emergence"  # emergence runs in-process, not as a job


def test_long_sequences_figure_smoke(tmp_path):
    """The long_sequences figure alone at its smoke preset: per simulated T a test-error row and a rank-fraction
    row at d = inf with verdicts and a declared tolerance, the test error's s.e. including the SE's quadrature
    error; finite plotted numbers; thresholds const/c_T; the quick preset skips the figure."""
    sc = Preset.named("smoke").spec("long_sequences")
    res = reproduce("smoke", tmp_path, n_jobs=1, progress=False, only=["long_sequences"])
    (o,) = res.outputs
    agr, tab = o.agreement, o.table
    assert len(agr) == 2 * len(sc.lengths_sim) and set(agr.verdict) <= set(VERDICTS)
    assert sorted(agr.cfg_T) == sorted(2 * list(sc.lengths_sim))
    assert agr.tol_reason.astype(str).str.len().gt(0).all() and agr.theory_converged.all()
    te = agr[agr.quantity.str.startswith("test error")]
    rk = agr[agr.quantity.str.startswith("rank fraction")]
    assert len(te) == len(rk) == len(sc.lengths_sim)
    assert np.allclose(te.tolerance, np.maximum(0.03 * te.theory.abs(), 0.005))
    assert np.allclose(rk.tolerance, np.maximum(0.03 * rk.theory.abs(), 0.01))
    th = tab[tab.kind == "theory"].set_index("cfg_T")
    for r in te.itertuples():
        qse = th.loc[r.cfg_T, "test_error_quadrature_se"]
        assert qse > 0 and r.se >= qse  # the quadrature error is inside the error bar
        assert r.theory == pytest.approx(th.loc[r.cfg_T, "test_error"])
    assert (agr.n_seeds == sum(sc.seeds)).all()
    sim = tab[tab.kind == "simulation"]
    assert sorted(sim.cfg_d.unique()) == sorted(sc.ds) and len(sim) == len(sc.lengths_sim) * sum(sc.seeds)
    thr = tab[tab.kind == "thresholds"]
    assert np.allclose(thr.alpha_interp * thr.c_T, (thr.alpha_interp * thr.c_T).iloc[0], rtol=1e-9)
    assert np.allclose(thr.alpha_perf * thr.c_T, (thr.alpha_perf * thr.c_T).iloc[0], rtol=1e-9)
    n_arrays = 0
    for where, arr in _plotted_arrays(o.figure):
        n_arrays += 1
        assert np.all(np.isfinite(arr)), where
    assert n_arrays > 0
    quick = reproduce("quick", tmp_path / "quick", n_jobs=1, progress=False, only=["long_sequences"])
    assert quick.outputs == [] and quick.skipped == ["long_sequences"]
