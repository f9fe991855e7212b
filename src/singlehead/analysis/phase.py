"""Phase diagrams: the state evolution's map of regimes over two parameters of a problem.

``phase_diagram`` solves the state evolution on a grid of two parameters (any two of
``AXES``), one warm-started :func:`~singlehead.state_evolution.iter_theory_curve` chain per grid
row, and returns a ``PhaseDiagram``: one record per grid point, its region, and the
closed-form threshold curves of the library (``singlehead.thresholds``, and the collapse point
``extras["collapse_lam"]`` of each result) that apply to the two axes chosen.

Regions (docs: how-to "Phase diagrams"; the flags are computed from the result fields, each point
gets the first that holds, in this order):

* ``unconverged``: ``Result.converged`` is false (the cause is in ``diagnosis``);
* ``collapsed``: ``extras["collapsed"]``, the fixed point is ``S = 0`` (weight decay above
  ``collapse_lam``);
* ``rs_unstable``: the smooth replicon of :func:`~singlehead.state_evolution.stability` is above 1
  (only with ``stability=True``; a binding rank cap gives an infinite replicon);
* ``perfect_recovery``: noiseless labels and a relative matrix error
  ``matrix_error / Q0 <= recovery_tol``;
* ``interpolating``: the training error is zero in the ``lam -> 0+`` sense: at the point's own
  ``lam``, ``train_error <= interp_tol * e0``, ``e0`` the training error of the null predictor
  ``h = 0`` (the test error of the collapsed solution, the natural scale of the labels' variation);
  below the interpolation threshold the training error of the ERM minimiser vanishes linearly with
  ``lam``, above it it stays of order the noise level;
* ``ordinary``: none of the above.

Conventions: a grid row is a fixed ``y`` value; the chain runs along ``x`` (along ``y`` when ``x`` is
``T``: the quadrature nodes depend on ``T``, so a chain never crosses values of ``T``). ``T`` values
are integers. Log axes (``LOG_AXES``) take positive values only.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from singlehead.model.problem import Problem
from singlehead.model.results import Result, jsonable, stable_hash
from singlehead.state_evolution import SEOptions, iter_theory_curve, theory
from singlehead.state_evolution import stability as rs_stability

__all__ = [
    "AXES",
    "LOG_AXES",
    "REGIONS",
    "PhaseDiagram",
    "ThresholdCurve",
    "phase_diagram",
    "classify",
    "point_row",
    "point_thresholds",
]

#: the parameters a phase diagram may span
AXES = ("alpha", "lam", "kappa", "kappa0", "noise", "beta", "beta0", "T")
#: the axes drawn (and validated) on a log scale: their values must be > 0
LOG_AXES = frozenset({"alpha", "lam", "kappa0", "beta", "beta0"})
#: valid range of each axis, for the error messages
AXIS_RANGES = {
    "alpha": "> 0",
    "lam": "> 0",
    "kappa": "in (0, 1]",
    "kappa0": "> 0 (an MP target's rank ratio)",
    "noise": ">= 0",
    "beta": "> 0",
    "beta0": "> 0",
    "T": "integers >= 1 (>= 2 for the softmax channels)",
}
#: region names, in the order of precedence of ``classify``
REGIONS = ("unconverged", "collapsed", "rs_unstable", "perfect_recovery", "interpolating", "ordinary")
#: default tolerances of the regions (see ``classify``)
DEFAULT_INTERP_TOL = 1e-3
DEFAULT_RECOVERY_TOL = 1e-3

# what a point's solve or stability check may raise for a point outside its reach: that point alone fails
_POINT_ERRORS = (ValueError, ArithmeticError, RuntimeError, NotImplementedError, np.linalg.LinAlgError)


# ---------------------------------------------------------------- axes and problems
@dataclass(frozen=True)
class Axis:
    """One axis of the grid: a parameter name, its values (in the given order) and its scale."""

    name: str
    values: tuple[float, ...]
    scale: str  # "log" or "linear"


def _axis(spec: Any, which: str) -> Axis:
    try:
        name, values = spec
    except (TypeError, ValueError):
        raise ValueError(
            f"{which} must be a pair (name, values) with name one of {', '.join(AXES)} (got {spec!r})"
        ) from None
    if name not in AXES:
        raise ValueError(f"{which}: parameter {name!r} cannot span a phase diagram; valid: {', '.join(AXES)}")
    try:
        vals = [float(v) for v in np.ravel(np.asarray(values, dtype=float))]
    except (TypeError, ValueError):
        raise ValueError(f"{name} values must be numbers {AXIS_RANGES[name]} (got {values!r})") from None
    if len(vals) < 2:
        raise ValueError(f"{name} needs at least 2 values for a phase diagram axis (got {len(vals)})")
    if not all(math.isfinite(v) for v in vals):
        raise ValueError(f"{name} values must be finite numbers {AXIS_RANGES[name]}")
    if len(set(vals)) != len(vals):
        raise ValueError(f"{name} values must be distinct")
    if name in LOG_AXES and min(vals) <= 0:
        raise ValueError(f"{name} must be {AXIS_RANGES[name]} on its log axis (got {min(vals):g})")
    if name == "T":
        if any(v != round(v) or v < 1 for v in vals):
            raise ValueError(f"T must be {AXIS_RANGES['T']} (got {vals})")
        vals = [int(round(v)) for v in vals]
    return Axis(name, tuple(vals), "log" if name in LOG_AXES else "linear")


def _set(problem: Problem, name: str, value: Any) -> Problem:
    """``problem`` with axis parameter ``name`` set to ``value`` (validated by ``Problem``)."""
    if name == "kappa0":
        target = problem.target
        if "kappa0" not in {f.name for f in dataclasses.fields(target)}:
            raise ValueError(f"kappa0: the target {target.name!r} has no rank ratio kappa0 (use an MP target)")
        return problem.replace(target=dataclasses.replace(target, kappa0=float(value)))
    if name == "T":
        return problem.replace(T=int(value))
    return problem.replace(**{name: float(value)})


def _get(problem: Problem, name: str) -> Any:
    return float(problem.target.kappa0) if name == "kappa0" else getattr(problem, name)


def _chain_values(problem: Problem, name: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """``(param, values)`` of :func:`~singlehead.state_evolution.iter_theory_curve` for an axis."""
    if name == "kappa0":
        return "target", [_set(problem, name, v).target for v in values]
    return name, list(values)


# ---------------------------------------------------------------- regions
def classify(
    record: dict[str, Any], *, interp_tol: float = DEFAULT_INTERP_TOL, recovery_tol: float = DEFAULT_RECOVERY_TOL
) -> dict[str, bool]:
    """The region flags of one grid point's record (see the module docstring).

    Parameters
    ----------
    record : dict
        A record of ``PhaseDiagram.records``: the fields of ``Result.to_dict()`` plus ``replicon``
        and ``e0`` (the training error of the null predictor).
    interp_tol, recovery_tol : float
        ``interpolating``: ``train_error <= interp_tol * e0``; ``perfect_recovery``: noiseless and
        ``matrix_error <= recovery_tol * Q0``.

    Returns
    -------
    dict
        One bool per name of ``REGIONS`` but ``ordinary`` (several may hold at once), and
        ``region``, the first name of ``REGIONS`` that holds.
    """

    def num(key: str) -> float:
        v = record.get(key)
        return math.nan if v is None else float(v)

    noise = float(record["problem"]["noise"])
    flags = {
        "unconverged": not bool(record.get("converged", False)),
        "collapsed": bool(record.get("collapsed", False)),
        "rs_unstable": num("replicon") > 1.0,
        "perfect_recovery": noise == 0 and num("matrix_error") <= recovery_tol * num("Q0"),
        "interpolating": num("train_error") <= interp_tol * num("e0"),
    }
    flags["region"] = next((r for r in REGIONS[:-1] if flags[r]), "ordinary")
    return flags


# ---------------------------------------------------------------- threshold curves
@dataclass(frozen=True)
class ThresholdCurve:
    """A closed-form threshold as a curve of the diagram: ``on`` (an axis) as a function of ``along``.

    ``coordinates`` are values of the axis ``along``, ``values`` the threshold in the axis ``on``
    (``inf``/``nan`` where it does not exist). ``name``: ``alpha_interp``, ``alpha_perfect``,
    ``alpha_perfect_bayes`` or ``collapse_lam``; ``source`` the library function that gives it.
    """

    name: str
    on: str
    along: str
    coordinates: tuple[float, ...]
    values: tuple[float, ...]
    source: str


def _threshold_values(problem: Problem) -> dict[str, float]:
    """``alpha_interp``, ``alpha_perfect`` and ``alpha_perfect_bayes`` of ``problem`` (nan where none applies)."""
    from singlehead import thresholds as th

    out = {}
    for name, fn in (
        ("alpha_interp", th.interpolation_threshold),
        ("alpha_perfect", th.perfect_recovery_threshold),
        ("alpha_perfect_bayes", th.bayes_perfect_recovery_threshold),
    ):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out[name] = float(fn(problem))
        except _POINT_ERRORS:
            out[name] = math.nan
    return out


# ---------------------------------------------------------------- the result
@dataclass
class PhaseDiagram:
    """The state evolution on a grid of two parameters (returned by ``phase_diagram``).

    Attributes
    ----------
    problem : Problem
        The base problem (every parameter but the two axes).
    x, y : Axis
        The axes: ``name``, ``values``, ``scale``.
    records : list of dict
        One per grid point, row-major (``y`` outer, ``x`` inner): ``Result.to_dict()`` of the
        point's state evolution plus ``i`` (index in x), ``j`` (index in y), both coordinates by name,
        ``replicon`` and ``prox_jump_share`` (nan without the stability check).
    interp_tol, recovery_tol : float
        The region tolerances (``classify``).
    curves : dict of str to ThresholdCurve
        The closed-form threshold curves that apply to the two axes (``ThresholdCurve``).
    resumed : int
        How many points were read from the ``out`` file of an earlier run rather than computed.

    Examples
    --------
    >>> from singlehead import MPTarget, Problem, phase_diagram
    >>> diagram = phase_diagram(Problem(T=2, noise=0.5, target=MPTarget(0.5)), x=("alpha", [0.5, 1.0]),
    ...                         y=("lam", [1e-2, 10.0]), stability=False)
    >>> diagram.shape, diagram.grid("region")[1].tolist()   # (ny, nx); the lam = 10 row
    ((2, 2), ['collapsed', 'collapsed'])
    >>> c = diagram.curves["collapse_lam"]                   # lam_c as a function of alpha
    >>> c.along, c.values[0] < 10.0
    ('alpha', True)
    """

    problem: Problem
    x: Axis
    y: Axis
    records: list[dict[str, Any]]
    interp_tol: float = DEFAULT_INTERP_TOL
    recovery_tol: float = DEFAULT_RECOVERY_TOL
    curves: dict[str, ThresholdCurve] = field(default_factory=dict)
    resumed: int = 0

    @property
    def shape(self) -> tuple[int, int]:
        """``(len(y.values), len(x.values))``: the shape of ``grid`` arrays."""
        return len(self.y.values), len(self.x.values)

    def regions(self) -> list[dict[str, bool]]:
        """``classify`` of each record (row-major)."""
        return [
            classify({**r, "e0": _null_train_error(r)}, interp_tol=self.interp_tol, recovery_tol=self.recovery_tol)
            for r in self.records
        ]

    def grid(self, column: str) -> np.ndarray:
        """A column of ``to_frame`` as a ``(ny, nx)`` array (``grid("test_error")[j, i]``)."""
        frame = self.to_frame()
        return frame[column].to_numpy().reshape(self.shape)

    def rows(self) -> list[dict[str, Any]]:
        """The rows of ``to_frame`` as dicts (``point_row`` of each record)."""
        return [
            point_row(r, self.x.name, self.y.name, interp_tol=self.interp_tol, recovery_tol=self.recovery_tol)
            for r in self.records
        ]

    def to_frame(self) -> Any:
        """One row per grid point (pandas ``DataFrame``, row-major: ``y`` outer, ``x`` inner).

        Columns (``point_row``): both coordinates by name, ``test_error``, ``train_error``,
        ``matrix_error``, ``rank_fraction``, ``converged``, ``diagnosis``, ``replicon``, ``prox_jump_share``,
        ``collapse_lam``, ``e0``, ``alpha_interp``, ``alpha_perfect``, ``alpha_perfect_bayes``, ``region`` and
        one bool column per region flag (``is_<region>``), then the problem's other parameters (``channel``,
        ``T``, ``d``, ``student``, ``target`` and the target's parameters, ...).
        """
        import pandas as pd

        return pd.DataFrame(self.rows())

    def plot(self, ax: Any = None, *, column: str = "test_error") -> Any:
        """Heat map of ``column`` (log colour scale), region boundaries as contours, threshold curves, and
        unconverged points marked ``x``. Returns the matplotlib ``Axes``."""
        import matplotlib.pyplot as plt
        from matplotlib.colors import LogNorm

        if ax is None:
            _, ax = plt.subplots(figsize=(6.4, 4.8))
        xs, ys = np.asarray(self.x.values, float), np.asarray(self.y.values, float)
        z = np.array([_num(r.get(column)) for r in self.records], float).reshape(self.shape)
        pos = z[np.isfinite(z) & (z > 0)]
        norm = LogNorm(vmin=pos.min(), vmax=pos.max()) if pos.size and pos.max() > pos.min() else None
        mesh = ax.pcolormesh(xs, ys, np.where(z > 0, z, np.nan), shading="nearest", norm=norm, cmap="viridis")
        ax.figure.colorbar(mesh, ax=ax, label=column.replace("_", " "))
        flags = self.regions()
        colors = {"collapsed": "white", "rs_unstable": "red", "perfect_recovery": "cyan", "interpolating": "orange"}
        handles = []
        from matplotlib.lines import Line2D

        for name, color in colors.items():
            ind = np.array([f[name] for f in flags], float).reshape(self.shape)
            if 0 < ind.sum() < ind.size and min(self.shape) >= 2:
                ax.contour(xs, ys, ind, levels=[0.5], colors=color, linewidths=1.5)
                handles.append(Line2D([], [], color=color, lw=1.5, label=f"{name} boundary"))
        styles = {
            "alpha_interp": ("k", "--"),
            "alpha_perfect": ("k", ":"),
            "alpha_perfect_bayes": ("grey", ":"),
            "collapse_lam": ("magenta", "-."),
        }
        for name, c in self.curves.items():
            cx, cy = np.asarray(c.coordinates, float), np.asarray(c.values, float)
            ok = np.isfinite(cy)
            if not ok.any():
                continue
            px, py = (cx, cy) if c.on == self.y.name else (cy, cx)
            color, ls = styles.get(name, ("k", "-"))
            (line,) = ax.plot(px[ok], py[ok], color=color, ls=ls, lw=1.5, label=name)
            handles.append(line)
        un = [k for k, f in enumerate(flags) if f["unconverged"]]
        if un:
            h = ax.scatter(
                [self.records[k][self.x.name] for k in un],
                [self.records[k][self.y.name] for k in un],
                marker="x",
                color="k",
                s=18,
                label="unconverged",
            )
            handles.append(h)
        ax.set_xscale(self.x.scale)
        ax.set_yscale(self.y.scale)
        ax.set_xlim(xs.min(), xs.max())
        ax.set_ylim(ys.min(), ys.max())
        ax.set_xlabel(self.x.name)
        ax.set_ylabel(self.y.name)
        if handles:
            ax.legend(handles=handles, fontsize="small", loc="best", framealpha=0.7)
        return ax


def _num(v: Any) -> float:
    return math.nan if v is None else float(v)


def _flat_problem(problem: Problem) -> dict[str, Any]:
    """The problem's parameters as flat columns (the target's own parameters by name, ``target`` its name)."""
    spec = problem.to_dict()
    out = {k: v for k, v in spec.items() if k not in ("target", "channel", "student")}
    out["channel"], out["student"] = problem.channel.name, problem.student.name
    out["target"] = problem.target.name
    for k, v in problem.target.caption().items():
        out[k] = v
    return out


def point_row(
    record: dict[str, Any],
    x: str,
    y: str,
    *,
    interp_tol: float = DEFAULT_INTERP_TOL,
    recovery_tol: float = DEFAULT_RECOVERY_TOL,
) -> dict[str, Any]:
    """The flat row of one grid point (a row of ``PhaseDiagram.to_frame``, a line of ``singlehead phase --json``).

    ``record``: a point's record (``Result.to_dict()`` with ``replicon``, ``prox_jump_share`` and the
    coordinates ``x`` and ``y`` by name); ``e0`` and the closed-form thresholds are added here if missing
    (each computed once per problem they depend on).
    """
    rec = dict(record)
    if "e0" not in rec:
        rec["e0"] = _null_train_error(rec)
    problem = Problem.from_dict(rec["problem"])
    flags = classify(rec, interp_tol=interp_tol, recovery_tol=recovery_tol)
    row: dict[str, Any] = {x: rec[x], y: rec[y]}
    for key in ("test_error", "train_error", "matrix_error", "rank_fraction"):
        row[key] = _num(rec.get(key))
    row["converged"] = bool(rec.get("converged", False))
    row["diagnosis"] = rec.get("diagnosis")
    for key in ("replicon", "prox_jump_share", "collapse_lam", "e0"):
        row[key] = _num(rec.get(key))
    row.update(point_thresholds(problem))
    row["region"] = flags["region"]
    row.update({f"is_{r}": flags[r] for r in REGIONS[:-1]})
    row.update({k: v for k, v in _flat_problem(problem).items() if k not in (x, y)})
    return row


_THRESHOLDS: dict[str, dict[str, float]] = {}


def point_thresholds(problem: Problem) -> dict[str, float]:
    """``alpha_interp``, ``alpha_perfect``, ``alpha_perfect_bayes`` of ``problem`` (``singlehead.thresholds``).

    ``nan`` where none applies: several heads, a target without a rank ratio, and the perfect-recovery
    thresholds of noisy labels (a noiseless notion). They depend on neither ``alpha`` nor ``lam``: each is
    computed once per process for the other parameters.
    """
    if problem.multihead:
        return {"alpha_interp": math.nan, "alpha_perfect": math.nan, "alpha_perfect_bayes": math.nan}
    key = problem.replace(alpha=1.0, lam=0.01).key()
    if key not in _THRESHOLDS:
        _THRESHOLDS[key] = _threshold_values(problem)
    vals = dict(_THRESHOLDS[key])
    if problem.noise > 0:
        vals["alpha_perfect"] = vals["alpha_perfect_bayes"] = math.nan
    return vals


# ---------------------------------------------------------------- the cache (JSON lines)
def _point_key(problem: Problem, options: SEOptions, with_stability: bool) -> str:
    return stable_hash({"problem": problem.to_dict(), "options": options.flat(), "stability": with_stability})


def _read_cache(path: Path | None) -> dict[str, dict[str, Any]]:
    """The records of ``path`` by key; a line that does not parse (a write cut by an interrupt) is skipped."""
    if path is None or not path.exists():
        return {}
    out = {}
    with path.open() as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "key" in rec:
                out[rec["key"]] = rec
    return out


def _append(path: Path | None, record: dict[str, Any]) -> None:
    """Append one record as one line, under an exclusive lock (several worker processes write the same file)."""
    if path is None:
        return
    line = json.dumps(jsonable(record), allow_nan=False) + "\n"
    with path.open("a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            # a line cut by an interrupted write is closed first, so that this record stays a line of its own
            fh.seek(0, os.SEEK_END)
            if fh.tell() > 0:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    line = "\n" + line
            fh.write(line.encode())
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# ---------------------------------------------------------------- one row
@dataclass(frozen=True)
class _Row:
    """The points of one chain still to compute: the chain's fixed value, its points (index, value, key), and the
    record of the cached point just before each contiguous run (its warm start)."""

    problem: Problem  # the base problem with the fixed axis set
    along: str
    points: tuple[tuple[int, Any, str], ...]
    inits: tuple[dict[str, Any] | None, ...]  # one per contiguous run of points
    runs: tuple[tuple[int, int], ...]  # (start, stop) into points


def _point_record(problem: Problem, result: Result, key: str, with_stability: bool) -> dict[str, Any]:
    rec = result.to_dict()
    rec["key"] = key
    rep = jump = math.nan
    if with_stability and result.converged and not problem.multihead:
        try:
            s = rs_stability(problem, result)
            rep, jump = float(s.replicon), float(s.prox_jump_share)
        except _POINT_ERRORS:
            pass
    rec["replicon"], rec["prox_jump_share"] = rep, jump
    return rec


def _solve_row(
    row: _Row,
    options: SEOptions,
    with_stability: bool,
    out: str | None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(index along the chain, record)`` for each point of ``row``, each appended to ``out`` once solved."""
    path = Path(out) if out else None
    for (start, stop), init in zip(row.runs, row.inits):
        pts = row.points[start:stop]
        param, values = _chain_values(row.problem, row.along, [v for _, v, _ in pts])
        warm = Result.from_dict(init) if init is not None else None
        done = 0
        try:
            for r in iter_theory_curve(row.problem, values, param=param, options=options, init=warm):
                idx, v, key = pts[done]
                rec = _point_record(_set(row.problem, row.along, v), r, key, with_stability)
                _append(path, rec)
                yield idx, rec
                done += 1
        except _POINT_ERRORS:
            # the chain broke: the remaining points run each on its own, one bad point failing alone
            for idx, v, key in pts[done:]:
                p = _set(row.problem, row.along, v)
                try:
                    rec = _point_record(p, theory(p, options=options), key, with_stability)
                except _POINT_ERRORS as exc:
                    rec = {
                        "key": key,
                        "error": f"{type(exc).__name__}: {exc}",
                        "converged": False,
                        "problem": p.to_dict(),
                        "diagnosis": None,
                    }
                _append(path, rec)
                yield idx, rec


