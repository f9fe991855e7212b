"""The explorer's web server: one Starlette app, every asset served from installed packages.

Routes: ``/`` (the page), ``/static/app.js``, ``/static/app.css``, ``/static/plotly.min.js`` (the
bundle inside the installed ``plotly`` wheel: no CDN, the page works offline), ``/api/stream``
(the panels of the view given by the query string, as JSON lines while they are computed, see
:meth:`singlehead.explore.compute.Engine.events`) and ``/api/overlay`` (POST a file written by
``simulate`` or ``reproduce``; see :func:`singlehead.explore.overlay.load_overlay`).
"""

from __future__ import annotations

import html
import json
import math
import socket
import threading
import webbrowser
from collections.abc import AsyncIterator, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import plotly
import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import iterate_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from singlehead.explore.compute import Engine
from singlehead.explore.overlay import load_overlay
from singlehead.explore.view import MAX_POINTS, ViewError, explorer_targets, parse_view, target_controls, view_defaults
from singlehead.model.channels import channel_names
from singlehead.model.students import student_names
from singlehead.model.targets import target_class

__all__ = ["create_app", "plotly_bundle", "serve"]

_STATIC = {"app.js": "text/javascript", "app.css": "text/css"}
# the uploaded file is read in memory: a reproduce CSV is ~1 MB, refuse anything far larger
MAX_UPLOAD = 64 * 2**20


def plotly_bundle() -> Path:
    """Path of ``plotly.min.js`` inside the installed ``plotly`` package."""
    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise FileNotFoundError(f"plotly.min.js not found in the installed plotly package ({path})")
    return path


def _options(names: tuple[str, ...]) -> str:
    """``<option>`` elements of the registered names (channels or students: new ones appear too)."""
    return "".join(f"<option>{html.escape(n)}</option>" for n in names)


def _target_options() -> str:
    """``<option>`` elements of the targets the explorer offers (registered ones appear too)."""
    return "".join(
        f'<option value="{html.escape(n)}">{html.escape(target_class(n).label or n)}</option>'
        for n in explorer_targets()
    )


def _target_controls() -> str:
    """One control per parameter of the offered targets, tagged with the targets that take it
    (``data-targets``; the page shows the selected target's controls)."""
    out = []
    for name, prm in target_controls().items():
        takers = " ".join(n for n in explorer_targets() if any(q.name == name for q in target_class(n).params))
        if prm.kind == "choice":
            field = (
                f'<select name="{name}">'
                + "".join(f"<option>{html.escape(c)}</option>" for c in prm.choices)
                + "</select>"
            )
        else:
            field = f'<input name="{name}" type="{"number" if prm.kind == "float" else "text"}" step="any">'
        out.append(
            f'<label data-targets="{takers}">{html.escape(prm.label or name)} {field}</label>'
            f'<div class="err" data-targets="{takers}" data-err="{name}"></div>'
        )
    return "\n    ".join(out)


def _page_defaults() -> dict[str, Any]:
    """The controls' defaults and what the page needs to show the selected target's controls."""
    return {
        **view_defaults(),
        "max_points": MAX_POINTS,
        "target_params": list(target_controls()),
        "d_targets": [n for n in explorer_targets() if target_class(n).law_depends_on_d],
    }


def _asset(name: str) -> str:
    return resources.files("singlehead.explore").joinpath("static", name).read_text(encoding="utf-8")


def _line(event: dict[str, Any]) -> bytes:
    # strict JSON: a non-finite number would break JSON.parse in the page
    return (json.dumps(event, allow_nan=False, default=_default) + "\n").encode()


def _default(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def _guarded(engine: Engine, params: dict[str, str], generation: int) -> Iterator[bytes]:
    """The event lines of one view; a bad control or a failed computation ends it with a message."""
    try:
        view = parse_view(params)
    except ViewError as exc:
        yield _line({"event": "invalid", "field": exc.field, "message": str(exc)})
        return
    try:
        for event in engine.events(view, generation):
            yield _line(event)
    except (ValueError, ArithmeticError, NotImplementedError, RuntimeError) as exc:
        yield _line({"event": "error", "message": f"{type(exc).__name__}: {exc}"})


def create_app(engine: Engine | None = None):
    """The Starlette application (``engine``: default :class:`Engine` with the library's cache dir)."""
    engine = engine or Engine()
    bundle = plotly_bundle()

    async def index(request: Request) -> Response:
        page = (
            _asset("index.html")
            .replace("{{DEFAULTS}}", json.dumps(_page_defaults()))
            .replace("{{TARGET_OPTIONS}}", _target_options())
            .replace("{{TARGET_CONTROLS}}", _target_controls())
            .replace("{{CHANNEL_OPTIONS}}", _options(channel_names()))
            .replace("{{STUDENT_OPTIONS}}", _options(student_names()))
        )
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name == "plotly.min.js":
            # the bundle changes only with the plotly package: let the browser keep it for a day
            return FileResponse(bundle, media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})
        if name not in _STATIC:
            return Response("not found", status_code=404)
        return Response(_asset(name), media_type=_STATIC[name], headers={"Cache-Control": "no-store"})

    async def stream(request: Request) -> Response:
        params = dict(request.query_params)
        # a new view: streams of earlier views stop at their next check (taken here, in arrival order)
        generation = engine.begin()

        async def body() -> AsyncIterator[bytes]:
            async for chunk in iterate_in_threadpool(_guarded(engine, params, generation)):
                yield chunk

        return StreamingResponse(body(), media_type="application/x-ndjson", headers={"Cache-Control": "no-store"})

    async def overlay(request: Request) -> Response:
        raw = await request.body()
        if len(raw) > MAX_UPLOAD:
            return JSONResponse({"error": f"file: larger than {MAX_UPLOAD >> 20} MiB"}, status_code=413)
        name = request.query_params.get("name", "file")
        try:
            out = load_overlay(raw.decode("utf-8", errors="replace"), name)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return Response(json.dumps(out, allow_nan=False, default=_default), media_type="application/json")

    async def favicon(request: Request) -> Response:
        return Response(status_code=204)  # no icon; answering spares the browser's console a 404

    routes = [
        Route("/", index),
        Route("/favicon.ico", favicon),
        Route("/static/{name}", static),
        Route("/api/stream", stream),
        Route("/api/overlay", overlay, methods=["POST"]),
    ]
    return Starlette(routes=routes)


def serve(
    port: int = 8765, *, host: str = "127.0.0.1", open_browser: bool = True, engine: Engine | None = None
) -> None:
    """Run the explorer until interrupted (``port=0``: any free port); prints its address."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        raise ValueError(f"port {port} is not free on {host} ({exc.strerror}); pick another with --port") from None
    url = f"http://{host}:{sock.getsockname()[1]}/"
    print(f"singlehead explore: {url}  (Ctrl-C to stop)", flush=True)
    if open_browser:
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    config = uvicorn.Config(create_app(engine), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])
