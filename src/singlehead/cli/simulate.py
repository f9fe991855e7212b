"""``singlehead simulate``: ERM simulations of tied attention, one JSON line per (alpha, seed)."""

from __future__ import annotations

from typing import Any

import click

from singlehead.cli.common import (
    head_options,
    instance_run_options,
    instance_seeds,
    pop_head_options,
    pop_problem_options,
    problem_options,
    problems_from_options,
    run_sweep,
)
from singlehead.runs import Job
from singlehead.runs.threads import configure
from singlehead.sim.simulation import TrainOptions, resolve_device


@click.command()
@problem_options
@head_options
@instance_run_options
@click.option("--optimizer", type=click.Choice(["lbfgs", "adam"]), default="lbfgs", show_default=True)
@click.option("--device", default="cpu", show_default=True, help="cpu or cuda[:N].")
@click.option(
    "--precision",
    type=click.Choice(["float64", "float32", "mixed"]),
    default=None,
    help="float64, float32, or mixed (float32 training, float64 polish). Default: mixed on CPU, float32 on GPU.",
)
@click.option("--max-steps", type=int, default=None, help="Optimiser step cap (default: 5000 L-BFGS, 20000 Adam).")
@click.option(
    "--tol",
    type=float,
    default=None,
    help="Relative objective change that stops the optimiser (default 1e-9 L-BFGS, 1e-7 Adam).",
)
@click.option("--lr", type=float, default=0.1, show_default=True, help="Adam learning rate.")
@click.option("--batch-size", type=int, default=None, help="Stream the data to the device in chunks of this size.")
@click.option(
    "--record-every",
    type=int,
    default=None,
    help="Record train/test error and the top eigenvalues of S every this many optimiser steps "
    "(JSON field 'trajectory').",
)
@click.option(
    "--n-starts",
    type=int,
    default=1,
    show_default=True,
    help="Initialisations per instance; the fit with the lowest training objective is kept (non-convex ERM).",
)
@click.option(
    "--threads", type=int, default=None, help="BLAS/torch threads (default: all cores; see singlehead.runs.threads)."
)
def simulate(**kwargs: Any) -> None:
    """Train students by ERM and print test/train/matrix errors and the learned spectrum."""
    problems = problems_from_options(**pop_problem_options(kwargs), **pop_head_options(kwargs))
    seeds = instance_seeds(kwargs, problems)
    dev = resolve_device(kwargs["device"])
    options = TrainOptions(
        optimizer=kwargs["optimizer"],
        precision=kwargs["precision"],
        max_steps=kwargs["max_steps"],
        tol=kwargs["tol"],
        lr=kwargs["lr"],
        batch_size=kwargs["batch_size"],
        n_test=kwargs["n_test"],
        record_every=kwargs["record_every"],
        n_starts=kwargs["n_starts"],
    )  # validates
    configure(workers=1, threads=kwargs["threads"])
    # everything that changes a result is in the settings, hence in the cache key (device and precision too)
    settings = {**options.key_fields(dev), "device": str(dev)}
    jobs = [Job("simulation", p, s, tuple(sorted(settings.items()))) for p in problems for s in seeds]

    def describe(rec: dict[str, Any]) -> str:
        c = rec["problem"]
        return (
            f"alpha={c['alpha']:.4g} seed={rec['seed']}: test_error={rec['test_error']:.5f} "
            f"train_error={rec['train_error']:.5f} matrix_error={rec['matrix_error']:.5f} "
            f"rank={rec['rank']}/{c['d']} ({rec['runtime_s']:.1f} s)"
        )

    run_sweep(jobs, kwargs["out"], kwargs["as_json"], describe, "simulate")