def _row_worker(
    row: _Row, options: SEOptions, with_stability: bool, out: str | None
) -> list[tuple[int, dict[str, Any]]]:
    return list(_solve_row(row, options, with_stability, out))


# ---------------------------------------------------------------- the entry point
def phase_diagram(
    problem: Problem,
    x: tuple[str, Iterable[float]] = ("alpha", np.geomspace(0.05, 3.0, 12)),
    y: tuple[str, Iterable[float]] = ("lam", np.geomspace(1e-4, 3.0, 10)),
    *,
    options: SEOptions | None = None,
    stability: bool = True,
    workers: int = 1,
    progress: bool = False,
    out: str | os.PathLike | None = None,
    interp_tol: float = DEFAULT_INTERP_TOL,
    recovery_tol: float = DEFAULT_RECOVERY_TOL,
    on_point: Any = None,
) -> PhaseDiagram:
    """The state evolution of ``problem`` on the grid ``x`` by ``y``, with regions and threshold curves.

    Parameters
    ----------
    problem : Problem
        The base problem; every parameter but the two axes is taken from it.
    x, y : (str, sequence of float)
        ``(name, values)`` of each axis, ``name`` one of ``AXES`` (``kappa0`` needs a target with a
        rank ratio ``kappa0``, e.g. ``MPTarget``), at least 2 distinct values, each valid for
        ``Problem``; the axes of ``LOG_AXES`` need values ``> 0``. ``x`` and ``y`` differ.
    options : SEOptions, optional
        Solver options of every point (default ``SEOptions()``).
    stability : bool
        Run the replica-symmetry check (:func:`~singlehead.state_evolution.stability`) at each
        converged point (region ``rs_unstable``; single-head problems only).
    workers : int
        Processes the rows run on (``>= 1``). Each worker process gets ``max(1, cores // workers)``
        BLAS/OpenMP threads, so threads x workers stays within the cores.
    progress : bool
        A progress bar on stderr (per point with one worker, per row with several), and the cost estimate
        of an untied or multi-head problem printed there too.
    out : path, optional
        JSON-lines file: each finished point is appended the moment it exists (its ``key`` hashes the
        point's full problem, the options and ``stability``); a rerun with the same ``out`` reads the
        points already there and computes only the others, each chain warm-started from its cached
        neighbour.
    interp_tol, recovery_tol : float
        The region tolerances of ``classify``.
    on_point : callable, optional
        Called as ``on_point(row)`` with each point's ``point_row`` (plus ``problem``, the point's
        ``Problem.to_dict()``) as it is solved or read from ``out`` (the command line prints them).

    Returns
    -------
    PhaseDiagram

    Raises
    ------
    ValueError
        An axis name not in ``AXES``, the same parameter twice, fewer than 2 values, a value outside
        the parameter's range (non-positive on a log axis), ``workers < 1``; or no point could be solved
        (the problem is outside the theory's reach: the first point's message). A point that fails alone
        is kept as an unconverged record with its ``error`` message.

    Notes
    -----
    Each row (fixed ``y``) is one warm-started chain along ``x`` (along ``y`` when ``x`` is ``T``).
    Untied and multi-head problems are costly: one point is timed first and the estimated total is
    issued as a warning (and printed with ``progress``) before the rest runs.

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead import MPTarget, Problem, phase_diagram
    >>> pd_ = phase_diagram(Problem(T=2, noise=0.5, target=MPTarget(0.5)), x=("alpha", [0.1, 1.0]),
    ...                     y=("lam", [1e-4, 10.0]), stability=False)
    >>> list(pd_.to_frame()["region"])
    ['interpolating', 'ordinary', 'collapsed', 'collapsed']
    """
    ax, ay = _axis(x, "x"), _axis(y, "y")
    if ax.name == ay.name:
        raise ValueError(f"x and y must be different parameters (both are {ax.name!r}); valid: {', '.join(AXES)}")
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1 (got {workers!r})")
    for tol_name, tol in (("interp_tol", interp_tol), ("recovery_tol", recovery_tol)):
        if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol >= 0):
            raise ValueError(f"{tol_name} must be a finite number >= 0 (got {tol!r})")
    options = options or SEOptions()
    # every point's problem, built (and validated) before anything runs
    grid = [[_set(_set(problem, ay.name, vy), ax.name, vx) for vx in ax.values] for vy in ay.values]
    keys = [[_point_key(p, options, stability) for p in row] for row in grid]
    path = Path(out) if out is not None else None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    cached = _read_cache(path)
    records: dict[tuple[int, int], dict[str, Any]] = {}
    for j, row in enumerate(keys):
        for i, k in enumerate(row):
            if k in cached and "error" not in cached[k]:
                records[(i, j)] = cached[k]
    resumed = len(records)
    # chains: along x, or along y when x is T
    along, fixed = (ay, ax) if ax.name == "T" else (ax, ay)
    rows = _rows(problem, along, fixed, keys, cached if path else {}, transpose=along is ay)
    total = len(ax.values) * len(ay.values)
    todo = sum(len(r.points) for r in rows)
    if on_point is not None:
        for j in range(len(ay.values)):
            for i in range(len(ax.values)):
                if (i, j) in records:
                    on_point(_row_out(records[(i, j)], ax, ay, i, j, interp_tol, recovery_tol))

    def take(row_index: int, idx: int, rec: dict[str, Any]) -> None:
        i, j = (idx, row_index) if along is ax else (row_index, idx)
        records[(i, j)] = rec
        if on_point is not None:
            on_point(_row_out(rec, ax, ay, i, j, interp_tol, recovery_tol))

    if todo and (not problem.student.symmetric or problem.multihead):
        _estimate_cost(
            rows,
            options,
            stability,
            out,
            todo,
            workers,
            progress,
            lambda f_i, idx, rec: take(f_i, idx, rec),
            fixed,
            ax,
            ay,
        )
        rows = _rows(
            problem, along, fixed, keys, {**cached, **{r["key"]: r for r in records.values()}}, transpose=along is ay
        )
        todo = sum(len(r.points) for r in rows)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total, initial=total - todo, desc=f"phase {ax.name} x {ay.name}", file=sys.stderr)

    try:
        out_s = str(path) if path is not None else None
        if workers == 1 or len([r for r in rows if r.points]) <= 1:
            for r_i, row in enumerate(rows):
                for idx, rec in _solve_row(row, options, stability, out_s):
                    take(_fixed_index(row, fixed, ax, ay), idx, rec)
                    if bar is not None:
                        bar.update(1)
        else:
            _run_parallel(rows, options, stability, out_s, workers, bar, take, fixed, ax, ay)
    finally:
        if bar is not None:
            bar.close()
    ordered = [_annotate(records[(i, j)], ax, ay, i, j) for j in range(len(ay.values)) for i in range(len(ax.values))]
    if all("error" in r for r in ordered):
        # nothing solved: the problem is outside the theory's reach (the first point's message says why)
        raise ValueError(str(ordered[0]["error"]).removeprefix("ValueError: "))
    diagram = PhaseDiagram(problem, ax, ay, ordered, interp_tol, recovery_tol)
    diagram.curves = _curves(diagram)
    diagram.resumed = resumed
    return diagram


