"""The `wb` command's Typer app and its console entry point; commands live in sibling modules."""

from __future__ import annotations

import sys

import typer

from wb_core.api import WorkbenchError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="CPU Inference Workbench: find the threads, cores, batch size and precision that serve a "
                       "model best on this CPU.")


def fail(msg: str, code: int = 2):
    """Print one line on stderr and leave with `code`."""
    typer.echo(f"Error: {msg}", err=True)
    raise typer.Exit(code)


def main() -> None:
    """Console entry point: a WorkbenchError becomes one line on stderr and exit code 2."""
    try:
        app()
    except WorkbenchError as e:
        typer.echo(f"Error: {e}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("Interrupted; every finished point is stored, and rerunning the same command resumes.", err=True)
        sys.exit(130)
