"""The result type shared by simulation, theory and AMP, so they line up field by field.

Metric conventions (THEORY §1; defined once here and used everywhere):

* ``test_error``: ``E ||yhat(X) - y(X)||_F^2`` per sequence on fresh sequences, against
  noiseless labels; ``test_error_noisy`` against noisy labels;
* ``train_error``: ``(1/n) sum_mu ||yhat_mu - y_mu||_F^2`` at the minimiser (noisy labels);
* ``penalty``: ``lam Tr S / d`` (factorized) or ``lam ||S||_F^2 / d`` (direct), i.e. the
  regulariser divided by ``d^2``, on the same scale as ``train_error * alpha``;
* ``matrix_error``: ``||S - S0||_F^2 / d = Q0 - 2m + q``;
* ``rank_fraction``: fraction of non-zero eigenvalues of ``S`` (``1 - zero_fraction``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

METRIC_FIELDS = ("test_error", "test_error_noisy", "train_error", "penalty", "matrix_error", "rank_fraction")


def jsonable(x: Any) -> Any:
    """Plain JSON types from numpy/torch values; non-finite floats become None (strict JSON)."""
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, float):  # also numpy floating scalars
        return float(x) if math.isfinite(x) else None
    if hasattr(x, "tolist"):  # numpy arrays and scalars: convert, then clean the NaNs inside
        return jsonable(x.tolist())
    return x


@dataclass
class Result:
    """Metrics of one run (simulation, theory or AMP) of one :class:`~singlehead.problem.Problem`.

    ``source`` is ``"simulation"``, ``"theory"`` or ``"amp"``. ``extras`` holds
    route-specific fields (eigenvalues, order parameters, diagnostics, ...).
    """

    source: str
    config: dict[str, Any]
    test_error: float = math.nan
    test_error_noisy: float = math.nan
    train_error: float = math.nan
    penalty: float = math.nan
    matrix_error: float = math.nan
    rank_fraction: float = math.nan
    extras: dict[str, Any] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in METRIC_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON-friendly dict: metrics, ``config``, ``source`` and the extras at top level.

        Non-finite floats become ``None`` (JSON ``null``), so the output is strict JSON.
        """
        out: dict[str, Any] = {"source": self.source, **self.metrics(), "config": self.config}
        out.update(self.extras)
        return jsonable(out)

    def __getitem__(self, key: str) -> Any:
        if key in self.extras:
            return self.extras[key]
        if key in {f.name for f in dataclasses.fields(self)}:
            return getattr(self, key)
        raise KeyError(key)
