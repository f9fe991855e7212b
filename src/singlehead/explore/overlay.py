"""Simulation points over the theory: read a file written by ``simulate`` or ``reproduce``.

Accepted inputs (text):

* the JSON-lines export of ``singlehead simulate --out runs.jsonl`` (one record per run, the
  full problem under ``"problem"``);
* a figure CSV of ``singlehead reproduce`` (tidy: one row per run, the config in ``cfg_*``
  columns, ``kind`` = ``theory`` / ``simulation_*``).

Simulation rows (``route == "simulation"``, or ``kind`` starting with ``simulation``, or a
non-empty ``seed``) are grouped by ``alpha`` and by every other config column that varies in
the file; each group gives the mean and standard error (``std/sqrt(k)``, ``ddof=1``; 0 for a
single seed) of ``test_error`` and ``train_error``, as in the report's figures
(:func:`singlehead.report.compare.sim_summary`).
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pandas as pd

from singlehead.report.compare import records_to_frame, sim_summary

__all__ = ["load_overlay"]

QUANTITIES = ("test_error", "train_error")


def _frame(text: str):

    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            records = [json.loads(line) for line in stripped.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise ValueError(f"file: not valid JSON lines ({exc.msg} at line {exc.lineno})") from None
        return records_to_frame(records)
    try:
        return pd.read_csv(io.StringIO(text), low_memory=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"file: not a CSV written by simulate or reproduce ({exc})") from None


def _simulation_rows(df):
    if "route" in df.columns and (df["route"] == "simulation").any():
        return df[df["route"] == "simulation"]
    if "kind" in df.columns and df["kind"].astype(str).str.startswith("simulation").any():
        return df[df["kind"].astype(str).str.startswith("simulation")]
    if "seed" in df.columns:
        return df[df["seed"].notna()]
    return df.iloc[0:0]


def load_overlay(text: str, name: str = "file") -> dict[str, Any]:
    """Series of simulation points (mean and standard error per alpha) from a file's text.

    Returns
    -------
    dict
        ``{"name", "n_rows", "series": [{"label", "config", "alpha", "<q>_mean", "<q>_se", "n_seeds"}]}``
        with ``<q>`` in ``test_error``, ``train_error`` (``None`` where a column is missing).

    Raises
    ------
    ValueError
        When the text is neither format, or holds no simulation rows with ``cfg_alpha``.
    """
    df = _simulation_rows(_frame(text))
    qty = [q for q in QUANTITIES if q in df.columns]
    if df.empty or "cfg_alpha" not in df.columns or not qty:
        raise ValueError(
            f"file: no simulation rows with cfg_alpha and {' or '.join(QUANTITIES)} in {name!r} "
            "(expected the JSON lines of `singlehead simulate --out` or a `reproduce` figure CSV)"
        )
    varying = [c for c in df.columns if c.startswith("cfg_") and c != "cfg_alpha" and df[c].nunique(dropna=True) > 1]
    split = varying + (["kind"] if "kind" in df.columns and df["kind"].nunique() > 1 else [])
    series = []
    groups = df.groupby(split, dropna=False) if split else [((), df)]
    for values, g in groups:
        values = values if isinstance(values, tuple) else (values,)
        summ = sim_summary(g, ["cfg_alpha"], qty).sort_values("cfg_alpha")
        config = {c.removeprefix("cfg_"): _plain(v) for c, v in zip(split, values)}
        s: dict[str, Any] = {
            "label": ", ".join(f"{k}={v}" for k, v in config.items()) or "simulation",
            "config": config,
            "alpha": [float(a) for a in summ["cfg_alpha"]],
            "n_seeds": [int(k) for k in summ["n_seeds"]],
        }
        for q in QUANTITIES:
            have = q in qty
            s[f"{q}_mean"] = [_num(v) for v in summ[f"{q}_mean"]] if have else None
            s[f"{q}_se"] = [_num(v, 0.0) for v in summ[f"{q}_se"]] if have else None
        series.append(s)
    common = {
        c.removeprefix("cfg_"): _plain(df[c].iloc[0])
        for c in df.columns
        if c.startswith("cfg_") and c not in varying and c != "cfg_alpha"
    }
    return {"name": name, "n_rows": len(df), "series": series, "common": common}


def _num(v: Any, missing: float | None = None) -> float | None:
    x = float(v)
    return x if math.isfinite(x) else missing


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v
