"""``singlehead spectrum``: the law of ``ETA * ReLU(mu0 ⊞ SC(V) - EPS)`` (see the docs page Theory, section '10.
Spectrum of the learned matrix')."""

from __future__ import annotations

import math

import click

from singlehead.cli.common import dumps, parse_floats
from singlehead.model.problem import MPTarget, PowerLawTarget
from singlehead.model.targets import power_law_eigenvalues
from singlehead.numerics.spectra import (
    DiscreteLaw,
    MarchenkoPastur,
    SpikedLaw,
    learned_spectrum_law,
    plot_learned_spectrum,
)


def target_law(
    target: str,
    kappa0: float | None,
    gamma: float | None,
    d: int | None,
    normalisation: str,
    eigenvalues: str | None,
    spikes: str | None,
):
    """The spectral law mu0 named by the CLI options (validated; ValueError names the option)."""
    if target == "mp":
        k0 = MPTarget(0.5 if kappa0 is None else kappa0).kappa0  # validates kappa0 > 0
        law = MarchenkoPastur(k0)
    elif target == "power-law":
        if gamma is None or d is None:
            raise ValueError("target power-law needs --gamma (> 0.5) and --d (>= 2)")
        PowerLawTarget(gamma=gamma, normalisation=normalisation)
        if d < 2:
            raise ValueError(f"d must be an integer >= 2 (got {d})")
        law = DiscreteLaw(power_law_eigenvalues(gamma, d, normalisation))
    elif target == "custom":
        if eigenvalues is None:
            raise ValueError("target custom needs --eigenvalues 'e1,e2,...'")
        ev = parse_floats(eigenvalues, "eigenvalues")
        if min(ev) < 0:
            raise ValueError("eigenvalues must be >= 0 (the target is PSD)")
        law = DiscreteLaw(ev)
    else:  # pragma: no cover - click.Choice guards this
        raise ValueError(f"target must be mp, power-law or custom (got {target!r})")
    if spikes:
        s = parse_floats(spikes, "spikes")
        if d is None:
            raise ValueError("spikes need --d (each spike carries mass 1/d)")
        law = SpikedLaw(law, tuple(s), 1.0 / d)
    return law


@click.command()
@click.option("--target", type=click.Choice(["mp", "power-law", "custom"]), default="mp", show_default=True)
@click.option("--kappa0", type=float, default=None, help="MP rank ratio p0/d > 0 (default 0.5).")
@click.option("--gamma", type=float, default=None, help="Power-law exponent (> 0.5).")
@click.option("--d", type=int, default=None, help="Dimension for power-law targets and spikes.")
@click.option("--normalisation", type=click.Choice(["sqrt_d", "unit_q0"]), default="sqrt_d", show_default=True)
@click.option("--eigenvalues", default=None, help="Custom spectrum, comma list.")
@click.option("--spikes", default=None, help="Isolated eigenvalues added to the target (comma list; need --d).")
@click.option("--variance", type=float, required=True, help="Semicircle variance V = delta^2 (>= 0).")
@click.option("--threshold", type=float, default=0.0, show_default=True, help="Soft threshold EPS (>= 0).")
@click.option("--scale", type=float, default=1.0, show_default=True, help="Scale ETA (> 0).")
@click.option("--rank-cap", type=float, default=None, help="Keep the top kappa*d eigenvalues (kappa in (0, 1]).")
@click.option("--grid-size", type=int, default=512, show_default=True)
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Write a figure (PNG/PDF).")
@click.option("--json", "as_json", is_flag=True, help="Print the law as one JSON object.")
def spectrum(
    target,
    kappa0,
    gamma,
    d,
    normalisation,
    eigenvalues,
    spikes,
    variance,
    threshold,
    scale,
    rank_cap,
    grid_size,
    plot,
    as_json,
) -> None:
    """Density, zero atom, edges and outliers of the learned-spectrum law."""
    if not (math.isfinite(variance) and variance >= 0):
        raise ValueError(f"variance must be >= 0 (got {variance})")
    if not (math.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"threshold must be >= 0 (got {threshold})")
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be > 0 (got {scale})")
    if rank_cap is not None and not (0 < rank_cap <= 1):
        raise ValueError(f"rank-cap must be in (0, 1] (got {rank_cap})")
    if grid_size < 16:
        raise ValueError(f"grid-size must be an integer >= 16 (got {grid_size})")
    law = target_law(target, kappa0, gamma, d, normalisation, eigenvalues, spikes)
    res = learned_spectrum_law(law, variance, threshold=threshold, scale=scale, rank_cap=rank_cap, grid_size=grid_size)
    if plot:
        plot_learned_spectrum(res, plot)
    if as_json:
        click.echo(dumps(res.to_dict()))
    else:
        click.echo(
            f"atom at zero {res.atom_at_zero:.6g}; rank fraction {res.rank_fraction:.6g}; bulks "
            + ", ".join(f"[{a:.4g}, {b:.4g}]" for a, b in res.edges)
            + (f"; outliers {[round(o['position'], 6) for o in res.outliers]}" if res.outliers else "")
        )
        if plot:
            click.echo(f"figure: {plot}")
