"""`wb dashboard`: the voila command line it builds (loopback, token, culling, database)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from wb_core.cli import app
from wb_core.cli.dashboard import dashboard_notebook, is_loopback, voila_command
from wb_core.errors import ConfigError


def test_loopback_by_default_without_token_and_with_culling(tmp_path):
    cmd, env, url = voila_command(tmp_path / "r.db", 8866, "127.0.0.1", None, 600, 200)
    assert url == "http://127.0.0.1:8866/"
    assert "--Voila.ip=127.0.0.1" in cmd and "--Voila.token=" in cmd
    assert "--MappingKernelManager.cull_idle_timeout=600" in cmd
    assert any(c.startswith("--MappingKernelManager.cull_interval=") for c in cmd)
    assert env["WB_DB"] == str((tmp_path / "r.db").resolve())
    assert Path(cmd[3]) == dashboard_notebook() == Path(__file__).resolve().parents[1] / "workbench" / "dashboard.ipynb"
    assert env["PYTHONPATH"].split(":")[0] == str(Path(__file__).resolve().parents[1] / "src")


def test_other_hosts_get_a_token():
    cmd, _, url = voila_command(Path("r.db"), 9000, "0.0.0.0", None, 600, 200)
    token = next(c.split("=", 1)[1] for c in cmd if c.startswith("--Voila.token="))
    assert len(token) >= 24 and url.endswith(f"?token={token}")
    _, _, url = voila_command(Path("r.db"), 9000, "10.0.0.5", "secret", 600, 200)
    assert url == "http://10.0.0.5:9000/?token=secret"


@pytest.mark.parametrize("host, loop", [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                         ("0.0.0.0", False), ("example.org", False)])
def test_is_loopback(host, loop):
    assert is_loopback(host) is loop


def test_bad_port_and_missing_folder_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="Port"):
        voila_command(tmp_path / "r.db", 70000, "127.0.0.1", None, 600, 200)
    with pytest.raises(ConfigError, match="does not exist"):
        voila_command(tmp_path / "nope" / "r.db", 8866, "127.0.0.1", None, 600, 200)


def test_dashboard_command_is_registered():
    result = CliRunner().invoke(app, ["dashboard", "--help"])
    assert result.exit_code == 0
    assert "--port" in result.output and "--host" in result.output and "--db" in result.output
