"""`wb dashboard`: serve the Voila dashboard on a results database.

Only its user can drive it: the page can run sweeps and write files on the server. It listens on
loopback by default and always asks for a token, read from `$WB_DASHBOARD_TOKEN` or a file
(`--token-file`) or made up, and passed to Voila in a private config file, never on a command
line that any local user can read with `ps`. Requests whose `Host` is not a loopback name (DNS
rebinding) are refused unless `--host` names another address, and cross-origin requests and
websockets are refused. SIGTERM and SIGINT stop Voila and its kernels. Voila keeps a kernel per
page visit, so idle kernels are culled. The database reaches the notebook through `$WB_DB`.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import typer

from wb_core.api import ConfigError
from wb_core.cli.app import app, echo
from wb_core.faces import cache_dir

REPO_NOTEBOOK = Path(__file__).resolve().parents[3] / "workbench" / "dashboard.ipynb"
# Optional modules that cost seconds at import and that nothing in the dashboard uses, kept out of
# Voila's server and its kernels. jsonschema (imported by Jupyter Server's event log, and in the
# kernel by anything that loads nbformat) loads `rfc3987_syntax` when it is installed,
# which builds an IRI grammar at import: about 5.5 s each time on a 2-core machine. Without it
# jsonschema only skips checking the "iri" string format, which no schema here uses.
SLOW_OPTIONAL_IMPORTS = ("rfc3987_syntax",)
SKIP_SLOW_IMPORTS = "; ".join(f"sys.modules.setdefault({m!r}, None)" for m in SLOW_OPTIONAL_IMPORTS)
# Every page's kernel ends with its page, however fast the reloads: Voila's server runs with
# `wb_core.ui.page_lifetime` installed (the page asks for its kernel's shutdown from its first byte,
# a page request the browser left shuts its kernel down, and a kernel whose page never connected
# is shut down UNCONNECTED_GRACE_S after the page finished streaming).
UNCONNECTED_GRACE_S = 30
# Kept in step with workbench/dashboard.ipynb, for installs without the repository around them.
FALLBACK_SOURCE = ("import sys\n\n" + SKIP_SLOW_IMPORTS.replace("; ", "\n")
                   + "  # see wb_core.cli.dashboard.SLOW_OPTIONAL_IMPORTS\n"
                   "from wb_core.ui import await_page, dashboard\n\n"
                   "await_page()  # a kernel kept ready imports ahead and waits here for its page (wb_core.ui.preheat)\n"
                   "dashboard()")
# Kernels kept ready: a page takes one that has already started and imported what the page needs
# (wb_core.ui.preheat), instead of waiting for a new kernel's start and imports. KERNEL_POOL_SIZE
# kernels wait, each holding its imports' memory (about 150 MB); one taken is replaced
# POOL_REFILL_DELAY_S later, so that the new kernel's start does not compete for the CPUs with the
# page that has just been served. A page arriving while the pool is empty gets a kernel of its own.
KERNEL_POOL_SIZE = 1
POOL_REFILL_DELAY_S = 3


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


def own_address(host: str) -> str:
    """An address of the server listening on `host`, as a URL writes it (for its own kernels)."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


TOKEN_ENV = "WB_DASHBOARD_TOKEN"
LOOPBACK_NAMES = ["localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"]


def read_token(token_file: Path | None) -> str:
    """The access token: from `--token-file`, else `$WB_DASHBOARD_TOKEN`, else a new random one."""
    if token_file is not None:
        try:
            token = token_file.expanduser().read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"Cannot read the token file '{token_file}': {type(e).__name__}.") from None
        if not token:
            raise ConfigError(f"The token file '{token_file}' is empty.")
        mode = token_file.expanduser().stat().st_mode & 0o777
        if mode & 0o077:  # as ssh refuses a private key others can read
            raise ConfigError(f"The token file '{token_file}' can be read by other users (permissions {mode:04o}); "
                              f"make it private with chmod 600 {token_file}.")
    else:
        token = os.environ.get(TOKEN_ENV, "").strip() or secrets.token_urlsafe(24)
    if len(token) < 8 or any(c.isspace() or not c.isprintable() for c in token):
        raise ConfigError("The dashboard token must be at least 8 printable characters without spaces.")
    return token


