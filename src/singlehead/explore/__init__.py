"""``singlehead explore``: the theory in the browser, live (a local, offline web app).

Layers: :mod:`.view` (the controls -> a validated :class:`~.view.View`, and the code that
reproduces it), :mod:`.compute` (every panel through the public API, streamed and cached under
the library's keys), :mod:`.overlay` (simulation points from ``simulate`` / ``reproduce``
files), :mod:`.server` (Starlette + uvicorn; plotly.js from the installed ``plotly`` package).
Needs the ``explore`` extra: ``pip install 'singlehead[explore]'``.
"""

from __future__ import annotations

from .compute import Engine
from .view import View, ViewError, parse_view

__all__ = ["Engine", "View", "ViewError", "parse_view", "create_app", "serve"]


def create_app(engine: Engine | None = None):
    """See :func:`singlehead.explore.server.create_app` (imports Starlette on first use)."""
    from .server import create_app as _create

    return _create(engine)


def serve(port: int = 8765, **kwargs):
    """See :func:`singlehead.explore.server.serve`."""
    from .server import serve as _serve

    return _serve(port, **kwargs)
