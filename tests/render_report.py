"""Render a reproduction report in a real headless browser: a screenshot, and the page's layout measured.

Usage: ``python tests/render_report.py singlehead-report/report.html [--out shot.png]`` (the tests import it too).
Needs Chromium (Debian: ``apt-get install chromium``). Exit status 0 when the page rendered
and its layout holds at 1280 px and 390 px: no horizontal scroll of the page body, every
image loaded and inside the viewport's width, the table of contents on screen after a scroll.

Headless Chromium does not make a window narrower than 500 px, so a narrow viewport is an
``iframe`` of that width in a wrapper page (a phone's viewport is the frame's); the wrapper
reads the frame's document (``--allow-file-access-from-files``), writes the measurements into
its own DOM, and ``--dump-dom`` returns them.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def find_browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


# measured inside the frame: the page body's width against the viewport, every image, the contents after a scroll
_PROBE = """
window.addEventListener('load', () => {
  const f = document.getElementById('page'), w = f.contentWindow, doc = f.contentDocument;
  const vw = w.innerWidth;
  const imgs = [...doc.images].map(i => { const r = i.getBoundingClientRect();
    return {complete: i.complete, naturalWidth: i.naturalWidth, left: r.left, right: r.right, width: r.width}; });
  const nav = doc.querySelector('nav');
  w.scrollTo({top: doc.documentElement.scrollHeight, behavior: 'instant'});
  const navTop = nav ? nav.getBoundingClientRect().top : null;
  const navBottom = nav ? nav.getBoundingClientRect().bottom : null;
  const out = {innerWidth: vw, innerHeight: w.innerHeight, bodyScrollWidth: doc.body.scrollWidth,
               docScrollWidth: doc.documentElement.scrollWidth, scrolledTo: w.scrollY, images: imgs,
               navTopAfterScroll: navTop, navBottomAfterScroll: navBottom};
  const p = document.createElement('pre'); p.id = 'probe'; p.textContent = JSON.stringify(out);
  document.body.appendChild(p);
});
"""


def _wrapper(html: Path, width: int, height: int, probe: bool) -> str:
    script = f"<script>{_PROBE}</script>" if probe else ""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><style>body{{margin:0}}iframe{{border:0;display:block}}"
        f"</style></head><body><iframe id='page' src='{html.resolve().as_uri()}' width='{width}' "
        f"height='{height}'></iframe>{script}</body></html>"
    )


def _run(args: list[str], timeout: float) -> str:
    browser = find_browser()
    if browser is None:
        raise RuntimeError("no Chromium found (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [browser, *FLAGS, f"--user-data-dir={profile}", *args],
            check=True,
            timeout=timeout,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    return done.stdout


def screenshot(html: Path, png: Path, width: int = 1200, height: int = 3000, timeout: float = 120) -> Path:
    """Screenshot ``html`` with headless Chromium into ``png`` at a viewport of ``width`` x ``height``."""
    with tempfile.TemporaryDirectory() as tmp:
        target = html
        if width < 500:  # the narrowest headless window: the page goes into a frame of the width
            target = Path(tmp) / "wrapper.html"
            target.write_text(_wrapper(html, width, height, probe=False))
        _run(
            [
                "--allow-file-access-from-files",
                f"--window-size={max(width, 500)},{height}",
                f"--screenshot={png.resolve()}",
                target.resolve().as_uri(),
            ],
            timeout,
        )
    return png


def layout_probe(html: Path, width: int, height: int = 900, timeout: float = 120) -> dict:
    """The page's layout at a viewport ``width`` x ``height``, measured in headless Chromium (module docstring).

    Returns the dict written by the probe: ``innerWidth``, ``bodyScrollWidth``, ``docScrollWidth``,
    ``images`` (``complete``, ``naturalWidth``, ``left``, ``right``), ``navTopAfterScroll`` and
    ``navBottomAfterScroll`` (the contents' box after scrolling to the end).
    """
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = Path(tmp) / "wrapper.html"
        wrapper.write_text(_wrapper(html, width, height, probe=True))
        dom = _run(
            [
                "--allow-file-access-from-files",
                f"--window-size={max(width, 500)},{height + 100}",
                "--virtual-time-budget=10000",
                "--dump-dom",
                wrapper.resolve().as_uri(),
            ],
            timeout,
        )
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    if m is None:
        raise RuntimeError(f"the layout probe wrote nothing (is the page at {html} readable?)")
    import html as _html

    return json.loads(_html.unescape(m.group(1)))


def layout_problems(probe: dict) -> list[str]:
    """What is wrong with a measured layout (empty when it holds): body wider than the viewport, an image not
    loaded or outside the viewport's width, the contents off screen after a scroll."""
    vw = probe["innerWidth"]
    bad = []
    if probe["bodyScrollWidth"] > vw or probe["docScrollWidth"] > vw:
        bad.append(
            f"horizontal scroll: body {probe['bodyScrollWidth']} px, document {probe['docScrollWidth']} px "
            f"> viewport {vw} px"
        )
    for k, im in enumerate(probe["images"]):
        if not im["complete"] or im["naturalWidth"] <= 0:
            bad.append(f"image {k} not loaded")
        elif im["left"] < -0.5 or im["right"] > vw + 0.5 or im["width"] <= 0:
            bad.append(f"image {k} outside the viewport: {im['left']:.0f}-{im['right']:.0f} px of {vw}")
    top, bottom = probe["navTopAfterScroll"], probe["navBottomAfterScroll"]
    if probe["scrolledTo"] <= 0:
        bad.append("the page did not scroll (too short to test the contents)")
    if top is None or not (-1 <= top < probe["innerHeight"]) or bottom <= 0:
        bad.append(f"contents not on screen after scrolling (top {top})")
    return bad


def is_rendered(png: Path) -> tuple[bool, float]:
    """A rendered report has images and text: many distinct, non-white pixels."""
    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(png)[..., :3]
    non_white = float(np.mean(img.min(axis=-1) < 0.9))
    return non_white > 0.02 and float(img.std()) > 0.05, non_white


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("report", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    png = args.out or args.report.with_suffix(".png")
    screenshot(args.report, png)
    ok, frac = is_rendered(png)
    print(f"screenshot {png}: {frac:.1%} non-white pixels -> {'rendered' if ok else 'BLANK'}")
    for width in (1280, 390):
        bad = layout_problems(layout_probe(args.report, width))
        print(f"layout at {width} px: " + ("; ".join(bad) if bad else "ok"))
        ok = ok and not bad
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