def _fixed_index(row: _Row, fixed: Axis, ax: Axis, ay: Axis) -> int:
    return fixed.values.index(_get(row.problem, fixed.name))


def _rows(
    problem: Problem, along: Axis, fixed: Axis, keys: list[list[str]], cached: dict[str, Any], transpose: bool
) -> list[_Row]:
    """One :class:`_Row` per value of the fixed axis: the points not in ``cached``, in runs with their warm starts."""
    rows = []
    for f_i, fv in enumerate(fixed.values):
        base = _set(problem, fixed.name, fv)
        pts, inits, runs = [], [], []
        prev_cached = None
        start = None
        for a_i, av in enumerate(along.values):
            key = keys[a_i][f_i] if transpose else keys[f_i][a_i]
            rec = cached.get(key)
            if rec is not None and "error" not in rec:
                if start is not None:
                    runs.append((start, len(pts)))
                    start = None
                prev_cached = rec
                continue
            if start is None:
                start = len(pts)
                inits.append(prev_cached if prev_cached is not None and prev_cached.get("converged") else None)
            pts.append((a_i, av, key))
        if start is not None:
            runs.append((start, len(pts)))
        rows.append(_Row(base, along.name, tuple(pts), tuple(inits), tuple(runs)))
    return rows


def _row_out(
    rec: dict[str, Any], ax: Axis, ay: Axis, i: int, j: int, interp_tol: float, recovery_tol: float
) -> dict[str, Any]:
    rec = _annotate(rec, ax, ay, i, j)
    return {
        **point_row(rec, ax.name, ay.name, interp_tol=interp_tol, recovery_tol=recovery_tol),
        "i": i,
        "j": j,
        "problem": rec["problem"],
    }


