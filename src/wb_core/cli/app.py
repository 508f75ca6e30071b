"""The `wb` command's Typer app and its console entry point; commands live in sibling modules."""

from __future__ import annotations

import os
import sys

import typer
from typer.exceptions import Abort, TyperException

from wb_core.api import ConfigError, WorkbenchError
from wb_core.faces import printable

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="CPU Inference Workbench: find the threads, cores, batch size and precision that serve a "
                       "model best on this CPU. Add --debug (or set WB_DEBUG=1) to see the traceback of an "
                       "unexpected error.")


def number(text) -> float:
    """Parser of number options as users type them (1000, 1e3, 1k, 2.5M)."""
    from wb_core.faces import parse_number

    return text if text is None or isinstance(text, (int, float)) else parse_number(text, "The value")


def count(text) -> int:
    """Parser of whole-number options, in the same forms (1k is 1000)."""
    v = number(text)
    if v is not None and v != int(v):
        raise ConfigError(f"The value must be a whole number; got '{text}'.")
    return v if v is None else int(v)


def echo(text="", err: bool = False, nl: bool = True) -> None:
    """Print for the terminal: every line the CLI prints comes here, so the user text in it (study,
    model, input and host names, paths) loses its escape codes and control characters."""
    typer.echo(printable(text), err=err, nl=nl)


def report_summary(summary) -> None:
    """A study's summary line, then its notes and first failures on stderr; exit 1 when nothing ran."""
    echo(summary.line())
    for note in summary.notes:
        echo(f"  note: {said(note)}", err=True)
    for e in summary.errors[:10]:
        echo(f"  failed: {e}", err=True)
    nothing_before = not summary.skipped_done and not getattr(summary, "held_elsewhere", 0)
    if not summary.ok and (summary.failed or (summary.skipped and nothing_before and not summary.cancelled)):
        raise typer.Exit(1)  # every point failed or could not run here: the line above says why


def fail(msg: str, code: int = 2):
    """Print one line on stderr and leave with `code`."""
    typer.echo(f"Error: {one_line(msg)}", err=True)
    raise typer.Exit(code)


def worded(e: BaseException) -> str:
    """An error as the CLI says it: the setting it is about is said as its flag (--threads, --dynamic-size)."""
    from wb_core.faces import setting_flag

    if isinstance(e, WorkbenchError):
        return e.worded(setting_flag, prefix=isinstance(e, ConfigError))
    return str(e)


def said(text) -> str:
    """A note or reason from the core as the CLI says it: each setting it names as its flag."""
    from wb_core.faces import word_for_cli

    return word_for_cli(text)


def one_line(msg) -> str:
    """A message as one printable line (user text inside it may hold newlines or escape codes)."""
    return " ".join(printable(msg).split())


def _write_log(exc: BaseException) -> str | None:
    """The traceback of an unexpected error in a log file under the cache; its path, or None."""
    import datetime
    import traceback

    from wb_core.faces import cache_dir

    try:
        folder = cache_dir() / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        path = folder / f"wb-{stamp}-{os.getpid()}.log"
        path.write_text(f"wb {' '.join(sys.argv[1:])}\n\n"
                        + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)), encoding="utf-8")
        return str(path)
    except Exception:
        return None


def main() -> None:
    """Console entry point: every error becomes one line on stderr, never a traceback.

    A WorkbenchError (bad input) gives its sentence and exit code 2. Anything else is a bug: one
    sentence naming it and the log file that holds its traceback, exit code 3; `--debug` (or
    WB_DEBUG=1) prints the traceback instead.
    """
    debug = "--debug" in sys.argv[1:] or os.environ.get("WB_DEBUG", "") not in ("", "0")
    if "--debug" in sys.argv[1:]:
        sys.argv = [sys.argv[0], *(a for a in sys.argv[1:] if a != "--debug")]
    try:
        code = app(standalone_mode=False)  # usage errors come here, to be said in one sentence
        sys.exit(code if isinstance(code, int) else 0)
    except TyperException as e:  # typer's usage errors: a wrong option, a value of the wrong type
        ctx = getattr(e, "ctx", None)
        if type(e).__name__ == "NoArgsIsHelpError" and ctx is not None:
            typer.echo(ctx.get_help())
            sys.exit(2)
        cmd = f"wb {ctx.info_name} --help" if ctx is not None and ctx.parent is not None else "wb --help"
        text = one_line(e.format_message()).replace("Value error, ", "").rstrip(".")
        typer.echo(f"Error: {text}; see {cmd}.", err=True)
        sys.exit(2)
    except Abort:
        typer.echo("Interrupted; every finished point is stored, and rerunning the same command resumes.", err=True)
        sys.exit(130)
    except WorkbenchError as e:
        typer.echo(f"Error: {one_line(worded(e))}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("Interrupted; every finished point is stored, and rerunning the same command resumes.", err=True)
        sys.exit(130)
    except SystemExit:
        raise
    except BaseException as e:
        if debug:
            raise
        log = _write_log(e)
        first = printable(str(e).strip().splitlines()[0] if str(e).strip() else "")[:300]
        where = f"the traceback is in {log}" if log else "rerun with --debug to see the traceback"
        typer.echo(f"Error: an unexpected {type(e).__name__}{f' ({first})' if first else ''} stopped the command; "
                   f"{where}.", err=True)
        sys.exit(3)
