"""`wb dashboard`: serve the Voila dashboard on a results database.

Loopback by default; any other address needs a token (one is made up when none is given), since
the page can run sweeps and write files on the server. Voila keeps a kernel per page visit, so
idle kernels are culled. The database reaches the notebook through `$WB_DB`.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Optional

import typer

from wb_core.api import ConfigError, cache_dir
from wb_core.cli.app import app

REPO_NOTEBOOK = Path(__file__).resolve().parents[3] / "workbench" / "dashboard.ipynb"
# Kept in step with workbench/dashboard.ipynb, for installs without the repository around them.
FALLBACK_SOURCE = "from wb_core.ui import dashboard\n\ndashboard()"


def dashboard_notebook() -> Path:
    """workbench/dashboard.ipynb of the repository, else a copy written to the cache."""
    if REPO_NOTEBOOK.is_file():
        return REPO_NOTEBOOK
    path = cache_dir() / "workbench" / "dashboard.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                     "source": FALLBACK_SOURCE}],
          "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
          "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb, indent=1))
    return path


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def voila_command(db: Path, port: int, host: str, token: str | None, cull_idle_s: int,
                  upload_limit_mb: int) -> tuple[list[str], dict, str]:
    """The voila command line, its environment, and the address to open."""
    if not 1 <= port <= 65535:
        raise ConfigError(f"Port must be between 1 and 65535; got {port}.")
    if cull_idle_s < 10:
        raise ConfigError(f"The idle kernel timeout must be at least 10 seconds; got {cull_idle_s}.")
    if not is_loopback(host) and not token:
        token = secrets.token_urlsafe(24)
    db = db.expanduser().resolve()
    if not db.parent.is_dir():
        raise ConfigError(f"The folder for results database '{db}' does not exist.")
    # The websocket carries uploads; leave room above the upload limit for encoding overhead.
    ws_limit = (upload_limit_mb + 16) * 2**20
    cmd = [sys.executable, "-m", "voila", str(dashboard_notebook()), "--no-browser",
           f"--Voila.ip={host}", f"--Voila.port={port}", "--Voila.port_retries=0",
           f"--Voila.token={token or ''}",
           f"--MappingKernelManager.cull_idle_timeout={cull_idle_s}",
           f"--MappingKernelManager.cull_interval={max(5, min(60, cull_idle_s // 4))}",
           "--MappingKernelManager.cull_connected=False",
           f"--Voila.tornado_settings={{'websocket_max_message_size': {ws_limit}}}"]
    env = dict(os.environ)
    env["WB_DB"] = str(db)
    env["WB_UPLOAD_LIMIT_MB"] = str(upload_limit_mb)
    # traitlets calls the dict form of --Voila.tornado_settings deprecated, but its key=value form
    # would pass the number as a string, which tornado cannot compare.
    env["PYTHONWARNINGS"] = "ignore::DeprecationWarning:traitlets.traitlets"
    # The kernels import the same wb_core as this process, installed or run from a checkout.
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{port}/" + (f"?token={token}" if token else "")
    return cmd, env, url


@app.command()
def dashboard(
    db: Optional[Path] = typer.Option(None, "--db", help="Results database (default: ./wb.db or $WB_DB)."),
    port: int = typer.Option(8866, "--port", help="Port to listen on."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; anything but loopback needs a token."),
    token: Optional[str] = typer.Option(None, "--token", help="Access token (made up when the host is not loopback)."),
    cull_idle: int = typer.Option(600, "--cull-idle", help="Seconds before an idle page's kernel is shut down."),
    upload_limit: int = typer.Option(200, "--upload-limit-mb", help="Largest model upload, in MB."),
):
    """Serve the dashboard (Model, Sweep, Explore, Export) in the browser."""
    from wb_core.api import default_db

    cmd, env, url = voila_command(db or default_db(), port, host, token, cull_idle, upload_limit)
    typer.echo(f"Dashboard on {env['WB_DB']}: open {url}  (Ctrl+C stops it)")
    if not is_loopback(host):
        typer.echo("It listens beyond this machine: keep the token secret.")
    try:
        code = subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        code = 0
    raise typer.Exit(code)
