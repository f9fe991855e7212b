"""The report page: summary first, a table of contents that stays on screen, compact check tables.

Layout: a sticky sidebar with the contents beside the main column on wide screens; below
900 px the contents become a collapsed bar at the top that stays on screen. Tables sit in
their own horizontally scrolling boxes, so the page body never scrolls sideways. Figures are
embedded as WebP at a reduced width (:func:`web_image`; the PNG/PDF at full resolution are
written beside the report), which keeps the page self-contained and under 1 MB.
"""

from __future__ import annotations

import base64
import html
import io
import math
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image

from singlehead.report.verdict import AGREES, DEVIATES, EXPLAINED, INCONCLUSIVE, RULE, key_columns, tally

__all__ = ["page", "png_bytes", "web_image", "compact_table"]

# the figures are :class:`~singlehead.report.write.FigureOutput` objects (that module imports this one)
FigureOutput = Any

#: Width in pixels of the embedded images (about twice the CSS width of the main column / 2).
IMAGE_WIDTH_PX = 1400
#: WebP quality of the embedded images (line plots stay sharp; the page stays under 1 MB).
WEBP_QUALITY = 80

_CSS = """
*{box-sizing:border-box} html{scroll-behavior:smooth}
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;line-height:1.4}
.layout{display:grid;grid-template-columns:15rem minmax(0,1fr);gap:1.5rem;max-width:82rem;margin:0 auto;padding:0 1rem}
nav.toc{position:sticky;top:0;align-self:start;max-height:100vh;overflow-y:auto;padding:1rem 0;font-size:.88em}
nav.toc summary{font-weight:600;cursor:pointer} nav.toc ol{padding-left:2em;margin:.4em 0}
nav.toc li{margin:.25em 0} nav.toc a{color:#1f4e96;text-decoration:none} nav.toc a:hover{text-decoration:underline}
main{min-width:0;padding-bottom:4rem}
h1{font-size:1.5em;margin:1rem 0 .2em} \
h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd;scroll-margin-top:3rem}
.meta{color:#666;font-size:.85em;overflow-wrap:anywhere} figure{margin:1em 0}
figure img{display:block;max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.9em;color:#333;margin-top:.4em} \
.params{font-family:ui-monospace,monospace;font-size:.8em;color:#444;
overflow-wrap:anywhere} .tw{overflow-x:auto;max-width:100%} \
table{border-collapse:collapse;font-size:.82em;margin:.5em 0}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:right;vertical-align:top} th{background:#f6f6f6}
td.l,th.l{text-align:left} .ok{color:#1a7f37;font-weight:600} .bad{color:#b42318;font-weight:600}
.expl{color:#8a5a00;font-weight:600} .inc{color:#5b5b8a;font-weight:600} tr.deviates td{background:#fde8e6}
tr.explained td{background:#fff4d6} tr.inconclusive td{background:#eeeef7}
.badge{font-size:.8em;padding:0 .35em;border-radius:.3em;margin-left:.3em;white-space:nowrap}
.badge.ok{background:#e4f5e8} .badge.bad{background:#fde8e6} .badge.expl{background:#fff4d6}
.badge.inc{background:#eeeef7}
details.more{margin:.5em 0} details.more>summary{cursor:pointer;color:#1f4e96}
code{background:#f4f4f4;padding:0 3px} .rule{font-size:.9em}
@media (max-width:900px){
 .layout{display:block;padding:0 .6rem}
 nav.toc{position:sticky;top:0;z-index:2;background:#fff;border-bottom:1px solid #ddd;max-height:70vh;padding:.4rem 0}
 h1{font-size:1.25em}
}
"""

# below this width the contents start collapsed (a bar at the top rather than a sidebar)
_SCRIPT = (
    "<script>if(window.matchMedia('(max-width: 900px)').matches)"
    "{document.getElementById('toc').removeAttribute('open')}</script>"
)


