"""The ``singlehead`` command line. Thin: parses options and delegates to the library.

Every invalid input ends with a one-line ``error: ...`` message on stderr naming the
parameter and its valid range, and exit status 2 — never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import click

from singlehead import __version__

# name -> (module of singlehead.cli, function, one-line help). A command's module is imported when the
# command runs (or its --help is asked), so `singlehead --help` and a theory point load no simulation code;
# tests/cli/test_cli.py checks that each help here begins the command's own docstring.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "simulate": (
        "simulate",
        "simulate",
        "Train students by ERM and print test/train/matrix errors and the learned spectrum.",
    ),
    "theory": (
        "theory",
        "theory",
        "State-evolution prediction of the ERM minimiser, warm-started along the alpha grid.",
    ),
    "bayes": (
        "theory",
        "bayes",
        "Bayes-optimal MMSE and test error (posterior-mean prediction) per alpha (no student options).",
    ),
    "tune": (
        "tune",
        "tune",
        "The weight decay lam of lowest state-evolution test error at each alpha"
        " (or the alpha reaching --target-error).",
    ),
    "phase": (
        "phase",
        "phase",
        "The phase diagram over two parameters: test error, regions and closed-form thresholds on a grid.",
    ),
    "thresholds": ("theory", "thresholds", "Interpolation and perfect-recovery thresholds (in alpha, at lam -> 0+)."),
    "spectrum": ("spectrum", "spectrum", "Density, zero atom, edges and outliers of the learned-spectrum law."),
    "amp": (
        "amp",
        "amp",
        "Run GAMP on sampled instances and print the same metrics as `simulate`, plus iterations and history.",
    ),
    "spectrum-theory": (
        "analysis",
        "spectrum_theory",
        "Predicted spectrum of the learned S (state evolution, then the law in the docs page Theory, "
        "section '10. Spectrum of the learned matrix').",
    ),
    "decompose": (
        "analysis",
        "decompose_cmd",
        "Test error = e0 + c_r (E_over + E_under + E_approx + E_mismatch), four parts >= 0 "
        "(see the docs page Theory, section '11. Error decomposition').",
    ),
    "scaling": (
        "analysis",
        "scaling_cmd",
        "Excess-error curve over n for a power-law target: regimes by mechanism, local and fitted exponents.",
    ),
    "reproduce": (
        "reproduce",
        "reproduce",
        "Reproduce the paper's results: theory as lines, simulations as points, one HTML report.",
    ),
    "docs": ("docs", "docs", "Build the documentation with its executed gallery and open it (needs the docs extra)."),
    "explore": (
        "explore",
        "explore",
        "Open the theory explorer: error curves, thresholds, spectra, decomposition, scaling (offline).",
    ),
    "inspect": (
        "inspect",
        "inspect_cmd",
        "Per layer and head of MODEL_OR_PATH (default: built-in all-MiniLM-L6-v2, offline): "
        "the spectrum of the tied query-key map, the theory's law",
    ),
}


# commands whose dependencies are an extra of the package
_EXTRAS = ("explore",)


class _LazyGroup(click.Group):
    """A group whose subcommands are imported on first use (see :data:`COMMANDS`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands or name not in COMMANDS:
            return self.commands.get(name)
        module, attr, _ = COMMANDS[name]
        try:
            return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
        except ModuleNotFoundError as exc:
            if exc.name is None or exc.name.startswith("singlehead"):
                raise
            # an optional dependency (an extra) that is not installed
            raise click.ClickException(
                f"{name} needs the package {exc.name!r}: pip install 'singlehead[{name}]'"
                if name in _EXTRAS
                else f"{name} needs the package {exc.name!r}"
            ) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [
            (n, COMMANDS[n][2] if n in COMMANDS else self.commands[n].get_short_help_str(80))
            for n in self.list_commands(ctx)
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="singlehead")
def cli() -> None:
    """Theory and simulation of single-head tied attention in high dimensions (arXiv 2509.24914)."""


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script."""
    try:
        cli.main(args=argv, prog_name="singlehead", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("error: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}".replace("\n", " "), err=True)
        sys.exit(2)
    except ValueError as exc:
        click.echo(f"error: {exc}".replace("\n", " "), err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("error: interrupted (finished runs are kept in the output file)", err=True)
        sys.exit(130)
