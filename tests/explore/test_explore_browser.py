"""``singlehead explore`` in a real browser: Debian's headless Chromium driven by playwright.

No browser is downloaded: the tests use the system Chromium (``$SINGLEHEAD_CHROMIUM``, else
``chromium`` on the PATH, as ``.ci/run`` installs it) and skip, saying why, when it or the
``playwright`` package is missing. Screenshots go to ``runs/`` (git-ignored).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("SINGLEHEAD_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("no system Chromium (apt-get install chromium, or set SINGLEHEAD_CHROMIUM)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")
pytest.importorskip("starlette", reason="explore needs the 'explore' extra (starlette, uvicorn, plotly)")

from singlehead import Problem, interpolation_threshold, theory  # noqa: E402

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# T = 2 quick problem on three alpha points: one view costs a few seconds
VIEW = "?n_alpha=3&alpha_min=0.1&alpha_max=1&alpha_at=0.3&lam=0.02"
DONE = "window.__explorer && window.__explorer.status === 'done'"
URL_RE = re.compile(r"https?://[^\s\"'`)<>]+")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``singlehead explore --no-browser`` on a free port, its cache in a temporary directory."""
    port = _free_port()
    cache = tmp_path_factory.mktemp("explore-cache")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "singlehead", "explore", "--port", str(port), "--no-browser", "--cache-dir", str(cache)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    for _ in range(300):
        try:
            urllib.request.urlopen(url, timeout=1).read()
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"explore exited: {proc.stdout.read().decode()}")
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser():
    """One browser context for the module: its HTTP cache keeps the 4.8 MB plotly bundle across pages."""
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b.new_context(viewport={"width": 1280, "height": 900})
        b.close()


@pytest.fixture
def page(browser, server):
    """A page on the small view; records every request it makes and every script error."""
    pg = browser.new_page()
    pg.requests, pg.errors = [], []
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.goto(server + VIEW)
    pg.wait_for_function(DONE, timeout=60_000)
    yield pg
    assert pg.errors == []
    pg.close()


def _data(pg) -> dict:
    return pg.evaluate("window.__explorer.data")


def _set(pg, **controls) -> None:
    """Type new control values; the page recomputes after its debounce."""
    for name, value in controls.items():
        pg.fill(f"[name={name}]", str(value))
    pg.dispatch_event(f"[name={name}]", "change")


def test_changed_lam_and_alpha_range_are_drawn_as_theory(page, capsys):
    from singlehead.cli import main

    _set(page, lam="0.05", alpha_max="2")
    page.wait_for_function(DONE + " && window.__explorer.data.view.problem.lam === 0.05", timeout=60_000)
    d = _data(page)
    assert d["view"]["alpha_max"] == 2 and len(d["points"]) == 3
    problem = Problem.from_dict(d["view"]["problem"])
    assert problem.lam == 0.05 and problem.T == 2
    for p in d["points"]:  # read from the page's data, checked against the library
        r = theory(problem.replace(alpha=p["alpha"]))
        assert p["test_error"] == pytest.approx(r.test_error, abs=1e-6)
        assert p["train_error"] == pytest.approx(r.train_error, abs=1e-6)
    assert d["thresholds"]["alpha_interp"] == pytest.approx(interpolation_threshold(problem), rel=1e-12)
    drawn = page.evaluate("document.getElementById('plot-errors').data.find(t => t.name === 'test error')")
    assert drawn["x"] == [p["alpha"] for p in d["points"]] and drawn["y"] == [p["test_error"] for p in d["points"]]
    assert d["spectrum"]["zero_atom"] >= 0 and sum(d["decomposition"]["parts"].values()) > 0
    assert "lam=0.05" in page.url  # the address links this view
    # "Copy as CLI" gives the command that prints this curve
    page.click("#copy-cli")
    argv = shlex.split(page.evaluate("window.__explorer.copied"))
    assert argv[:2] == ["singlehead", "theory"] and argv[argv.index("--lam") + 1] == "0.05"
    capsys.readouterr()
    main(argv[1:])
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert [o["test_error"] for o in out] == pytest.approx([p["test_error"] for p in d["points"]], abs=1e-6)
    page.click("#copy-python")
    assert page.evaluate("window.__explorer.copied").startswith("import numpy as np")


def test_a_bad_value_shows_the_library_message_and_keeps_the_plot(page):
    before = _data(page)["points"]
    _set(page, lam="-1")
    page.wait_for_function("window.__explorer.status === 'invalid'", timeout=30_000)
    with pytest.raises(ValueError) as exc:
        Problem(lam=-1.0)
    assert page.inner_text(".err[data-err=lam]") == str(exc.value) == "lam must be >= 0 (got -1.0)"
    assert _data(page)["points"] == before  # never a blank plot
    assert len(page.evaluate("document.getElementById('plot-errors').data")[0]["x"]) == 3


