"""Self-contained HTML report: every figure embedded, with its parameters, agreement numbers and runtime."""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

#: The default kind of agreement row: a theory prediction against simulations.
THEORY_SIMULATION = "theory-simulation checks"


@dataclass
class FigureOutput:
    """One figure of the reproduction: the matplotlib figure, its tidy table and its numbers.

    ``agreement`` rows compare theory and simulation: each row has at least ``quantity``,
    ``theory``, ``simulation``, ``se`` (standard error of the simulation mean) and ``gap``
    (``|simulation - theory|``); ``within`` says whether the gap is within the stated tolerance.
    """

    name: str
    title: str
    caption: str
    params: dict[str, Any]
    figure: Any
    table: pd.DataFrame
    agreement: pd.DataFrame | None = None
    runtime_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    png: bytes | None = None  # the rendered PNG once saved (the report inlines it instead of rendering again)
    # what the agreement rows are (the report's summary and the CLI name it beside the count)
    checks: str = THEORY_SIMULATION


def _png_bytes(fig: Any, dpi: int = 130) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def _png_b64(out: FigureOutput) -> str:
    return base64.b64encode(out.png if out.png is not None else _png_bytes(out.figure)).decode()


def save_figure(out: FigureOutput, root: Path) -> dict[str, str]:
    """Write ``<name>.png``, ``<name>.pdf`` and ``<name>.csv`` under ``root``; returns the paths."""
    root.mkdir(parents=True, exist_ok=True)
    paths = {}
    # each render costs seconds on the main process while the workers wait: the PNG is rendered once, kept for the
    # report, and written
    out.png = _png_bytes(out.figure)
    p = root / f"{out.name}.png"
    p.write_bytes(out.png)
    paths["png"] = str(p)
    p = root / f"{out.name}.pdf"
    out.figure.savefig(p, bbox_inches="tight")
    paths["pdf"] = str(p)
    p = root / f"{out.name}.csv"
    out.table.to_csv(p, index=False)
    paths["csv"] = str(p)
    if out.agreement is not None:
        p = root / f"{out.name}_agreement.csv"
        out.agreement.to_csv(p, index=False)
        paths["agreement"] = str(p)
    return paths


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em;margin-bottom:.2em} h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ddd}
.meta{color:#666;font-size:.9em} figure{margin:1em 0} figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.92em;color:#333;margin-top:.4em} table{border-collapse:collapse;font-size:.85em;margin:.6em 0}
td,th{border:1px solid #ddd;padding:2px 8px;text-align:right} th{background:#f6f6f6}
.ok{color:#1a7f37;font-weight:600} .bad{color:#b42318;font-weight:600} code{background:#f4f4f4;padding:0 3px}
.params{font-family:ui-monospace,monospace;font-size:.85em;color:#444}
"""


def _table_html(df: pd.DataFrame) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, bool):
            return '<span class="ok">yes</span>' if v else '<span class="bad">no</span>'
        if isinstance(v, float):
            return f"{v:.4g}"
        return html.escape(str(v))

    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = "".join("<tr>" + "".join(f"<td>{fmt(v)}</td>" for v in row) + "</tr>" for row in df.itertuples(index=False))
    return f"<table><tr>{head}</tr>{rows}</table>"


def write_report(outputs: list[FigureOutput], path: Path, *, title: str, mode: str, total_runtime_s: float,
                 environment: dict[str, Any]) -> Path:
    """Write one self-contained HTML page (images inlined as base64 PNG)."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_CSS}</style></head><body>", f"<h1>{html.escape(title)}</h1>",
             f"<p class='meta'>mode <b>{html.escape(mode)}</b> · generated {_dt.datetime.now().isoformat(timespec='seconds')}"
             f" · total wall time {total_runtime_s:.0f} s · "
             + " · ".join(f"{html.escape(str(k))} {html.escape(str(v))}" for k, v in environment.items()) + "</p>"]
    summary = []
    for o in outputs:
        if o.agreement is not None and len(o.agreement):
            n_ok = int(o.agreement["within"].sum()) if "within" in o.agreement else 0
            summary.append((o.title, n_ok, len(o.agreement), o.runtime_s, o.checks))
        else:
            summary.append((o.title, None, None, o.runtime_s, o.checks))
    parts.append("<h2>Summary</h2><table><tr><th>figure</th><th>checks within tolerance</th>"
                 "<th>runtime (s)</th></tr>")
    for t, ok, n, rt, kind in summary:
        cell = "—" if ok is None else (f"<span class='{'ok' if ok == n else 'bad'}'>{ok} / {n}</span> "
                                        f"{html.escape(kind)}")
        parts.append(f"<tr><td style='text-align:left'>{html.escape(t)}</td><td>{cell}</td><td>{rt:.1f}</td></tr>")
    parts.append("</table>")
    for o in outputs:
        parts.append(f"<h2 id='{html.escape(o.name)}'>{html.escape(o.title)}</h2>")
        parts.append(f"<figure><img alt='{html.escape(o.title)}' src='data:image/png;base64,{_png_b64(o)}'>"
                     f"<figcaption>{html.escape(o.caption)}</figcaption></figure>")
        parts.append("<p class='params'>" + html.escape(", ".join(f"{k} = {v}" for k, v in o.params.items())) + "</p>")
        for note in o.notes:
            parts.append(f"<p>{html.escape(note)}</p>")
        if o.agreement is not None and len(o.agreement):
            parts.append("<p><b>Theory vs simulation.</b></p>" + _table_html(o.agreement))
        parts.append(f"<p class='meta'>runtime {o.runtime_s:.1f} s · data: <code>{html.escape(o.name)}.csv</code></p>")
    parts.append("</body></html>")
    path.write_text("\n".join(parts))
    return path
