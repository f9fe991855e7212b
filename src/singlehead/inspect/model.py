"""``inspect_model``: the theory's spectral law held against the attention layers of a checkpoint.

For each selected layer and head (conventions of :mod:`singlehead.inspect.heads`): the
query–key map ``M_h = A_h^T B_h/sqrt(d_head)``, its singular values, the eigenvalues of the
d_model-normalised tied map ``S_h = (A_h + B_h)^T (A_h + B_h)/(4 sqrt(d_head d_model))`` (the
theory's ``S = W W^T/sqrt(p d)``, rank cap ``kappa = d_head/d_model``), and the fit of
``eta ReLU(mu0 ⊞ SC(delta^2) - eps)`` (:func:`singlehead.inspect.fit.fit_spectrum`):

* per **layer**, to the eigenvalues of the ``n_heads`` heads pooled (one head has only
  ``d_head`` non-zero eigenvalues), with the shape of ``mu0`` fitted;
* per **head**, with the layer's shape fixed, ``(eta, delta, eps)`` refitted on a ``delta`` grid
  around the layer's value (32 non-zero eigenvalues: read these as indicative).

Beside the tied fit, on request (``untied=True``), per head, the untied theory's law
``eta SVT_eps(M0 + sigma_s Z_s + sigma_a Z_a)``
fitted to the singular values of ``M_h/sqrt(d_model)`` (:func:`singlehead.inspect.fit_untied`),
its KS next to the tied fit's, which fits better (:func:`singlehead.inspect.untied.better_fit`)
and the fitted ``sigma_a/sigma_s``.

Next to it the incumbent's number for the same matrix: the weightwatcher-style power-law
exponent ``alpha`` of the ESD of ``M^T M`` (:mod:`singlehead.inspect.esd`); layer rows also
give it for the full ``W_Q`` and ``W_K`` (what weightwatcher itself reports for the layer).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from singlehead.inspect.checkpoint import BERT_KEY, BERT_QUERY, AttentionWeights, load_attention_weights
from singlehead.inspect.esd import esd_power_law
from singlehead.inspect.fit import LawCache, SpectralFit, fit_spectrum
from singlehead.inspect.heads import HeadSpectrum, layer_spectra
from singlehead.inspect.untied import UntiedFit, UntiedLawCache, better_fit, fit_untied

__all__ = ["Inspection", "inspect_weights", "inspect_model", "COLUMNS"]

#: Columns of the tidy table (one row per layer x head, plus one per layer with ``head = "all"``).
COLUMNS = [
    "layer",
    "head",
    "d_model",
    "d_head",
    "rank",
    "zero_beyond_cap",
    "sv1",
    "sv2",
    "sv3",
    "tied_top",
    "n_outliers",
    "outliers",
    "top_spike",
    "top_overlap",
    "prior",
    "shape",
    "eta",
    "delta",
    "eps",
    "zero_beyond_cap_fit",
    "eta_delta",
    "eps_over_delta",
    "bulk_edge",
    "ks",
    "ks_critical",
    "fits",
    "asymmetry",
    "ww_alpha",
    "ww_xmin",
    "ww_alpha_q",
    "ww_alpha_k",
    "ks_tied",
    "ks_untied",
    "better_fit",
    "sigma_a_over_s",
    "untied_asymmetry",
    "untied_teacher",
    "untied_kappa0",
    "untied_sigma",
    "untied_eps",
    "untied_eta",
]


@dataclass
class Inspection:
    """Result of :func:`inspect_model`: ``rows`` (dicts with ``COLUMNS``), fits and spectra.

    Examples
    --------
    >>> import tempfile
    >>> from singlehead.inspect import inspect_model, write_example_checkpoint
    >>> path = str(write_example_checkpoint(tempfile.mkdtemp()))     # 4 heads x 16, d_model 64
    >>> inspection = inspect_model(path, per_head=False)
    >>> inspection.n_heads, inspection.d_head, inspection.d_model
    (4, 16, 64)
    >>> sorted(set(inspection.table()["head"]))          # one row per head and one per layer
    ['0', '1', '2', '3', 'all']
    """

    source: str
    n_heads: int
    d_head: int
    d_model: int
    prior: str
    rows: list[dict[str, Any]]
    layer_fits: dict[int, SpectralFit]
    head_fits: dict[tuple[int, int], SpectralFit]
    eigenvalues: dict[int, np.ndarray]  # pooled normalised tied eigenvalues per layer
    runtime_s: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    untied_fits: dict[tuple[int, int], UntiedFit] = field(default_factory=dict)

    def table(self):
        """Tidy :class:`pandas.DataFrame` with ``COLUMNS``."""
        return pd.DataFrame(self.rows, columns=COLUMNS)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly: model, conventions, rows and the per-layer fits."""
        return {
            "source": self.source,
            "n_heads": self.n_heads,
            "d_head": self.d_head,
            "d_model": self.d_model,
            "prior": self.prior,
            "rank_cap": self.d_head / self.d_model,
            "runtime_s": self.runtime_s,
            "normalisation": "eigenvalues of S_h = (A+B)^T(A+B)/(4 sqrt(d_head d_model)); biases ignored",
            "rows": self.rows,
            "layer_fits": {str(l): f.to_dict() for l, f in self.layer_fits.items()},
        }

    def summary_lines(self) -> list[str]:
        """Plain-language verdict per layer (outliers, collapse beyond the cap, fit or not)."""
        out = []
        for l, f in self.layer_fits.items():
            verdict = "the law fits" if f.fits else "the law does NOT fit"
            if f.delta_at_bound:
                verdict += (
                    " with a noise-dominated bulk (delta at its search bound: mu0 not identified, "
                    f"eta*delta={f.eta * f.delta:.3g}, eps/delta={f.eps / f.delta:.3g})"
                )
            out.append(
                f"layer {l}: {verdict} (KS {f.ks:.3f} vs {f.ks_critical:.3f}); {f.n_outliers} outliers over "
                f"{self.n_heads} heads; collapse beyond the rank cap: measured "
                f"{_beyond(f.zero_fraction, f.rank_cap):.3f}, fitted {f.collapse_beyond_cap:.3f}; "
                f"eta={f.eta:.3g} delta={f.delta:.3g} eps={f.eps:.3g} {_shape_name(f.prior)}={f.shape:.3g}"
            )
            won = [r["better_fit"] for r in self.rows if r["layer"] == l and r["head"] != "all" and r.get("better_fit")]
            if won:
                out[-1] += "; untied law vs tied, better fit per head: " + ", ".join(
                    f"{k} {won.count(k)}" for k in ("untied", "tied", "tie") if won.count(k)
                )
        return out


