"""A throwaway PostgreSQL server for tests: Debian's binaries, initdb into a temporary folder,
listening on 127.0.0.1 on a free port. As root the server runs as the `postgres` user (PostgreSQL
refuses to run as root)."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def server_bin() -> Path | None:
    """The folder holding initdb and pg_ctl, or None when PostgreSQL's server is not installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    which = shutil.which("initdb")
    return Path(which).resolve().parent if which and shutil.which("pg_ctl") else None


@contextlib.contextmanager
def postgres_url():
    """A throwaway server's URL for the length of the block; the test is skipped, with the install
    command, where PostgreSQL's server binaries are absent."""
    import pytest

    bindir = server_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed: `make postgres` installs them")
    server = PostgresServer(bindir)
    try:
        yield server.url
    finally:
        server.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self, bindir: Path):
        self.bindir = bindir
        # Not under pytest's tmp folder: as root that folder is closed to the postgres user.
        self.root = Path(tempfile.mkdtemp(prefix="wb-pg-"))
        self.port = _free_port()
        self.user = None
        if os.geteuid() == 0:
            self.user = "postgres"
            pw = pwd.getpwnam(self.user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self._run("initdb", "-D", str(self.root / "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self._run("pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "log"), "-w", "-t", "60",
                  "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str):
        cmd = [str(self.bindir / tool), *args]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=self.root)
        if r.returncode != 0:
            raise RuntimeError(f"{tool} failed: {r.stdout}\n{r.stderr}")

    def stop(self):
        try:
            self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