def png_bytes(fig: Any, dpi: int = 130) -> bytes:
    """The matplotlib figure as PNG bytes at ``dpi`` (the full-resolution file beside the report)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def web_image(out: FigureOutput) -> tuple[str, bytes]:
    """``(mime type, bytes)`` of the figure for the page: WebP, at most :data:`IMAGE_WIDTH_PX` wide.

    Falls back to the figure's PNG when Pillow (a dependency of matplotlib) cannot write WebP.
    """
    png = out.png if out.png is not None else png_bytes(out.figure)
    img = Image.open(io.BytesIO(png)).convert("RGB")
    if img.width > IMAGE_WIDTH_PX:
        img = img.resize((IMAGE_WIDTH_PX, round(img.height * IMAGE_WIDTH_PX / img.width)), Image.LANCZOS)
    buf = io.BytesIO()
    try:
        img.save(buf, format="WEBP", quality=WEBP_QUALITY, method=6)
    except (OSError, KeyError, ValueError):  # a Pillow built without WebP
        return "image/png", png
    return "image/webp", buf.getvalue()


def _num(v: Any, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, (int, float)):
        return f"{v:.{digits}g}"
    return html.escape(str(v))


def _point(row: pd.Series, keys: list[str]) -> str:
    return ", ".join(f"{k.removeprefix('cfg_')}={_num(row[k])}" for k in keys)


#: CSS class of each verdict (row class and text colour).
_ROW_CLASS = {AGREES: "agrees", DEVIATES: "deviates", EXPLAINED: "explained", INCONCLUSIVE: "inconclusive"}
_TEXT_CLASS = {AGREES: "ok", DEVIATES: "bad", EXPLAINED: "expl", INCONCLUSIVE: "inc"}


def _verdict_cell(row: pd.Series) -> str:
    v = str(row.get("verdict", ""))
    cell = f'<span class="{_TEXT_CLASS.get(v, "bad")}">{html.escape(v)}</span>'
    fails = row.get("diagnostic_fails")
    if isinstance(fails, (bool, np.bool_)) and fails:
        # the failing diagnostic is shown on every row where it fails: it explains a deviation, and on an agreeing or
        # inconclusive row it says the theory is not guaranteed there
        sep = ": " if v == EXPLAINED else "<br><small class='expl'>"
        end = "" if v == EXPLAINED else "</small>"
        cell += f"{sep}{html.escape(str(row.get('diagnostic', '')))}{end}"
    if not bool(row.get("theory_converged", True)):
        cell += "<br><small>theory did not converge</small>"
    return cell


def compact_table(agr: pd.DataFrame) -> str:
    """The checks of one figure in at most 8 columns: point, quantity, theory, simulation ± s.e., tolerance,
    the Holm-adjusted p-values of the difference and equivalence tests, verdict (with a failing diagnostic)."""
    keys = key_columns(agr)
    head = (["point"] if keys else []) + [
        "quantity",
        "theory",
        "simulation ± s.e.",
        "tolerance",
        "Holm p diff.",
        "Holm p equiv.",
        "verdict",
    ]
    out = [
        "<div class='tw'><table><tr>"
        + "".join(f"<th class='{'l' if h in ('point', 'quantity', 'verdict') else ''}'>{h}</th>" for h in head)
        + "</tr>"
    ]
    for _, r in agr.iterrows():
        q = str(r["quantity"]).split(" (")[0]
        se = r.get("se", math.nan)
        sim = _num(r.get("simulation")) + (
            "" if se is None or (isinstance(se, float) and math.isnan(se)) else f" ± {_num(se, 2)}"
        )
        cells = ([f"<td class='l'>{html.escape(_point(r, keys))}</td>"] if keys else []) + [
            f"<td class='l'>{html.escape(q)}</td>",
            f"<td>{_num(r.get('theory'))}</td>",
            f"<td>{sim}</td>",
            f"<td>{_num(r.get('tolerance'), 2)}</td>",
            f"<td>{_num(r.get('p_diff_holm'), 2)}</td>",
            f"<td>{_num(r.get('p_equiv_holm'), 2)}</td>",
            f"<td class='l'>{_verdict_cell(r)}</td>",
        ]
        cls = _ROW_CLASS.get(str(r.get("verdict", "")), "")
        out.append(f"<tr class='{cls}'>" + "".join(cells) + "</tr>")
    return "".join(out) + "</table></div>"


def _full_table(agr: pd.DataFrame) -> str:
    cols = [c for c in agr.columns if c != "note"]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{_num(v)}</td>" for v in row) + "</tr>" for row in agr[cols].itertuples(index=False)
    )
    return f"<div class='tw'><table><tr>{head}</tr>{body}</table></div>"


def _details(o: FigureOutput) -> str:
    """Notes, per-row notes and every column of the checks, collapsed."""
    parts = [f"<p>{html.escape(n)}</p>" for n in o.notes]
    agr = o.agreement
    if agr is not None and len(agr):
        keys = key_columns(agr)
        if "note" in agr:
            items = [
                f"<li>{html.escape(_point(r, keys))} · {html.escape(str(r['quantity']))}: "
                f"{html.escape(str(r['note']))}</li>"
                for _, r in agr.iterrows()
                if isinstance(r["note"], str) and r["note"]
            ]
            parts.append("<ul>" + "".join(items) + "</ul>")
        parts.append(_full_table(agr))
    if not parts:
        return ""
    return "<details class='more'><summary>Notes and every column</summary>" + "".join(parts) + "</details>"


def _badge(t: dict[str, Any]) -> str:
    if not t["n"]:
        return ""
    cls = "bad" if t[DEVIATES] else ("inc" if t[INCONCLUSIVE] else ("expl" if t["explained"] else "ok"))
    return f"<span class='badge {cls}'>{t[AGREES]}/{t['n']} agree</span>"


def _counts(t: dict[str, Any]) -> str:
    """The four counts of one tally, coloured."""
    return (
        f"<span class='ok'>{t[AGREES]} agree</span> · <span class='{'bad' if t[DEVIATES] else 'ok'}'>"
        f"{t[DEVIATES]} deviate</span> · <span class='expl'>{t['explained']} deviate, explained</span> · "
        f"<span class='{'inc' if t[INCONCLUSIVE] else 'ok'}'>{t[INCONCLUSIVE]} inconclusive</span>"
    )


def _seeds_cell(o: FigureOutput) -> str:
    """``+24 of 48 (2 rounds)``: the runs the figure's seed plan added and its budget; ``—`` without a plan."""
    rep = getattr(o, "seeds", None)
    if rep is None or not rep.plan.active:
        return "—"
    return (
        f"+{rep.spent} of {rep.plan.budget}<br><small>{rep.rounds} round{'s' if rep.rounds != 1 else ''}, "
        f"{len(rep.rows)} points</small>"
    )