def check_listen(host: str, port: int) -> None:
    """The address resolves to one of this machine's and the port is free: said before Voila starts
    (and prints its own log lines), by binding a socket there for a moment."""
    import errno
    import socket

    if not 1 <= port <= 65535:
        raise ConfigError(f"Port must be between 1 and 65535; got {port}.")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError, ValueError):
        raise ConfigError(f"--host '{host}' is not an address or a name this machine can resolve; give one such as "
                          f"127.0.0.1 (this machine only) or 0.0.0.0 (every interface).") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Tornado does: TIME_WAIT is no obstacle
        try:
            sock.bind(address)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise ConfigError(f"--port {port} on {host} is in use by another program; choose another --port.") \
                    from None
            if e.errno == errno.EADDRNOTAVAIL:
                raise ConfigError(f"--host '{host}' is not an address of this machine; give one of its own, such as "
                                  f"127.0.0.1 or 0.0.0.0.") from None
            if e.errno == errno.EACCES:
                raise ConfigError(f"--port {port} needs administrator rights (ports below 1024 do); choose a port "
                                  f"from 1024 up.") from None
            raise ConfigError(f"Cannot listen on {host} port {port}: {e.strerror or e}.") from None


def check_database(db: Path) -> None:
    """A database that exists must be a workbench store (an empty file is a new one)."""
    from wb_core.faces import check_database as check_store

    path = db.expanduser()
    if path.is_dir():
        raise ConfigError(f"--db '{db}' is a folder; give a results database file, such as {path / 'wb.db'}.")
    if path.is_file() and path.stat().st_size > 0:
        check_store(path)


def voila_command(db: Path, port: int, host: str, token: str, cull_idle_s: int,
                  upload_limit_mb: int, config_dir: Path | None = None) -> tuple[list[str], dict, str]:
    """The voila command line, its environment, and the address to open.

    The token and the tornado settings go into `voila.json` in `config_dir` (a private folder,
    read by Voila as its working directory), so the command line holds no secret.
    """
    if not 1 <= port <= 65535:
        raise ConfigError(f"Port must be between 1 and 65535; got {port}.")
    if cull_idle_s < 10:
        raise ConfigError(f"The idle kernel timeout must be at least 10 seconds; got {cull_idle_s}.")
    if not 1 <= upload_limit_mb <= 1 << 16:
        raise ConfigError(f"--upload-limit-mb must be between 1 and {1 << 16} (MB); got {upload_limit_mb}.")
    if not token:
        raise ConfigError("The dashboard needs a token.")
    db = db.expanduser().resolve()
    if not db.parent.is_dir():
        raise ConfigError(f"The folder for results database '{db}' does not exist.")
    # The websocket carries uploads; leave room above the upload limit for encoding overhead.
    ws_limit = (upload_limit_mb + 16) * 2**20
    tornado = {"websocket_max_message_size": ws_limit,
               # Host checked against loopback names (no DNS rebinding) unless another address was asked for.
               "allow_remote_access": not is_loopback(host),
               "local_hostnames": LOOPBACK_NAMES,
               # Cross-origin requests and websockets refused (a page of another site cannot drive this one).
               "allow_origin": "", "allow_origin_pat": ""}
    config_dir = Path(config_dir or tempfile.mkdtemp(prefix="wb-dashboard-"))
    os.chmod(config_dir, 0o700)
    conf = config_dir / "voila.json"
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"Voila": {"token": token, "tornado_settings": tornado}}, f)
    # `python -m voila`, with the slow optional imports skipped (see SLOW_OPTIONAL_IMPORTS).
    boot = (f"import sys; {SKIP_SLOW_IMPORTS}\n"
            f"from wb_core.ui.page_lifetime import install; install(grace_s={UNCONNECTED_GRACE_S})\n"
            "from voila.app import main; sys.exit(main())")
    cmd = [sys.executable, "-c", boot, str(dashboard_notebook()), "--no-browser",
           f"--Voila.ip={host}", f"--Voila.port={port}", "--Voila.port_retries=0",
           f"--MappingKernelManager.cull_idle_timeout={cull_idle_s}",
           f"--MappingKernelManager.cull_interval={max(5, min(60, cull_idle_s // 4))}",
           "--MappingKernelManager.cull_connected=False",
           "--VoilaConfiguration.preheat_kernel=True", f"--VoilaConfiguration.default_pool_size={KERNEL_POOL_SIZE}",
           f"--VoilaKernelManager.fill_delay={POOL_REFILL_DELAY_S}"]
    env = dict(os.environ)
    env.pop(TOKEN_ENV, None)  # the kernels have no use for it
    env["WB_DB"] = str(db)
    env["WB_UPLOAD_LIMIT_MB"] = str(upload_limit_mb)
    env["WB_DASHBOARD_CONFIG_DIR"] = str(config_dir)
    # Where a kept-ready kernel asks the server for its page's request (Voila's default is 127.0.0.1).
    env["VOILA_APP_IP"] = own_address(host)
    # The kernels import the same wb_core as this process, installed or run from a checkout.
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{port}/?token={token}"
    return cmd, env, url