def _beyond(zero_fraction: float, cap: float | None) -> float:
    return max(0.0, zero_fraction - (1.0 - cap)) if cap is not None else zero_fraction


def _shape_name(prior: str) -> str:
    return "kappa0" if prior == "mp" else "gamma"


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _fit_cols(f: SpectralFit) -> dict[str, Any]:
    top = f.outliers[0] if f.outliers else None
    return {
        "n_outliers": f.n_outliers,
        "outliers": ";".join(f"{o['position']:.4g}" for o in f.outliers[:8]),
        "top_spike": _num(top["spike"]) if top else None,
        "top_overlap": _num(top["overlap"]) if top else None,
        "prior": f.prior,
        "shape": f.shape,
        "eta": f.eta,
        "delta": f.delta,
        "eps": f.eps,
        "zero_beyond_cap_fit": f.collapse_beyond_cap,
        "eta_delta": f.eta * f.delta,
        "eps_over_delta": f.eps / f.delta,
        "bulk_edge": f.bulk_edge,
        "ks": _num(f.ks),
        "ks_critical": f.ks_critical,
        "fits": f.fits,
    }


def _untied_cols(uf: UntiedFit, f: SpectralFit | None) -> dict[str, Any]:
    ks_tied = f.ks if f is not None else math.nan
    return {
        "ks_tied": _num(ks_tied),
        "ks_untied": _num(uf.ks),
        "better_fit": better_fit(uf.ks, ks_tied, uf.n_nonzero),
        "sigma_a_over_s": uf.sigma_ratio,
        "untied_asymmetry": _num(uf.model_asymmetry),
        "untied_teacher": uf.teacher,
        "untied_kappa0": uf.kappa0,
        "untied_sigma": uf.sigma,
        "untied_eps": _num(uf.eps),
        "untied_eta": _num(uf.eta),
    }


