"""The documentation's equations are typeset offline: MathJax ships with the built site.

The docs build (``docs/conf.py``) uses ``sphinx-mathjax-offline``, which copies MathJax into
``_static/mathjax`` and points Sphinx at it, so a page with equations needs no network. The
browser test opens the Theory page in Debian's headless Chromium (playwright, no browser
download) with every request that is not a local file or localhost aborted, and checks that
MathJax typeset the equations. It uses the built site ``docs/_build/html`` (``$SINGLEHEAD_DOCS_HTML``
to point elsewhere) when it has the page, else builds ``docs/theory.rst`` alone into a temporary
folder with the same math extensions; it skips, saying why, without Chromium, playwright or Sphinx.
The screenshot goes to ``runs/`` (git-ignored).
"""

from __future__ import annotations

import os
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MATH_EXTENSIONS = ["sphinx.ext.mathjax", "sphinx-mathjax-offline"]
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def test_conf_ships_mathjax_locally() -> None:
    conf = runpy.run_path(str(DOCS / "conf.py"))
    assert all(ext in conf["extensions"] for ext in MATH_EXTENSIONS)
    # a mathjax_path set in conf.py would override the bundled copy (e.g. with a CDN address)
    assert "mathjax_path" not in conf


def _built_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``theory.html`` of a built site that carries MathJax, building the page alone when there is none."""
    site = Path(os.environ.get("SINGLEHEAD_DOCS_HTML", DOCS / "_build" / "html"))
    page = site / "theory.html"
    if page.is_file() and (site / "_static" / "mathjax" / "tex-chtml.js").is_file():
        return page
    for module in ("sphinx", "sphinx-mathjax-offline"):
        pytest.importorskip(module, reason="no built docs and no docs extra to build them (pip install -e '.[docs]')")
    src = tmp_path_factory.mktemp("docs-src")
    out = tmp_path_factory.mktemp("docs-html")
    (src / "conf.py").write_text(f"extensions = {MATH_EXTENSIONS!r}\nroot_doc = 'theory'\n")
    shutil.copy(DOCS / "theory.rst", src / "theory.rst")
    # the page alone: its links to other pages and to the API stay unresolved, which only warns
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "html", str(src), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out / "theory.html"


def test_theory_equations_are_typeset_without_network(tmp_path_factory: pytest.TempPathFactory) -> None:
    chromium = os.environ.get("SINGLEHEAD_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no system Chromium (apt-get install chromium, or set SINGLEHEAD_CHROMIUM)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")
    page_path = _built_page(tmp_path_factory)
    html = page_path.read_text()
    assert "\\[" in html and 'class="math' in html, "the page has no display equations to typeset"
    assert not re.search(r"<script[^>]+src=\"https?://[^\"]*mathjax", html, re.I), "MathJax is loaded from a CDN"

    blocked: list[str] = []
    requested: list[str] = []

    def local_only(route, request) -> None:
        url = request.url
        requested.append(url)
        if url.startswith(("file:", "data:", "blob:", "about:")) or re.match(
            r"https?://(127\.0\.0\.1|localhost)[:/]", url
        ):
            route.continue_()
        else:
            blocked.append(url)
            route.abort()

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1200, "height": 1600})
            context.route("**/*", local_only)
            page = context.new_page()
            page.goto(page_path.as_uri(), wait_until="load")
            page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000)
            page.evaluate("() => MathJax.startup.promise")
            page.wait_for_function("() => document.querySelectorAll('mjx-container').length > 0", timeout=30_000)
            typeset = page.evaluate("() => document.querySelectorAll('mjx-container').length")
            displayed = page.evaluate("() => document.querySelectorAll('mjx-container[display=\"true\"]').length")
            errors = page.evaluate("() => document.querySelectorAll('mjx-merror, [data-mjx-error]').length")
            text = page.evaluate("() => document.querySelector('main, body').innerText")
            page.locator("#theory-logits").scroll_into_view_if_needed()
            shots = ROOT / "runs"
            shots.mkdir(exist_ok=True)
            page.screenshot(path=str(shots / "docs_theory_math.png"))
        finally:
            browser.close()

    assert any("mathjax" in u.lower() for u in requested), "the page did not load MathJax"
    assert not any("mathjax" in u.lower() for u in blocked), f"MathJax was requested from the network: {blocked}"
    # every display equation of the source is typeset, none with an error, and no raw TeX is left
    assert displayed >= html.count('<div class="math'), (displayed, html.count('<div class="math'))
    assert typeset > displayed > 10
    assert errors == 0
    assert "\\[" not in text and "\\(" not in text and "\\frac" not in text
