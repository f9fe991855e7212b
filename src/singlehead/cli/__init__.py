"""The ``singlehead`` command line. Thin: parses options and delegates to the library.

Every invalid input ends with a one-line ``error: ...`` message on stderr naming the
parameter and its valid range, and exit status 2 — never a traceback.
"""

from __future__ import annotations

import sys

import click

from .. import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="singlehead")
def cli() -> None:
    """Theory and simulation of single-head tied attention in high dimensions (arXiv 2509.24914)."""


def _register() -> None:
    # Subcommand modules register themselves on `cli`; importing them here keeps this file thin.
    import importlib

    for name in ("simulate", "theory", "spectrum", "amp", "analysis", "reproduce", "inspect", "docs"):
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise


_register()


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