def _seed_plan(o: FigureOutput) -> str:
    """The figure's seed plan, the verdicts before it added seeds and each point that received seeds (every check
    at the point is judged on them)."""
    rep = getattr(o, "seeds", None)
    if rep is None or not rep.plan.active:
        return ""
    first = rep.first
    before = (
        f" Before added seeds: {first[AGREES]} agree · {first[DEVIATES]} deviate · {first['explained']} "
        f"deviate, explained · {first[INCONCLUSIVE]} inconclusive of {first['n']}."
        if first.get("n")
        else ""
    )
    rows = "".join(f"<li>{html.escape(lab)}: {a} → {b} seeds</li>" for lab, a, b in rep.rows)
    return (
        f"<p class='meta'>Seed plan: {html.escape(rep.plan.text())}; {rep.spent} of {rep.plan.budget} runs added "
        f"in {rep.rounds} round{'s' if rep.rounds != 1 else ''}.{html.escape(before)}</p>"
        + (f"<ul class='meta'>{rows}</ul>" if rows else "")
    )


def _summary(outputs: list[FigureOutput], tallies: list[dict[str, Any]]) -> str:
    total = {k: sum(t[k] for t in tallies) for k in ("n", AGREES, DEVIATES, "explained", INCONCLUSIVE)}
    head = (
        f"<p><b>{total[AGREES]} of {total['n']} checks agree</b> (equivalence within their declared tolerance "
        f"shown): {_counts(total)} (the rule: <a href='#rule'>below</a>).</p>"
    )
    rows = []
    for o, t in zip(outputs, tallies):
        cell = (_counts(t) + f" of {t['n']}<br><small>{html.escape(o.checks)}</small>") if t["n"] else "—"
        rows.append(
            f"<tr><td class='l'><a href='#{html.escape(o.name)}'>{html.escape(o.title)}</a></td>"
            f"<td class='l'>{cell}</td><td>{_num(t['worst_rel'], 2)}</td><td>{_num(t['worst_se'], 2)}</td>"
            f"<td>{_seeds_cell(o)}</td><td>{o.runtime_s:.1f}</td></tr>"
        )
    table = (
        "<div class='tw'><table><tr><th class='l'>figure</th><th class='l'>verdicts</th>"
        "<th>worst |gap|/|theory|</th><th>worst gap (s.e.)</th><th>seeds added</th><th>runtime (s)</th></tr>"
        + "".join(rows)
        + "</table></div>"
    )
    inconclusive = [
        f"<li><a href='#{html.escape(o.name)}'>{html.escape(o.title)}</a>: {html.escape(r)}</li>"
        for o, t in zip(outputs, tallies)
        for r in t["inconclusive_rows"]
    ]
    listing = (
        (
            "<p>Inconclusive checks (neither agreement nor a deviation shown at this number of seeds):</p><ul>"
            + "".join(inconclusive)
            + "</ul>"
        )
        if inconclusive
        else ""
    )
    return head + table + listing


