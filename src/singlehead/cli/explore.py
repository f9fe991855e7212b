"""``singlehead explore``: a local web page to move through the theory (see :mod:`singlehead.explore`)."""

from __future__ import annotations

import click

from . import cli


@cli.command()
@click.option("--port", type=int, default=8765, show_default=True, help="Port on 127.0.0.1 (0: any free port).")
@click.option("--no-browser", is_flag=True, help="Do not open a browser; just print the address.")
@click.option("--cache-dir", default=None,
              help="Where computed points are kept (default <cache dir>/explore, the library's cache directory; "
                   "'off': memory only).")
@click.option("--workers", type=int, default=0, show_default=True,
              help="Worker processes for the alpha sweeps and Bayes-optimal points (0: all in the server process).")
def explore(port: int, no_browser: bool, cache_dir: str | None, workers: int) -> None:
    """Open the theory explorer: error curves, thresholds, spectra, decomposition, scaling (offline)."""
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be an integer in [0, 65535] (got {port})")
    if workers < 0:
        raise ValueError(f"workers must be an integer >= 0 (got {workers})")
    try:
        import plotly  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401

        from ..explore import Engine, serve
    except ModuleNotFoundError as exc:
        raise click.ClickException(f"explore needs the package {exc.name!r}: pip install 'singlehead[explore]'") from None
    off = cache_dir is not None and cache_dir.strip().lower() in ("off", "none", "0", "")
    engine = Engine(None if off else cache_dir, memory_only=off, workers=workers)
    try:
        serve(port, open_browser=not no_browser, engine=engine)
    except KeyboardInterrupt:
        pass
    finally:
        engine.close()