def _head_row(layer: int, h: int, hs: HeadSpectrum, f: SpectralFit | None) -> dict[str, Any]:
    sv = hs.singular_values
    ww = esd_power_law(sv**2)
    row = {
        "layer": layer,
        "head": str(h),
        "d_model": hs.d_model,
        "d_head": hs.d_head,
        "rank": hs.rank(),
        "zero_beyond_cap": (hs.d_head - hs.tied_rank()) / hs.d_model,
        "sv1": float(sv[0]),
        "sv2": float(sv[1]) if sv.size > 1 else None,
        "sv3": float(sv[2]) if sv.size > 2 else None,
        "tied_top": float(hs.tied_eigenvalues[0] / math.sqrt(hs.d_model)),
        "asymmetry": hs.asymmetry,
        "ww_alpha": _num(ww.alpha),
        "ww_xmin": _num(ww.xmin),
        "ww_alpha_q": None,
        "ww_alpha_k": None,
    }
    row.update(_fit_cols(f) if f is not None else {})
    return row


def inspect_weights(
    w: AttentionWeights, *, prior: str = "mp", per_head: bool = True, untied: bool = False, progress=None
) -> Inspection:
    """Spectra, fits and the table for already loaded weights (see :func:`inspect_model`).

    Same conventions as :func:`inspect_model` (``untied``: also fit the untied law per head, when
    ``per_head``): per head ``S_h = (A + B)^T (A + B)/(4 sqrt(d_head d_model))``,
    the law fitted to the pooled eigenvalues of each layer with the rank cap ``kappa = d_head/d_model``.

    Examples
    --------
    >>> import tempfile
    >>> from singlehead.inspect import inspect_weights, load_attention_weights, write_example_checkpoint
    >>> path = str(write_example_checkpoint(tempfile.mkdtemp()))     # 4 heads x 16, d_model 64
    >>> weights = load_attention_weights(path)
    >>> inspect_weights(weights, per_head=False).layer_fits[0].d
    64
    """
    t0 = time.perf_counter()
    cap = w.d_head / w.d_model
    rows, layer_fits, head_fits, eigs, untied_fits = [], {}, {}, {}, {}
    ucache = UntiedLawCache()  # laws shared by all heads (same d_model)
    for l in w.layers:
        spectra = layer_spectra(w.query[l], w.key[l], w.n_heads)
        pooled = np.concatenate([hs.normalised_tied() for hs in spectra])
        eigs[l] = pooled
        cache = LawCache()
        lf = fit_spectrum(pooled, w.d_model, rank_cap=cap if cap < 1 else None, prior=prior, cache=cache)
        layer_fits[l] = lf
        grid = lf.delta * np.geomspace(1 / 6, 3, 25)
        head_rows = []
        for h, hs in enumerate(spectra):
            hf = None
            if per_head:
                hf = fit_spectrum(
                    hs.normalised_tied(),
                    w.d_model,
                    rank_cap=cap if cap < 1 else None,
                    prior=prior,
                    shape=lf.shape,
                    cache=cache,
                    delta_grid=grid,
                )
                head_fits[(l, h)] = hf
            head_rows.append(_head_row(l, h, hs, hf))
            if per_head and untied and w.d_model >= 4:
                sv = np.zeros(w.d_model)
                k = min(hs.singular_values.size, w.d_model)
                sv[:k] = hs.singular_values[:k] / math.sqrt(w.d_model)
                uf = fit_untied(
                    sv, w.d_model, asymmetry=min(hs.asymmetry, 2.0), rank_cap=cap if cap < 1 else None, cache=ucache
                )
                untied_fits[(l, h)] = uf
                head_rows[-1].update(_untied_cols(uf, hf))
        svs = np.concatenate([hs.singular_values for hs in spectra])
        ww = esd_power_law(svs**2)
        wq = esd_power_law(np.linalg.svd(w.query[l], compute_uv=False) ** 2)
        wk = esd_power_law(np.linalg.svd(w.key[l], compute_uv=False) ** 2)
        lrow = {
            "layer": l,
            "head": "all",
            "d_model": w.d_model,
            "d_head": w.d_head,
            "rank": int(min(r["rank"] for r in head_rows)),
            "zero_beyond_cap": _beyond(lf.zero_fraction, lf.rank_cap),
            "sv1": float(np.sort(svs)[-1]),
            "sv2": float(np.sort(svs)[-2]),
            "sv3": float(np.sort(svs)[-3]),
            "tied_top": float(pooled.max()),
            "asymmetry": float(np.mean([hs.asymmetry for hs in spectra])),
            "ww_alpha": _num(ww.alpha),
            "ww_xmin": _num(ww.xmin),
            "ww_alpha_q": _num(wq.alpha),
            "ww_alpha_k": _num(wk.alpha),
            **_fit_cols(lf),
        }
        rows.append(lrow)
        rows.extend(head_rows)
        if progress is not None:
            progress(l, lf)
    return Inspection(
        source=w.source,
        n_heads=w.n_heads,
        d_head=w.d_head,
        d_model=w.d_model,
        prior=prior,
        rows=rows,
        layer_fits=layer_fits,
        head_fits=head_fits,
        eigenvalues=eigs,
        runtime_s=time.perf_counter() - t0,
        meta=dict(w.meta),
        untied_fits=untied_fits,
    )