def test_a_simulation_file_is_drawn_with_error_bars(page, tmp_path):
    from singlehead.cli import main
    from singlehead.report.compare import records_to_frame

    jsonl = tmp_path / "runs.jsonl"
    main(
        [
            "simulate",
            "--T",
            "2",
            "--d",
            "12",
            "--alpha",
            "0.2,0.5",
            "--seeds",
            "3",
            "--noise",
            "0.5",
            "--lam",
            "0.02",
            "--n-test",
            "100",
            "--out",
            str(jsonl),
        ]
    )
    records = [json.loads(x) for x in jsonl.read_text().splitlines()]
    csv = tmp_path / "errors_vs_alpha.csv"  # the tidy table `reproduce` writes per figure
    records_to_frame(records).assign(kind="simulation_lbfgs").to_csv(csv, index=False)
    page.set_input_files("#csv", str(csv))
    page.wait_for_function("window.__explorer.overlay !== null", timeout=30_000)
    (s,) = page.evaluate("window.__explorer.overlay.series")
    assert s["alpha"] == [0.2, 0.5] and s["n_seeds"] == [3, 3]
    mean = sum(r["test_error"] for r in records if r["problem"]["alpha"] == 0.2) / 3
    assert s["test_error_mean"][0] == pytest.approx(mean, rel=1e-12)
    traces = page.evaluate("document.getElementById('plot-errors').data")
    sim = [t for t in traces if t["name"].startswith("sim test")]
    assert len(sim) == 1 and sim[0]["error_y"]["array"] == s["test_error_se"]
    # screenshots of this view (theory and simulations) at desktop and phone width
    out = ROOT / "runs"
    out.mkdir(exist_ok=True)
    page.screenshot(path=str(out / "explore-1280.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(300)  # plotly relayouts on resize
    page.screenshot(path=str(out / "explore-390.png"), full_page=True)
    # at phone width the controls stack above the plots and nothing overflows sideways
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_the_page_needs_no_outside_url(page, server):
    """Every request stays on the local server; our own assets name no outside origin.

    The plotly bundle is the installed package's file, byte for byte; it holds URLs in strings
    (map tile servers, MathJax, licence comments) used only by trace types the page never draws,
    which the request log above shows are never fetched.
    """
    from singlehead.explore.server import plotly_bundle

    local = server.rstrip("/")
    assert page.requests and all(u.startswith(local) for u in page.requests), page.requests
    for asset in ("", "static/app.js", "static/app.css"):
        text = urllib.request.urlopen(server + asset).read().decode()
        outside = [u for u in URL_RE.findall(text) if not u.startswith(("http://127.0.0.1", "http://localhost"))]
        assert outside == [], asset
    assert urllib.request.urlopen(server + "static/plotly.min.js").read() == plotly_bundle().read_bytes()


def test_the_target_menu_shows_the_selected_targets_controls(page):
    """The target menu and its controls come from the registry; the page shows the selected target's."""
    assert page.is_visible("[name=kappa0]") and not page.is_visible("[name=gamma]") and not page.is_visible("[name=d]")
    page.select_option("[name=target]", "power_law")
    page.wait_for_function(DONE + " && window.__explorer.data.view.problem.target.kind === 'power_law'", timeout=60_000)
    assert page.is_visible("[name=gamma]") and page.is_visible("[name=normalisation]") and page.is_visible("[name=d]")
    assert not page.is_visible("[name=kappa0]")
    assert _data(page)["view"]["problem"]["target"] == {"gamma": 1.0, "normalisation": "sqrt_d", "kind": "power_law"}


def test_heads_controls_draw_the_linear_theory_and_refuse_what_no_theory_serves(page):
    """H and H0 on the linear channel: the exact multi-head curve and its note; beyond the softmax channels'
    multi-head state evolution (5 heads): the refusal beside the control, the last plot kept."""
    _set(page, heads="5")
    page.wait_for_function("window.__explorer.status === 'invalid'", timeout=30_000)
    assert page.inner_text(".err[data-err=heads]").startswith("heads must be in 1..4")
    page.select_option("[name=channel]", "linear")  # first: two heads on seq2lab would start a slow curve
    page.wait_for_function(DONE + " && window.__explorer.data.view.problem.heads === 5", timeout=60_000)
    _set(page, heads="2")
    page.wait_for_function(DONE + " && window.__explorer.data.view.problem.heads === 2", timeout=60_000)
    d = _data(page)
    problem = Problem.from_dict(d["view"]["problem"])
    for p in d["points"]:
        assert p["test_error"] == pytest.approx(theory(problem.replace(alpha=p["alpha"])).test_error, abs=1e-6)
    assert "H = 2 student heads" in page.inner_text("#errors-note")
    out = ROOT / "runs"
    out.mkdir(exist_ok=True)
    page.screenshot(path=str(out / "explore-heads.png"), full_page=True)
