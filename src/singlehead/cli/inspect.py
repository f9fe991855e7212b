"""``singlehead inspect``: the theory's spectral law against the attention layers of a checkpoint."""

from __future__ import annotations

import json
import math

import click
import numpy as np
import pandas as pd

from singlehead.inspect import plot_inspection
from singlehead.inspect.checkpoint import BERT_KEY, BERT_QUERY
from singlehead.inspect.model import inspect_model


def _layers(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        out = []
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                a, b = part.split("-")
                out.extend(range(int(a), int(b) + 1))
            elif part:
                out.append(int(part))
        if not out or min(out) < 0:
            raise ValueError
    except ValueError:
        raise ValueError(
            f"layers must be non-negative integers, a list '0,2,5' or a range '0-3' (got {text!r})"
        ) from None
    return out


@click.command("inspect")
@click.argument("model_or_path", required=False, default=None)
@click.option("--layers", default=None, help="Layers to inspect: '0,2,5' or '0-3' (default all).")
@click.option(
    "--heads",
    "n_heads",
    type=int,
    default=None,
    help="Heads per layer (default: num_attention_heads of a config.json next to the file).",
)
@click.option("--query-pattern", default=None, help="Query weight key with '{layer}' (default BERT names).")
@click.option("--key-pattern", default=None, help="Key weight key with '{layer}' (default BERT names).")
@click.option(
    "--layout",
    type=click.Choice(["out_in", "in_out"]),
    default="out_in",
    show_default=True,
    help="Weight storage: nn.Linear [out, in] or transposed.",
)
@click.option(
    "--prior",
    type=click.Choice(["mp", "power_law"]),
    default="mp",
    show_default=True,
    help="Family of the target law mu0 (shape fitted per layer).",
)
@click.option("--no-heads", "no_head_fits", is_flag=True, help="Fit per layer only (skip the per-head fits).")
@click.option(
    "--untied/--no-untied",
    "untied",
    default=False,
    show_default=True,
    help="Also fit the untied singular-value law per head (the slow part: ~2 s a head; with 32 singular "
    "values a head the KS comparison rarely separates the two laws).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (rows and layer fits).")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default=None, help="Write the tidy table.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None, help="Write the figure grid.")
def inspect_cmd(
    model_or_path,
    layers,
    n_heads,
    query_pattern,
    key_pattern,
    layout,
    prior,
    no_head_fits,
    untied,
    as_json,
    csv_path,
    plot_path,
) -> None:
    """Per layer and head of MODEL_OR_PATH (default: built-in all-MiniLM-L6-v2, offline): the spectrum
    of the tied query-key map, the theory's law eta ReLU(mu0 ⊞ SC(delta^2) - eps) fitted to it,
    outliers, KS, asymmetry and the weightwatcher-style alpha; with --untied, per head, the untied law
    eta SVT_eps(M0 + sigma_s Z_s + sigma_a Z_a) fitted to the singular values of M_h (KS beside the
    tied fit's, which fits better, sigma_a/sigma_s). Biases are ignored."""
    if n_heads is not None and n_heads < 1:
        raise ValueError(f"heads must be an integer >= 1 (got {n_heads})")
    insp = inspect_model(
        model_or_path,
        layers=_layers(layers),
        n_heads=n_heads,
        query_pattern=query_pattern or BERT_QUERY,
        key_pattern=key_pattern or BERT_KEY,
        layout=layout,
        prior=prior,
        per_head=not no_head_fits,
        untied=untied,
    )
    df = insp.table()
    if csv_path:
        df.to_csv(csv_path, index=False)
    if plot_path:
        plot_inspection(insp, plot_path)
    if as_json:
        click.echo(json.dumps(_clean(insp.to_dict()), allow_nan=False))
        return
    cols = [
        "layer",
        "head",
        "rank",
        "zero_beyond_cap",
        "sv1",
        "n_outliers",
        "eta",
        "delta",
        "eps",
        "kappa0" if prior == "mp" else "gamma",
        "ks",
        "fits",
        "asymmetry",
        "ww_alpha",
    ]
    if df["ks_untied"].notna().any():
        cols += ["ks_untied", "better_fit", "sigma_a_over_s"]
    show = df.rename(columns={"shape": cols[9]})[cols]

    with pd.option_context("display.width", 200, "display.max_rows", 500, "display.max_columns", 30):
        click.echo(show.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    click.echo("")
    click.echo(
        f"{insp.source}: {len(insp.layer_fits)} layers x {insp.n_heads} heads, d_model={insp.d_model}, "
        f"d_head={insp.d_head} (rank cap {insp.d_head}/{insp.d_model}); eigenvalues of "
        f"S_h = (A+B)^T(A+B)/(4 sqrt(d_head d_model)); biases ignored; {insp.runtime_s:.1f} s"
    )
    for line in insp.summary_lines():
        click.echo(line)


def _clean(o):
    """JSON-safe copy: numpy scalars to Python, NaN/inf to null."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, (bool, np.bool_)):
        return bool(o)
    if isinstance(o, (int, np.integer)):
        return int(o)
    if isinstance(o, (float, np.floating)):
        return float(o) if math.isfinite(float(o)) else None
    return o