def _annotate(rec: dict[str, Any], ax: Axis, ay: Axis, i: int, j: int) -> dict[str, Any]:
    return {**rec, "i": i, "j": j, ax.name: ax.values[i], ay.name: ay.values[j]}


def _null_train_error(rec: dict[str, Any]) -> float:
    """The training error of the null predictor ``h = 0``: the training error of the collapsed solution (``S = 0``,
    solved at a weight decay above the collapse point) of the point's problem; it depends on neither ``alpha``
    nor ``lam``."""
    if "e0" in rec:
        return _num(rec["e0"])
    try:
        p = Problem.from_dict(rec["problem"])
        p = p.replace(lam=max(float(rec.get("collapse_lam") or 0.0) * 2.0, p.lam, 1e3))
        return float(_null_solution(p).train_error)
    except (*_POINT_ERRORS, KeyError, TypeError):
        return math.nan


_NULL_CACHE: dict[str, Result] = {}


def _null_solution(problem: Problem) -> Result:
    key = stable_hash({**problem.to_dict(), "lam": None, "alpha": None})
    if key not in _NULL_CACHE:
        _NULL_CACHE[key] = theory(problem)
    return _NULL_CACHE[key]


def _curves(diagram: PhaseDiagram) -> dict[str, ThresholdCurve]:
    """The threshold curves that apply to the two axes: the alpha thresholds as functions of the other axis
    when ``alpha`` is one, the collapse ``lam`` as a function of the other axis when ``lam`` is one."""
    ax, ay = diagram.x, diagram.y
    curves: dict[str, ThresholdCurve] = {}
    rows = diagram.rows()
    names = {
        "alpha_interp": "singlehead.thresholds.interpolation_threshold",
        "alpha_perfect": "singlehead.thresholds.perfect_recovery_threshold",
        "alpha_perfect_bayes": "singlehead.thresholds.bayes_perfect_recovery_threshold",
    }
    for on, other in ((ax, ay), (ay, ax)):
        if on.name == "alpha":
            for name, src in names.items():
                vals = np.array([r[name] for r in rows], float).reshape(diagram.shape)
                # the thresholds do not depend on alpha: one value per coordinate of the other axis
                per = vals[:, 0] if on is ax else vals[0, :]
                if np.isfinite(per).any():
                    curves[name] = ThresholdCurve(
                        name, "alpha", other.name, tuple(other.values), tuple(map(float, per)), src
                    )
        if on.name == "lam":
            lc = np.array([_num(r.get("collapse_lam")) for r in diagram.records], float).reshape(diagram.shape)
            # collapse_lam does not depend on lam: the median over the lam values of each coordinate
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                per = np.nanmedian(lc, axis=0 if on is ay else 1)
            if np.isfinite(per).any():
                curves["collapse_lam"] = ThresholdCurve(
                    "collapse_lam",
                    "lam",
                    other.name,
                    tuple(other.values),
                    tuple(map(float, per)),
                    'Result.extras["collapse_lam"] (state_evolution.collapse_point)',
                )
    return curves


