"""``singlehead simulate``: ERM simulations of tied attention, one JSON line per (alpha, seed)."""

from __future__ import annotations

from typing import Any

import click

from . import cli
from .common import instance_run_options, instance_seeds, pop_problem_options, problem_options, problems_from_options, run_sweep


@cli.command()
@problem_options
@instance_run_options
@click.option("--optimizer", type=click.Choice(["lbfgs", "adam"]), default="lbfgs", show_default=True)
@click.option("--device", default="cpu", show_default=True, help="cpu or cuda[:N].")
@click.option("--max-steps", type=int, default=None, help="Optimiser step cap (default: 5000 L-BFGS, 20000 Adam).")
@click.option("--batch-size", type=int, default=None, help="Stream the data to the device in chunks of this size.")
def simulate(**kwargs: Any) -> None:
    """Train students by ERM and print test/train/matrix errors and the learned spectrum."""
    from ..experiments import Job
    from ..simulation import default_dtype, resolve_device

    problems = problems_from_options(**pop_problem_options(kwargs))
    seeds = instance_seeds(kwargs)
    dev = resolve_device(kwargs["device"])
    if kwargs["max_steps"] is not None and kwargs["max_steps"] < 1:
        raise ValueError(f"max-steps must be an integer >= 1 (got {kwargs['max_steps']})")
    if kwargs["batch_size"] is not None and kwargs["batch_size"] < 1:
        raise ValueError(f"batch-size must be an integer >= 1 (got {kwargs['batch_size']})")
    # everything that changes a result is in the settings, hence in the cache key (device and dtype too)
    settings = {"optimizer": kwargs["optimizer"], "device": str(dev), "dtype": str(default_dtype(dev)).replace("torch.", ""),
                "n_test": kwargs["n_test"], "max_steps": kwargs["max_steps"], "batch_size": kwargs["batch_size"]}
    jobs = [Job("simulation", p, s, tuple(sorted(settings.items()))) for p in problems for s in seeds]

    def describe(rec: dict[str, Any]) -> str:
        c = rec["problem"]
        return (f"alpha={c['alpha']:.4g} seed={rec['seed']}: test_error={rec['test_error']:.5f} "
                f"train_error={rec['train_error']:.5f} matrix_error={rec['matrix_error']:.5f} "
                f"rank={rec['rank']}/{c['d']} ({rec['runtime_s']:.1f} s)")

    run_sweep(jobs, kwargs["out"], kwargs["as_json"], describe, "simulate")
