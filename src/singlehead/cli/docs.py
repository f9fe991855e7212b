"""``singlehead docs``: build the documentation (Sphinx, executed gallery) and open or serve it."""

from __future__ import annotations

import functools
import http.server
import importlib.util
import subprocess
import sys
import webbrowser
from pathlib import Path

import click

#: Packages of the ``docs`` extra that the build imports.
DOCS_PACKAGES = ("sphinx", "sphinx_gallery", "numpydoc", "pydata_sphinx_theme", "sphinx-mathjax-offline")


def default_source() -> Path:
    """``docs/`` of the clone this package is installed from (editable install, src layout)."""
    return Path(__file__).resolve().parents[3] / "docs"


def missing_packages() -> list[str]:
    """Packages of the ``docs`` extra that cannot be imported."""
    return [name for name in DOCS_PACKAGES if importlib.util.find_spec(name) is None]


def sphinx_command(source: Path, out: Path, *, gallery: bool) -> list[str]:
    """The ``sphinx-build`` call of CI: nitpicky, warnings are errors, every example executed unless ``gallery`` is
    off."""
    cmd = [sys.executable, "-m", "sphinx", "-n", "-W", "--keep-going", "-b", "html", str(source), str(out)]
    if not gallery:
        cmd += ["-D", "plot_gallery=0"]
    return cmd


@click.command()
@click.option(
    "--source",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Documentation source folder (default: docs/ of this clone).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="HTML output folder (default: SOURCE/_build/html).",
)
@click.option("--serve", is_flag=True, help="Serve the built site on http://127.0.0.1:PORT until Ctrl-C.")
@click.option("--port", type=int, default=8000, show_default=True, help="Port of --serve.")
@click.option("--no-open", is_flag=True, help="Do not open a browser.")
@click.option("--no-gallery", is_flag=True, help="Do not execute the gallery examples (a quick build).")
def docs(source: Path | None, out: Path | None, serve: bool, port: int, no_open: bool, no_gallery: bool) -> None:
    """Build the documentation with its executed gallery and open it (needs the docs extra)."""
    missing = missing_packages()
    if missing:
        raise ValueError(f"docs needs the docs extra ({', '.join(missing)} missing): pip install -e '.[docs]'")
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be an integer in [1, 65535] (got {port})")
    source = source or default_source()
    if not (source / "conf.py").is_file():
        raise ValueError(
            f"source must be a documentation folder with conf.py (got {str(source)!r}); "
            "the docs are built from a clone of the repository"
        )
    out = out or source / "_build" / "html"
    status = subprocess.call(sphinx_command(source, out, gallery=not no_gallery))
    if status != 0:
        raise click.ClickException(f"the documentation build failed (sphinx-build exit status {status})")
    index = out / "index.html"
    click.echo(f"built {index}")
    if serve:
        _serve(out, port, open_browser=not no_open)
    elif not no_open:
        webbrowser.open(index.resolve().as_uri())


def _serve(folder: Path, port: int, *, open_browser: bool) -> None:

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        url = f"http://127.0.0.1:{port}/"
        click.echo(f"serving {folder} on {url} (Ctrl-C stops)")
        if open_browser:
            webbrowser.open(url)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            click.echo("stopped")