# ---------------------------------------------------------------- parallel rows and cost estimate
def _available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _run_parallel(
    rows: list[_Row],
    options: SEOptions,
    with_stability: bool,
    out: str | None,
    workers: int,
    bar: Any,
    take: Any,
    fixed: Axis,
    ax: Axis,
    ay: Axis,
) -> None:
    """The rows on ``workers`` loky processes of ``max(1, cores // workers)`` BLAS threads each."""
    from joblib import Parallel, delayed, parallel_config

    threads = max(1, _available_cores() // workers)
    work = [r for r in rows if r.points]
    with parallel_config(backend="loky", n_jobs=workers, inner_max_num_threads=threads):
        results = Parallel(return_as="generator_unordered")(
            delayed(_tagged_row)(k, row, options, with_stability, out) for k, row in enumerate(work)
        )
        for k, recs in results:
            f_i = _fixed_index(work[k], fixed, ax, ay)
            for idx, rec in recs:
                take(f_i, idx, rec)
                if bar is not None:
                    bar.update(1)


def _tagged_row(
    k: int, row: _Row, options: SEOptions, with_stability: bool, out: str | None
) -> tuple[int, list[tuple[int, dict[str, Any]]]]:
    return k, _row_worker(row, options, with_stability, out)


def _estimate_cost(
    rows: list[_Row],
    options: SEOptions,
    with_stability: bool,
    out: str | None,
    todo: int,
    workers: int,
    progress: bool,
    take: Any,
    fixed: Axis,
    ax: Axis,
    ay: Axis,
) -> None:
    """Time the first point still to compute (kept: it is the cold start of its chain), then warn with the estimate."""
    row = next(r for r in rows if r.points)
    first = _Row(row.problem, row.along, row.points[:1], row.inits[:1], ((0, 1),))
    t0 = time.perf_counter()
    for idx, rec in _solve_row(first, options, with_stability, out):
        if "error" in rec:  # the first point failed: the others would too, refuse before the run
            raise ValueError(str(rec["error"]).removeprefix("ValueError: "))
        take(_fixed_index(row, fixed, ax, ay), idx, rec)
    dt = time.perf_counter() - t0
    est = dt * (todo - 1) / min(workers, max(1, len([r for r in rows if r.points])))
    kind = "multi-head" if row.problem.multihead else f"{row.problem.student.name} student"
    msg = (
        f"phase_diagram: {todo} points of a {kind} problem; one point took {dt:.1f} s, "
        f"so the rest takes about {_human(est)} on {workers} worker(s) (cold-start estimate; warm starts "
        "are usually faster)"
    )
    warnings.warn(msg, stacklevel=3)
    if progress:
        print(msg, file=sys.stderr)


def _human(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
