"""``singlehead explore``: the theory in the browser, live (a local, offline web app).

Layers: :mod:`.view` (the controls -> a validated :class:`~.view.View`, and the code that
reproduces it), :mod:`.compute` (every panel through the public API, streamed and cached under
the library's keys), :mod:`.overlay` (simulation points from ``simulate`` / ``reproduce``
files), :mod:`.server` (Starlette + uvicorn; plotly.js from the installed ``plotly`` package).
Needs the ``explore`` extra: ``pip install 'singlehead[explore]'``.
"""

from __future__ import annotations

from singlehead.explore.compute import Engine
from singlehead.explore.server import create_app, serve
from singlehead.explore.view import View, ViewError, parse_view

__all__ = ["Engine", "View", "ViewError", "parse_view", "create_app", "serve"]
