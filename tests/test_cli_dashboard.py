"""`wb dashboard`: the voila command line it builds (loopback, token, culling, database)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wb_core.cli import app
from wb_core.cli.dashboard import TOKEN_ENV, dashboard_notebook, is_loopback, read_token, voila_command
from wb_core.errors import ConfigError


def test_loopback_by_default_with_culling_and_the_token_in_a_private_file(tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    cmd, env, url = voila_command(tmp_path / "r.db", 8866, "127.0.0.1", "tok-secret-1", 600, 200, conf)
    assert url == "http://127.0.0.1:8866/?token=tok-secret-1"
    assert "--Voila.ip=127.0.0.1" in cmd and not any("tok-secret-1" in c for c in cmd)  # never on argv
    assert "--MappingKernelManager.cull_idle_timeout=600" in cmd
    assert any(c.startswith("--MappingKernelManager.cull_interval=") for c in cmd)
    assert env["WB_DB"] == str((tmp_path / "r.db").resolve())
    assert Path(cmd[3]) == dashboard_notebook() == Path(__file__).resolve().parents[1] / "workbench" / "dashboard.ipynb"
    assert env["PYTHONPATH"].split(":")[0] == str(Path(__file__).resolve().parents[1] / "src")
    voila = json.loads((conf / "voila.json").read_text())["Voila"]
    assert voila["token"] == "tok-secret-1"
    assert voila["tornado_settings"]["allow_remote_access"] is False  # Host must be a loopback name
    assert voila["tornado_settings"]["allow_origin"] == ""
    assert stat.S_IMODE(os.stat(conf / "voila.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(conf).st_mode) == 0o700


def test_other_hosts_accept_their_host_header(tmp_path):
    _, _, url = voila_command(Path("r.db"), 9000, "10.0.0.5", "secret-token", 600, 200, tmp_path)
    assert url == "http://10.0.0.5:9000/?token=secret-token"
    assert json.loads((tmp_path / "voila.json").read_text())["Voila"]["tornado_settings"]["allow_remote_access"]


def test_token_from_file_or_environment_or_made_up(tmp_path, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert len(read_token(None)) >= 24 and read_token(None) != read_token(None)
    monkeypatch.setenv(TOKEN_ENV, "from-the-env")
    assert read_token(None) == "from-the-env"
    f = tmp_path / "token"
    f.write_text("from-a-file\n")
    f.chmod(0o600)  # a token file others can read is refused (tests/test_bad_inputs.py)
    assert read_token(f) == "from-a-file"
    f.write_text("")
    with pytest.raises(ConfigError, match="empty"):
        read_token(f)
    with pytest.raises(ConfigError, match="Cannot read"):
        read_token(tmp_path / "missing")


def test_a_token_on_the_command_line_is_refused(tmp_path):
    r = subprocess.run([sys.executable, "-m", "wb_core", "dashboard", "--db", str(tmp_path / "r.db"), "--token",
                        "abcdefgh1"], capture_output=True, text=True)
    assert r.returncode == 2 and "visible to every local user" in r.stderr and "Traceback" not in r.stderr


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_served_dashboard_checks_host_and_token_and_stops_on_sigterm(tmp_path):
    """A real server: foreign Host refused (DNS rebinding), no token no page, SIGTERM leaves nothing running."""
    import urllib.error
    import urllib.request

    import psutil

    port = _free_port()
    env = {**os.environ, TOKEN_ENV: "host-check-token"}
    proc = subprocess.Popen([sys.executable, "-m", "wb_core", "dashboard", "--db", str(tmp_path / "d.db"),
                             "--port", str(port), "--cull-idle", "60"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def status(path, host=None):
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": host} if host else {})
        opener = urllib.request.build_opener(NoRedirect)
        try:
            return opener.open(req, timeout=30).status
        except urllib.error.HTTPError as e:
            return e.code

    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                status("/static/does-not-matter")
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.3)
        assert status("/", host=f"evil.example:{port}") == 403
        assert status("/?token=host-check-token", host=f"attacker.test:{port}") == 403
        assert status("/") in (302, 403)  # no token: no page
        # Positive control: the same request with our own Host and the token is served (a server that
        # refused everything would pass the three lines above).
        assert status("/?token=host-check-token", host=f"127.0.0.1:{port}") in (200, 302)
        assert status("/?token=host-check-token") in (200, 302)
        procs = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        tree = [p.pid for p in procs]
        assert len(tree) >= 2  # wb and voila
        assert not [p for p in procs if "host-check-token" in " ".join(p.cmdline())]  # not readable in ps
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    time.sleep(0.5)
    assert not [p for p in tree if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE], out


class NoRedirect(__import__("urllib.request").request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.mark.parametrize("host, loop", [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                         ("0.0.0.0", False), ("example.org", False)])
def test_is_loopback(host, loop):
    assert is_loopback(host) is loop


def test_bad_port_and_missing_folder_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="Port"):
        voila_command(tmp_path / "r.db", 70000, "127.0.0.1", "token123", 600, 200, tmp_path)
    with pytest.raises(ConfigError, match="does not exist"):
        voila_command(tmp_path / "nope" / "r.db", 8866, "127.0.0.1", "token123", 600, 200, tmp_path)


def test_dashboard_command_is_registered():
    result = CliRunner().invoke(app, ["dashboard", "--help"])
    assert result.exit_code == 0
    assert "--port" in result.output and "--host" in result.output and "--db" in result.output


def test_voila_and_its_kernels_skip_the_slow_optional_import(tmp_path):
    """jsonschema's optional IRI grammar (5 s at import on a small machine) stays out of Voila's
    server and of the dashboard's kernels; the notebook and the fallback copy agree."""
    from wb_core.cli.dashboard import FALLBACK_SOURCE, SLOW_OPTIONAL_IMPORTS

    cmd, _, _ = voila_command(tmp_path / "r.db", 8866, "127.0.0.1", "tok-secret-1", 600, 200, tmp_path)
    boot = cmd[cmd.index("-c") + 1]
    nb = json.loads(dashboard_notebook().read_text())
    assert nb["cells"][0]["source"] == FALLBACK_SOURCE
    for prelude in (boot.split("\nfrom wb_core")[0], FALLBACK_SOURCE.split("from wb_core")[0]):
        code = f"{prelude}\nimport jsonschema, sys\nprint([m for m in {SLOW_OPTIONAL_IMPORTS!r} if sys.modules.get(m)])"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def test_voila_runs_with_the_page_lifetime_patches(tmp_path):
    """Voila's server runs with `wb_core.ui.page_lifetime` installed before it starts: the page
    handler sets the `_xsrf` cookie a closing page's shutdown request needs, the page's head gets the
    early shutdown script, and a second shutdown of a kernel already gone is no error (the browser
    tests reload the page and count kernels). Here: the boot code really replaces those handlers."""
    cmd, _, _ = voila_command(tmp_path / "r.db", 8866, "127.0.0.1", "tok-secret-1", 600, 200, tmp_path)
    boot = cmd[cmd.index("-c") + 1]
    assert boot.index("page_lifetime import install") < boot.index("from voila.app import main")
    prelude = boot.split("\nfrom voila.app")[0]
    code = (f"{prelude}\nimport voila.handler as h, voila.tornado.handler as t, voila.shutdown_kernel_handler as s\n"
            "print('xsrf_token' in h.VoilaHandler.prepare.__code__.co_names, t.TornadoVoilaHandler.on_connection_close"
            ".__module__, s.VoilaShutdownKernelHandler.post.__module__, 'ipywidgets' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "wb_core.ui.page_lifetime", "wb_core.ui.page_lifetime", "False"]


def test_the_early_shutdown_script_names_its_kernel_safely():
    """The kernel id and base URL land in a JavaScript string literal that cannot end the script."""
    from wb_core.ui.page_lifetime import early_shutdown_script

    script = early_shutdown_script("/base/", "abc-123")
    assert '"/base/voila/api/shutdown/abc-123"' in script and "pagehide" in script
    hostile = early_shutdown_script("/</script><b>x/", 'k"1')
    assert hostile.count("</script>") == 1 and "<\\/script><b>" in hostile and 'k\\"1' in hostile
