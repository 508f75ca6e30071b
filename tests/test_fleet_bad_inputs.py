"""Bad input to a fleet study, on a real local Dask cluster: a scheduler address that does not answer,
a host list naming unknown hosts, a worker running another version of the workbench. Each gives one
sentence naming what and where, and nothing is measured or stored. (A study started twice against one
store is in tests/test_fleet_store.py.)"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("distributed")

from fleet_cluster import ROOT, LocalFleet
from wb_core.config import SweepSpec
from wb_core.errors import ConfigError, WorkbenchError
from wb_core.fleet import DaskExecutor
from wb_core.store import Store
from wb_core.sweep.local import run_sweep

OTHER_VERSION = "0.0.0-other"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fleet-bad")
    site = folder / "other-version"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"import wb_core.version\nwb_core.version.__version__ = {OTHER_VERSION!r}\n")
    f = LocalFleet(folder)
    f.start_workers(("good", 0, {}), ("older", 1, {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(site)])}))
    yield f
    f.close()


def _nothing_stored(db) -> bool:
    if not db.exists():
        return True
    with Store(db, readonly=True) as st:
        return not st.list_studies()


def _one_sentence(text: str) -> bool:
    return "\n" not in text.strip() and "Traceback" not in text


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed


def test_a_scheduler_that_does_not_answer(tmp_path):
    address = f"tcp://127.0.0.1:{_closed_port()}"
    with pytest.raises(WorkbenchError) as e:
        DaskExecutor(address, connect_timeout=2)
    assert str(e.value).startswith(f"Cannot reach the Dask scheduler at {address} within 2 s") and _one_sentence(
        str(e.value))


@pytest.mark.slow  # the CLI waits its full 15 s for the scheduler
def test_a_scheduler_that_does_not_answer_from_the_cli(tmp_path, lenet_ir):
    db = tmp_path / "r.db"
    address = f"tcp://127.0.0.1:{_closed_port()}"
    r = subprocess.run([sys.executable, "-m", "wb_core", "profile", str(lenet_ir), "--cluster", address, "--db", str(db),
                        "--study", "s", "-q"], capture_output=True, text=True, timeout=180)
    assert r.returncode != 0 and f"Cannot reach the Dask scheduler at {address}" in r.stderr
    assert _one_sentence(r.stderr), r.stderr
    assert _nothing_stored(db)


def test_unknown_hosts_are_named_and_nothing_is_measured(fleet, lenet_ir, tmp_path, fast):
    db = tmp_path / "r.db"
    with DaskExecutor(fleet.address, hosts="good,nope,nada") as ex, pytest.raises(ConfigError) as e:
        run_sweep(lenet_ir, SweepSpec(), db, "s", settings=fast, executor=ex)
    msg = str(e.value)
    assert msg.startswith(f"No host named nope, nada in the cluster at {fleet.address}; its hosts are ")
    assert "good" in msg and "older" in msg and _one_sentence(msg)
    assert _nothing_stored(db)


def test_a_worker_of_another_version_stops_the_study_before_anything_is_measured(fleet, lenet_ir, tmp_path, fast):
    from wb_core.version import __version__

    db = tmp_path / "r.db"
    with DaskExecutor(fleet.address) as ex, pytest.raises(WorkbenchError) as e:
        run_sweep(lenet_ir, SweepSpec(), db, "s", settings=fast, executor=ex)
    msg = str(e.value)
    assert f"older ({OTHER_VERSION})" in msg and f"this one ({__version__})" in msg and "good" not in msg
    assert _one_sentence(msg) and _nothing_stored(db)
    # Left out with --hosts, the other version is no obstacle.
    with DaskExecutor(fleet.address, hosts="good") as ex:
        assert [h.name for h in ex.hosts()] == ["good"]


def test_a_host_that_does_not_answer_is_left_out_with_a_note(fleet, monkeypatch):
    import signal

    from wb_core.fleet import dask_executor

    monkeypatch.setattr(dask_executor, "PROBE_TIMEOUT_S", 3.0)
    fleet.signal("older", signal.SIGSTOP)  # hung: connected, but answers nothing
    try:
        with DaskExecutor(fleet.address, hosts="good,older") as ex:
            assert [h.name for h in ex.hosts()] == ["good"]
            assert len(ex.notes) == 1 and ex.notes[0].startswith("Host(s) older (tcp://127.0.0.1:")
            assert ex.notes[0].endswith("did not answer within 3 s and were left out of this study.")
    finally:
        fleet.signal("older", signal.SIGCONT)


@pytest.fixture
def http_server():
    """A plain HTTP server on 127.0.0.1: it answers, but speaks HTTP, not Dask's protocol."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_an_address_that_does_not_speak_the_schedulers_protocol(http_server, lenet_ir, tmp_path, fast):
    import time

    from wb_core.api import RunOptions, profile

    t0 = time.monotonic()
    with pytest.raises(ConfigError) as e:
        DaskExecutor(http_server, connect_timeout=2)
    msg = str(e.value)
    assert msg.startswith(f"The address {http_server} answers, but not as a Dask scheduler (it sent nothing within "
                          f"2 s); give the scheduler's own address") and _one_sentence(msg), msg
    assert time.monotonic() - t0 < 10  # the handshake's own time limit, not the client's wait and a MemoryError
    db = tmp_path / "r.db"
    with pytest.raises(ConfigError, match="answers, but not as a Dask scheduler"):
        profile(lenet_ir, db=db, study="s", settings=fast, run=RunOptions(cluster=http_server))
    assert _nothing_stored(db)


@pytest.mark.parametrize("scheme,needle", [("http", "is not a Dask scheduler address"),
                                           ("ws", "Cannot connect to a Dask scheduler at ws://"),
                                           ("tls", "with Dask's TLS settings for a tls:// one")])
def test_an_address_of_another_scheme_is_one_sentence_and_the_command_ends_at_once(http_server, lenet_ir, tmp_path,
                                                                                    scheme, needle):
    """Schemes the handshake check does not read: the client's own failure is the sentence, and the client it
    half built is closed at once (left to exit, it waited 30 s and printed a traceback)."""
    import time

    address = http_server.replace("tcp://", f"{scheme}://")
    db = tmp_path / "r.db"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "wb_core", "profile", str(lenet_ir), "--cluster", address, "--db", str(db),
                        "--quiet"], capture_output=True, text=True, timeout=60)
    assert time.monotonic() - t0 < 20, r.stderr
    assert r.returncode == 2 and "Traceback" not in r.stderr and "unexpected" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and needle in lines[0], r.stderr
    assert _nothing_stored(db)


def test_the_handshake_reads_a_real_scheduler_and_refuses_a_banner(fleet):
    import socket
    import threading

    from wb_core.fleet.dask_executor import NotAScheduler, check_scheduler

    check_scheduler(fleet.address, 5, 5)  # a scheduler passes
    with socket.socket() as banner:  # a server that greets first, as SSH does: not a frame length Dask sends
        banner.bind(("127.0.0.1", 0))
        banner.listen()

        def greet():
            conn, _ = banner.accept()
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
            conn.close()

        threading.Thread(target=greet, daemon=True).start()
        with pytest.raises(NotAScheduler, match="not Dask's handshake"):
            check_scheduler(f"tcp://127.0.0.1:{banner.getsockname()[1]}", 5, 5)