def _where_theory_holds(outputs: list[FigureOutput]) -> str:
    """One line per figure whose rows carry a diagnostic: where it fails and what it explains."""
    items = []
    for o in outputs:
        agr = o.agreement
        if agr is None or "diagnostic_fails" not in agr:
            items += [
                f"<li><a href='#{html.escape(o.name)}'>{html.escape(o.title)}</a>: {html.escape(t)}</li>"
                for t in getattr(o, "diagnostics", [])
            ]
            continue
        keys = key_columns(agr)
        pts = agr.drop_duplicates(subset=keys) if keys else agr
        bad = pts[pts.diagnostic_fails.astype(bool)]
        listing = "; ".join(f"{_point(r, keys)}: {r['diagnostic']}" for _, r in bad.iterrows())
        n_exp = int((agr["verdict"] == EXPLAINED).sum()) if "verdict" in agr else 0
        items.append(
            f"<li><a href='#{html.escape(o.name)}'>{html.escape(o.title)}</a>: the diagnostic fails at "
            f"{len(bad)} of {len(pts)} compared points{' (' + html.escape(listing) + ')' if listing else ''}; "
            f"{n_exp} deviating rows are explained by it."
            + "".join(f" {html.escape(t)}" for t in getattr(o, "diagnostics", []))
            + "</li>"
        )
    if not items:
        return ""
    return (
        "<h2 id='holds'>Where the theory holds</h2><p>Diagnostics computed in this run at every compared point "
        "(see each figure's notes for the criterion).</p><ul>" + "".join(items) + "</ul>"
    )


def page(
    outputs: list[FigureOutput],
    *,
    title: str,
    mode: str,
    total_runtime_s: float,
    environment: dict[str, Any],
    generated: str,
) -> str:
    """The whole HTML page (see the module docstring)."""
    tallies = [tally(o.agreement) for o in outputs]
    holds = _where_theory_holds(outputs)
    toc = ["<li><a href='#summary'>Summary</a></li>", "<li><a href='#rule'>The rule</a></li>"]
    if holds:
        toc.append("<li><a href='#holds'>Where the theory holds</a></li>")
    toc += [
        f"<li><a href='#{html.escape(o.name)}'>{html.escape(o.title)}</a>{_badge(t)}</li>"
        for o, t in zip(outputs, tallies)
    ]
    main = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='meta'>mode <b>{html.escape(mode)}</b> · generated {html.escape(generated)} · total wall time "
        f"{total_runtime_s:.0f} s · "
        + " · ".join(f"{html.escape(str(k))} {html.escape(str(v))}" for k, v in environment.items())
        + "</p>",
        "<h2 id='summary'>Summary</h2>",
        _summary(outputs, tallies),
        f"<h2 id='rule'>The rule</h2><p class='rule'>{html.escape(RULE)}</p>",
        holds,
    ]
    for o in outputs:
        mime, data = web_image(o)
        main.append(f"<h2 id='{html.escape(o.name)}'>{html.escape(o.title)}</h2>")
        main.append(
            f"<figure><img alt='{html.escape(o.title)}' src='data:{mime};base64,"
            f"{base64.b64encode(data).decode()}'><figcaption>{html.escape(o.caption)}</figcaption></figure>"
        )
        main.append("<p class='params'>" + html.escape(", ".join(f"{k} = {v}" for k, v in o.params.items())) + "</p>")
        if o.agreement is not None and len(o.agreement):
            main.append(compact_table(o.agreement))
        main.append(_seed_plan(o))
        main.append(_details(o))
        main.append(
            f"<p class='meta'>runtime {o.runtime_s:.1f} s · full resolution and data: "
            f"<code>figures/{html.escape(o.name)}.png</code>, <code>.pdf</code>, <code>.csv</code></p>"
        )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body><div class='layout'>"
        "<nav class='toc'><details open id='toc'><summary>Contents</summary><ol>"
        + "".join(toc)
        + "</ol></details></nav><main>"
        + "\n".join(main)
        + "</main></div>"
        + _SCRIPT
        + "</body></html>"
    )
