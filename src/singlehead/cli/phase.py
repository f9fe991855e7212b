"""``singlehead phase``: the phase diagram of a problem over two parameters.

A thin wrapper of :func:`singlehead.analysis.phase.phase_diagram`: ``--x NAME=VALUES`` and
``--y NAME=VALUES`` take the value grammar of ``singlehead theory --alpha`` (a number list, a range
``start:stop:num`` or ``log:start:stop:num``), the problem options are those of ``singlehead theory``
(an axis parameter's option is overridden by the axis); one JSON object per grid point (``--json``)
or a readable line, a progress bar on stderr.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from singlehead.analysis.phase import AXES, DEFAULT_INTERP_TOL, DEFAULT_RECOVERY_TOL, phase_diagram
from singlehead.cli.common import (
    dumps,
    head_options,
    parse_floats,
    pop_head_options,
    pop_problem_options,
    problem_options,
    problems_from_options,
)
from singlehead.state_evolution import SEOptions


def parse_axis(text: str, which: str) -> tuple[str, list[float]]:
    """``"alpha=log:0.05:3:40"`` -> ``("alpha", [...])``; the name one of :data:`~singlehead.analysis.phase.AXES`."""
    name, sep, values = str(text).partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(f"{which} must be NAME=VALUES with NAME one of {', '.join(AXES)} (got {text!r})")
    if name not in AXES:
        raise ValueError(f"{which}: parameter {name!r} cannot span a phase diagram; valid: {', '.join(AXES)}")
    return name, parse_floats(values, name)


@click.command()
@click.option(
    "--x",
    "x_axis",
    required=True,
    metavar="NAME=VALUES",
    help=f"Horizontal axis: NAME one of {', '.join(AXES)}; VALUES 'a,b,c', 'start:stop:num' or "
    "'log:start:stop:num' (at least 2).",
)
@click.option("--y", "y_axis", required=True, metavar="NAME=VALUES", help="Vertical axis, as --x (another parameter).")
@problem_options
@head_options
@click.option("--tol", type=float, default=1e-6, show_default=True, help="Fixed-point residual target.")
@click.option(
    "--n-points",
    type=int,
    default=None,
    help="Sobol nodes per scramble (4 scrambles); default 2048, 4096 for the untied student.",
)
@click.option("--node-seed", type=int, default=0, show_default=True, help="Seed of the quadrature nodes.")
@click.option(
    "--stability/--no-stability",
    default=True,
    show_default=True,
    help="Replica-symmetry check at each converged point (region rs_unstable).",
)
@click.option(
    "--interp-tol",
    type=float,
    default=DEFAULT_INTERP_TOL,
    show_default=True,
    help="Region interpolating: train_error <= interp-tol x the null predictor's train error.",
)
@click.option(
    "--recovery-tol",
    type=float,
    default=DEFAULT_RECOVERY_TOL,
    show_default=True,
    help="Region perfect_recovery (noiseless): matrix_error <= recovery-tol x Q0.",
)
@click.option(
    "--workers",
    type=int,
    default=1,
    show_default=True,
    help="Processes the grid rows run on (each with cores // workers BLAS threads).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="JSON-lines cache: each finished point is appended; a rerun resumes from it.",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Save the diagram (heat map, region boundaries, threshold curves) to this image file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per grid point.")
def phase(**kwargs: Any) -> None:
    """The phase diagram over two parameters: test error, regions and closed-form thresholds on a grid."""
    x = parse_axis(kwargs.pop("x_axis"), "x")
    y = parse_axis(kwargs.pop("y_axis"), "y")
    axes = {x[0], y[0]}
    opts = pop_problem_options(kwargs)
    # the base problem holds one value of each parameter; an axis parameter's option is overridden
    if "alpha" in axes:
        opts["alpha"] = "1.0"
    if "T" in axes:
        opts["T"] = int(x[1][0] if x[0] == "T" else y[1][0])
    if "noise" in axes:
        opts["noise"] = 0.0
    problems = problems_from_options(**opts, **pop_head_options(kwargs))
    if len(problems) != 1:
        raise ValueError("alpha: give one value with --alpha, or make alpha an axis (--x alpha=... or --y alpha=...)")
    options = SEOptions(tol=kwargs["tol"], n_points=kwargs["n_points"], node_seed=kwargs["node_seed"])
    as_json = kwargs["as_json"]

    def show(row: dict[str, Any]) -> None:
        if as_json:
            click.echo(dumps(row))
        else:
            click.echo(
                f"{x[0]}={row[x[0]]:.4g} {y[0]}={row[y[0]]:.4g}: test_error={row['test_error']:.5g} "
                f"train_error={row['train_error']:.5g} region={row['region']} converged={row['converged']}"
            )

    diagram = phase_diagram(
        problems[0],
        x=x,
        y=y,
        options=options,
        stability=kwargs["stability"],
        workers=kwargs["workers"],
        progress=True,
        out=kwargs["out"],
        interp_tol=kwargs["interp_tol"],
        recovery_tol=kwargs["recovery_tol"],
        on_point=show,
    )
    if diagram.resumed:
        total = diagram.shape[0] * diagram.shape[1]
        click.echo(f"resumed: {diagram.resumed} of {total} points were already in {kwargs['out']}", err=True)
    if kwargs["plot_path"]:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ax = diagram.plot()
        ax.figure.savefig(kwargs["plot_path"], dpi=150, bbox_inches="tight")
        plt.close(ax.figure)
        click.echo(f"wrote {kwargs['plot_path']}", err=True)
    sys.stdout.flush()
