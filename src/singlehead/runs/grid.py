"""Declarative sweeps: a grid specification expanded into hashable jobs.

A grid is a mapping (Python dict, TOML or YAML file)::

    route = "simulation"            # or "theory", "bayes", ... (see singlehead.runs.runner.ROUTES)
    seeds = [0, 1, 2, 3]            # simulations only; ignored by deterministic routes
    [base]                          # Problem fields shared by every job
    T = 2
    noise = 0.5
    target = {kind = "mp", kappa0 = 0.5}
    [sweep]                         # Cartesian product over these Problem fields
    alpha = [0.1, 0.5, 1.0]
    kappa = [0.75, 1.0]
    [settings]                      # route options (optimizer, n_test, device, ...)
    optimizer = "lbfgs"

Each job's ``key`` hashes the numerics version, the route, the full Problem, the seed and the
settings (``singlehead.runs.cache.result_key``), so a cache indexed by it survives
interruption and reordering, and no upgrade that changes the numbers reads an old entry.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from singlehead.model.problem import Problem, target_from_dict
from singlehead.model.targets import MPTarget, PowerLawTarget, UntiedMPTarget
from singlehead.runs import Job

DETERMINISTIC_ROUTES = ("theory", "bayes", "thresholds")


def load_grid(path: str | Path) -> dict[str, Any]:
    """Read a grid from a ``.toml``, ``.yaml``/``.yml`` or ``.json`` file.

    The file holds the mapping that :func:`expand_grid` takes (sections ``route``, ``seeds``,
    ``base``, ``sweep``, ``settings``, ``tags``).

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from singlehead.runs import expand_grid, load_grid
    >>> path = Path(tempfile.mkdtemp()) / "grid.json"
    >>> _ = path.write_text(json.dumps({"route": "theory", "sweep": {"alpha": [0.5, 1.0]}}))
    >>> len(expand_grid(load_grid(path)))
    2
    """
    path = Path(path)
    if path.suffix not in (".toml", ".yaml", ".yml", ".json"):
        raise ValueError(f"grid file must end in .toml, .yaml, .yml or .json (got {path.name!r})")
    if not path.is_file():
        raise ValueError(f"grid file {str(path)!r} does not exist")
    text = path.read_text()
    if path.suffix == ".toml":
        import tomllib  # imported here, like yaml: most runs read no grid file

        return tomllib.loads(text)
    if path.suffix in (".yaml", ".yml"):
        import yaml  # only YAML grids need it

        return yaml.safe_load(text)
    if path.suffix == ".json":
        return json.loads(text)
    raise ValueError(f"grid file must end in .toml, .yaml, .yml or .json (got {path.name!r})")


def expand_grid(spec: Mapping[str, Any]) -> list[Job]:
    """Expand a grid specification into jobs (Cartesian product of ``sweep`` x ``seeds``).

    Sections: ``route``, ``seeds`` (a count or a list; ignored by the deterministic routes),
    ``base`` (Problem fields), ``sweep`` (lists of Problem field values), ``settings`` (route options)
    and ``tags``; an unknown section or field raises ValueError naming it.

    Examples
    --------
    >>> from singlehead.runs import expand_grid
    >>> jobs = expand_grid({"route": "simulation", "seeds": 2, "base": {"d": 50, "T": 2},
    ...                     "sweep": {"alpha": [0.5, 1.0]}, "settings": {"optimizer": "lbfgs"}})
    >>> [(job.problem.alpha, job.seed) for job in jobs]
    [(0.5, 0), (0.5, 1), (1.0, 0), (1.0, 1)]
    """
    unknown = set(spec) - {"route", "seeds", "base", "sweep", "settings", "tags"}
    if unknown:
        raise ValueError(f"grid: unknown sections {sorted(unknown)}; valid: route, seeds, base, sweep, settings, tags")
    route = spec.get("route", "simulation")
    base = dict(spec.get("base", {}))
    sweep = dict(spec.get("sweep", {}))
    settings = tuple(sorted(dict(spec.get("settings", {})).items()))
    tags = tuple(sorted(dict(spec.get("tags", {})).items()))
    fields = set(Problem.__dataclass_fields__)
    for name in list(base) + list(sweep):
        if name not in fields:
            raise ValueError(f"grid: {name!r} is not a Problem field; valid: {sorted(fields)}")
    for name, values in sweep.items():
        if not isinstance(values, (list, tuple)) or not values:
            raise ValueError(f"grid: sweep.{name} must be a non-empty list (got {values!r})")
    seeds: list[int | None]
    if route in DETERMINISTIC_ROUTES:
        seeds = [None]
    else:
        raw = spec.get("seeds", [0])
        seeds = list(range(raw)) if isinstance(raw, int) else [int(s) for s in raw]
        if not seeds:
            raise ValueError("grid: seeds must be a positive count or a non-empty list")
    names = list(sweep)
    jobs = []
    for combo in itertools.product(*(sweep[k] for k in names)) if names else [()]:
        params = {**base, **dict(zip(names, combo))}
        if isinstance(params.get("target"), Mapping):
            params["target"] = target_from_dict(dict(params["target"]))
        problem = Problem(**params)
        for seed in seeds:
            jobs.append(Job(route, problem, seed, settings, tags))
    return jobs


# the order of the draws of random_problems: changing these tuples changes every grid
_GRID_CHANNELS = ("seq2lab", "seq2seq", "linear")
_GRID_STUDENTS = ("factorized", "direct")


def random_problems(n: int, seed: int = 0) -> list[Problem]:
    """``n`` random valid problems spanning the state evolution's domain (robustness grids).

    Channel (``seq2lab``, ``seq2seq``, ``linear``) x ``T`` in {1, 2, 3} (softmax channels need
    ``T >= 2``) x student (factorized with rank cap ``kappa`` in {1, 0.5, 0.2}, or direct) x
    ``beta0/beta`` in {1, 2, 1/2} x ``lam`` log-uniform in ``[1e-5, 5]`` x ``alpha`` log-uniform
    in ``[3e-3, 20]`` x label noise ``Delta`` in {0, 0.1, 0.5, 1}, Marchenko--Pastur targets
    ``kappa0`` in {0.25, 0.5, 1}; ``d`` is the ``Problem`` default.

    Parameters
    ----------
    n : int
        Number of problems (>= 0).
    seed : int
        Seed of the draws. The grid is a deterministic function of ``(n, seed)``, and the first
        ``n`` problems of a longer grid with the same seed are this grid: tests, benchmarks and
        studies pin their grids by seed, so the order of the draws must not change.

    Returns
    -------
    list of Problem

    Examples
    --------
    >>> from singlehead.runs import random_problems
    >>> grid = random_problems(3, seed=0)
    >>> len(grid), grid == random_problems(3, seed=0), grid[:2] == random_problems(2, seed=0)
    (3, True, True)
    """
    if int(n) < 0:
        raise ValueError(f"n must be >= 0 (got {n})")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(int(n)):
        channel = str(rng.choice(_GRID_CHANNELS))
        T = int(rng.choice([1, 2, 3])) if channel == "linear" else int(rng.choice([2, 3]))
        student = str(rng.choice(_GRID_STUDENTS))
        kappa = float(rng.choice([1.0, 0.5, 0.2])) if student == "factorized" else 1.0
        ratio = float(rng.choice([1.0, 2.0, 0.5]))
        beta0, beta = (1.0, 1.0) if channel == "linear" else (1.0, 1.0 / ratio)
        out.append(
            Problem(
                T=T,
                channel=channel,
                student=student,
                kappa=kappa,
                beta=beta,
                beta0=beta0,
                lam=float(10 ** rng.uniform(-5, math.log10(5))),
                alpha=float(10 ** rng.uniform(math.log10(3e-3), math.log10(20))),
                noise=float(rng.choice([0.0, 0.1, 0.5, 1.0])),
                target=MPTarget(float(rng.choice([0.25, 0.5, 1.0]))),
            )
        )
    return out


def random_problems_wide(n: int, seed: int = 0, *, untied_share: float = 0.04) -> list[Problem]:
    """``n`` random valid problems over a wider domain than :func:`random_problems` (robustness grids).

    Channel (``seq2lab``, ``seq2seq``, ``linear``) x ``T`` in {1, 2, 3} (softmax channels need
    ``T >= 2``) x student (factorized with rank cap ``kappa`` in {1, 0.5, 0.3}, or direct; a share
    ``untied_share`` of the softmax problems has the ``untied`` student at ``T = 2`` instead) x
    ``beta0`` in {1, 2} with ``beta0/beta`` in {1, 2, 1/2} (softmax channels) x ``lam`` log-uniform
    in ``[1e-5, 5]`` x ``alpha`` log-uniform in ``[3e-3, 20]`` x label noise ``Delta`` in
    {0, 0.1, 0.5, 1, 2} x target: Marchenko--Pastur (``kappa0`` in {0.25, 0.5, 1}) or power law
    (``gamma`` in {0.75, 1.25, 2}), half each; an untied student's target is an MP or an untied MP
    teacher. ``d`` is the ``Problem`` default.

    Parameters
    ----------
    n : int
        Number of problems (>= 0).
    seed : int
        Seed of the draws; as for :func:`random_problems`, the grid is a deterministic function of
        ``(n, seed, untied_share)`` and a shorter grid is a prefix of a longer one.
    untied_share : float
        Probability, in ``[0, 1]``, that a softmax problem has the untied student.

    Returns
    -------
    list of Problem

    Examples
    --------
    >>> from singlehead.runs.grid import random_problems_wide
    >>> grid = random_problems_wide(4, seed=1)
    >>> len(grid), grid[:3] == random_problems_wide(3, seed=1)
    (4, True)
    """
    if int(n) < 0:
        raise ValueError(f"n must be >= 0 (got {n})")
    if not 0.0 <= untied_share <= 1.0:
        raise ValueError(f"untied_share must be in [0, 1] (got {untied_share})")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(int(n)):
        # every draw is made whatever the branch, so one problem's draws never shift the next one's
        channel = str(rng.choice(_GRID_CHANNELS))
        T_draw = int(rng.choice([1, 2, 3]))
        student = str(rng.choice(_GRID_STUDENTS))
        kappa = float(rng.choice([1.0, 0.5, 0.3]))
        beta0 = float(rng.choice([1.0, 2.0]))
        ratio = float(rng.choice([1.0, 2.0, 0.5]))
        lam = float(10 ** rng.uniform(-5, math.log10(5)))
        alpha = float(10 ** rng.uniform(math.log10(3e-3), math.log10(20)))
        noise = float(rng.choice([0.0, 0.1, 0.5, 1.0, 2.0]))
        power_law = bool(rng.random() < 0.5)
        kappa0 = float(rng.choice([0.25, 0.5, 1.0]))
        gamma = float(rng.choice([0.75, 1.25, 2.0]))
        untied = bool(rng.random() < untied_share) and channel != "linear"
        untied_teacher = bool(rng.random() < 0.5)
        T = T_draw if channel == "linear" else max(T_draw, 2)
        beta, beta0 = (1.0, 1.0) if channel == "linear" else (beta0 / ratio, beta0)
        if untied:
            target = UntiedMPTarget(kappa0) if untied_teacher else MPTarget(kappa0)
            out.append(
                Problem(
                    T=2,
                    channel=channel,
                    student="untied",
                    kappa=1.0,
                    beta=beta,
                    beta0=beta0,
                    lam=lam,
                    alpha=alpha,
                    noise=noise,
                    target=target,
                )
            )
            continue
        if student != "factorized":
            kappa = 1.0
        target = PowerLawTarget(gamma) if power_law else MPTarget(kappa0)
        out.append(
            Problem(
                T=T,
                channel=channel,
                student=student,
                kappa=kappa,
                beta=beta,
                beta0=beta0,
                lam=lam,
                alpha=alpha,
                noise=noise,
                target=target,
            )
        )
    return out