@app.command()
def dashboard(
    db: Optional[Path] = typer.Option(None, "--db", help="Results database (default: ./wb.db or $WB_DB)."),
    port: int = typer.Option(8866, "--port", help="Port to listen on."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (default: loopback only)."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", help="File holding the access token (else "
                                              f"${TOKEN_ENV}, else one is made up and printed)."),
    token: Optional[str] = typer.Option(None, "--token", hidden=True),
    cull_idle: int = typer.Option(600, "--cull-idle", help="Seconds before an idle page's kernel is shut down."),
    upload_limit: int = typer.Option(200, "--upload-limit-mb", help="Largest model upload, in MB."),
):
    """Serve the dashboard (Model, Sweep, Explore, Export) in the browser."""
    import shutil

    from wb_core.faces import default_db

    if token is not None:
        raise ConfigError(f"A token on the command line is visible to every local user (ps); put it in "
                          f"${TOKEN_ENV} or in a file given with --token-file.")
    token_value = read_token(token_file)
    check_listen(host, port)
    check_database(db or default_db())
    config_dir = Path(tempfile.mkdtemp(prefix="wb-dashboard-"))
    try:
        cmd, env, url = voila_command(db or default_db(), port, host, token_value, cull_idle,
                                      upload_limit, config_dir)
        echo(f"Dashboard on {env['WB_DB']}: open {url}  (Ctrl+C stops it)")
        if not is_loopback(host):
            echo("It listens beyond this machine: keep the token secret.")
        code = _serve(cmd, env, config_dir)
    finally:
        shutil.rmtree(config_dir, ignore_errors=True)
    raise typer.Exit(code)


def _serve(cmd: list[str], env: dict, cwd: Path) -> int:
    """Run Voila in its own process group; SIGTERM or SIGINT here stops it and every kernel it started."""
    import psutil

    proc = subprocess.Popen(cmd, env=env, cwd=cwd, start_new_session=True)
    stopping = []
    kernels: list = []  # Voila's children (kernels run in sessions of their own), seen when stopping

    def stop(signum, _frame):
        stopping.append(signum)
        try:
            kernels.extend(psutil.Process(proc.pid).children(recursive=True))
        except psutil.Error:
            pass
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # Voila shuts its kernels down on SIGTERM
        except ProcessLookupError:
            pass

    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    deadline = None
    try:
        while True:
            try:
                code = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if stopping and deadline is None:
                    deadline = time.monotonic() + 10  # a clean shutdown's time, then no more waiting
                if deadline is not None and time.monotonic() > deadline:
                    _kill_group(proc.pid)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _kill_group(proc.pid)
        for k in kernels:  # kernels that outlived Voila
            try:
                k.wait(timeout=5)
            except psutil.TimeoutExpired:
                k.kill()
            except psutil.Error:
                pass
    return 0 if stopping else code


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