def inspect_model(
    model: str | None = None,
    *,
    layers: list[int] | None = None,
    n_heads: int | None = None,
    query_pattern: str = BERT_QUERY,
    key_pattern: str = BERT_KEY,
    layout: str = "out_in",
    prior: str = "mp",
    per_head: bool = True,
    untied: bool = False,
    progress=None,
) -> Inspection:
    """Load a checkpoint (default the built-in all-MiniLM-L6-v2) and inspect its attention layers.

    Parameters
    ----------
    model, layers, n_heads, query_pattern, key_pattern, layout
        See :func:`singlehead.inspect.load_attention_weights` (offline; biases ignored).
    prior : {"mp", "power_law"}
        Family of the target law ``mu0`` (shape fitted per layer).
    per_head : bool
        Also fit ``(eta, delta, eps)`` per head (layer's shape fixed).
    untied : bool
        With ``per_head``: also fit the untied singular-value law to each head's ``M_h``
        (:func:`singlehead.inspect.fit_untied`; columns ``ks_untied``, ``better_fit``,
        ``sigma_a_over_s`` and ``untied_*``). Off by default: it is the slow part of an inspection.

    Returns
    -------
    Inspection
        ``table()`` gives one row per layer x head plus one per layer (``head = "all"``).

    Examples
    --------
    >>> import tempfile
    >>> from singlehead.inspect import inspect_model, write_example_checkpoint
    >>> path = str(write_example_checkpoint(tempfile.mkdtemp()))     # 4 heads x 16, d_model 64
    >>> inspection = inspect_model(path)
    >>> table = inspection.table()                              # 4 head rows and the layer row
    >>> len(table), sorted(inspection.layer_fits)
    (5, [0])
    >>> inspect_model()  # doctest: +SKIP
    """
    t0 = time.perf_counter()
    w = load_attention_weights(
        model, layers=layers, n_heads=n_heads, query_pattern=query_pattern, key_pattern=key_pattern, layout=layout
    )
    out = inspect_weights(w, prior=prior, per_head=per_head, untied=untied, progress=progress)
    out.runtime_s = time.perf_counter() - t0
    return out
