"""The result type shared by simulation, theory and AMP, so they line up field by field.

Metric conventions (docs: Theory, :ref:`theory-metrics`; defined once here and used everywhere):

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
import hashlib
import json
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


STANDARD_FIELDS = ("converged", "iterations", "runtime_s", "message")


def stable_hash(obj: Any, length: int = 24) -> str:
    """The library's one hash scheme (cache keys, resume keys, problem keys).

    SHA-256 of the JSON of ``obj`` with sorted keys (anything not JSON-native by ``str``),
    truncated to ``length`` hex digits. (This is the key format the result caches have always
    used, so existing caches stay valid.)
    """
    blob = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


@dataclass
class Result:
    """Metrics of one run of one :class:`~singlehead.model.problem.Problem`, the same for every route.

    Standard fields (the same names in Python, JSON and CSV, like ``scipy.optimize.OptimizeResult``):

    * ``source``: the route, ``"simulation"``, ``"theory"``, ``"amp"`` or ``"bayes"``;
    * ``problem``: the full problem, ``Problem.to_dict()`` (rebuild with ``Problem.from_dict``);
    * the metrics of ``METRIC_FIELDS`` (nan where a route does not define one);
    * ``converged``: the route's stopping rule fired (optimiser / fixed point / AMP);
    * ``iterations``: optimiser steps, fixed-point map evaluations or AMP iterations;
    * ``runtime_s``: wall-clock seconds of the run;
    * ``message``: why it stopped, or what went wrong, in words ("" when nothing to say);
    * ``diagnosis``: for an unconverged state-evolution result, the cause, one of
      ``"quadrature_floor"`` (the residual stalled at the SE map's own quadrature error),
      ``"rs_unstable"`` (no stable replica-symmetric fixed point near the best point: replicon
      above 1, a binding rank cap, or a large prox-jump share) and ``"solver_miss"`` (the root
      finder missed a point that looks stable); ``None`` otherwise. ``extras["diagnosis_details"]``
      holds the checks behind it and what each solve attempt tried
      (module ``singlehead.state_evolution.diagnosis``); ``message`` says it in words. Always written
      by :meth:`to_dict` (``None``: nothing to diagnose); records without it read back as ``None``.

    ``extras`` holds route-specific fields (eigenvalues, order parameters, diagnostics, ...).

    Examples
    --------
    >>> from singlehead import Problem, Result
    >>> r = Result(source="theory", problem=Problem().to_dict(), test_error=0.12, extras={"delta": 0.8})
    >>> r.test_error, r["delta"]                        # fields and extras by name
    (0.12, 0.8)
    >>> sorted(r.metrics())[:3]
    ['matrix_error', 'penalty', 'rank_fraction']
    >>> Result.from_dict(r.to_dict()).test_error       # JSON round trip
    0.12
    """

    source: str
    problem: dict[str, Any]
    test_error: float = math.nan
    test_error_noisy: float = math.nan
    train_error: float = math.nan
    penalty: float = math.nan
    matrix_error: float = math.nan
    rank_fraction: float = math.nan
    converged: bool = True
    iterations: int = 0
    runtime_s: float = math.nan
    message: str = ""
    extras: dict[str, Any] = field(default_factory=dict)
    diagnosis: str | None = None

    def metrics(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in METRIC_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON-friendly dict: ``source``, ``problem``, metrics, standard fields, ``diagnosis``, then the extras.

        Non-finite floats become ``None`` (JSON ``null``), so the output is strict JSON.
        """
        out: dict[str, Any] = {
            "source": self.source,
            "problem": self.problem,
            **self.metrics(),
            **{k: getattr(self, k) for k in STANDARD_FIELDS},
            "diagnosis": self.diagnosis,
        }
        out.update(self.extras)
        return jsonable(out)

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Result:
        """Inverse of :meth:`to_dict` (nulls become nan; unknown keys go to ``extras``)."""
        names = {f.name for f in dataclasses.fields(cls)} - {"extras"}
        kw = {k: record[k] for k in names if k in record}
        for k in METRIC_FIELDS:
            if kw.get(k) is None:
                kw[k] = math.nan
        if kw.get("runtime_s") is None:
            kw["runtime_s"] = math.nan
        return cls(**kw, extras={k: v for k, v in record.items() if k not in names})

    def __getitem__(self, key: str) -> Any:
        if key in self.extras:
            return self.extras[key]
        if key in {f.name for f in dataclasses.fields(self)}:
            return getattr(self, key)
        raise KeyError(key)
