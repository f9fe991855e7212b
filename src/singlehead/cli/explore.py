"""``singlehead explore``: a local web page to move through the theory (see :mod:`singlehead.explore`)."""

from __future__ import annotations

import click

from singlehead.explore import Engine, serve


@click.command()
@click.option("--port", type=int, default=8765, show_default=True, help="Port on 127.0.0.1 (0: any free port).")
@click.option("--no-browser", is_flag=True, help="Do not open a browser; just print the address.")
@click.option(
    "--cache-dir",
    default=None,
    help="Where computed points are kept (default <cache dir>/explore, the library's cache directory; "
    "'off': memory only).",
)
@click.option(
    "--workers",
    type=int,
    default=0,
    show_default=True,
    help="Worker processes for the alpha sweeps and Bayes-optimal points (0: all in the server process).",
)
def explore(port: int, no_browser: bool, cache_dir: str | None, workers: int) -> None:
    """Open the theory explorer: error curves, thresholds, spectra, decomposition, scaling (offline)."""
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be an integer in [0, 65535] (got {port})")
    if workers < 0:
        raise ValueError(f"workers must be an integer >= 0 (got {workers})")
    off = cache_dir is not None and cache_dir.strip().lower() in ("off", "none", "0", "")
    engine = Engine(None if off else cache_dir, memory_only=off, workers=workers)
    try:
        serve(port, open_browser=not no_browser, engine=engine)
    except KeyboardInterrupt:
        pass
    finally:
        engine.close()
