"""One study across a real local Dask cluster: two workers pinned to their own cores and labelled as
different hosts (one reports another hardware type through WB_HARDWARE_TYPE); a host is killed
mid-study; every finished point is stored once, the rest failed with a reason or retried on a host
of the same hardware type; a rerun resumes across the cluster."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("distributed", reason="dask distributed is not installed (pip install -e '.[fleet]')")

from fleet_cluster import LocalFleet
from wb_core.config import SweepSpec
from wb_core.fleet import DaskExecutor
from wb_core.store import Store, load_results
from wb_core.sweep.local import run_sweep

SPEC = SweepSpec(threads="1,2", batch_sizes="1,2,4")  # 2 worker groups of 3 points, per hardware type
OTHER = {"WB_HARDWARE_TYPE": "other-cpu"}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = LocalFleet(tmp_path_factory.mktemp("fleet"))
    yield f
    f.close()


def _kill_on_first_point_of(fleet, host):
    killed = []

    def on_point(p):
        if p["host"] == host and not killed:
            killed.append(p["key"])
            fleet.kill(host)

    return on_point, killed


def test_study_across_two_hosts_survives_one_dropping_out(fleet, lenet_ir, db, fast):
    fleet.start_workers(("host-a", 0, {}), ("host-b", 1, OTHER))
    on_point, killed = _kill_on_first_point_of(fleet, "host-b")
    with DaskExecutor(fleet.address, hosts="host-a,host-b") as ex:
        types = {h.name: h.fingerprint for h in ex.hosts()}
        s = run_sweep(lenet_ir, SPEC, db, "fleet", settings=fast, executor=ex, on_point=on_point)
    assert types["host-b"] == "other-cpu" and types["host-a"] != "other-cpu"
    assert killed
    df = load_results(db, "fleet")
    assert len(df) == 12 and df.key.is_unique  # each (configuration, hardware type) stored once
    a, b = df[df.hardware_fingerprint == types["host-a"]], df[df.hardware_fingerprint == "other-cpu"]
    assert (a.status == "ok").all() and set(a.host) == {"host-a"}
    b_ok = b[b.status == "ok"]
    assert len(b_ok) >= 1 and set(b_ok.host) == {"host-b"}  # what host-b finished is kept
    b_failed = b[b.status == "failed"]
    assert len(b_failed) == 6 - len(b_ok) and len(b_failed) > 0
    assert b_failed.error.str.contains("host-b dropped out").all(), b_failed.error.tolist()
    assert b_failed.error.str.contains("no other host with the same hardware|No host with hardware other-cpu").all()
    assert any("host-b dropped out" in e for e in s.errors)
    with Store(db, readonly=True) as st:
        assert {h["name"]: h["hardware_fingerprint"] for h in st.hosts("fleet")} == types
    stored_b = b_ok.set_index("key")["created_at"].to_dict()

    # Two fresh hosts of host-b's type join; one of them drops out too: its group is retried on
    # the other (same hardware). The rerun measures only what is missing.
    fleet.start_workers(("host-c", 1, OTHER), ("host-d", 0, OTHER))
    on_point, killed = _kill_on_first_point_of(fleet, "host-c")
    with DaskExecutor(fleet.address, hosts=["host-c", "host-d"]) as ex:
        s2 = run_sweep(lenet_ir, SPEC, db, "fleet", settings=fast, executor=ex, on_point=on_point)
    assert killed
    # Only host-b's type is in this run (host-a is left out), so only its stored points count as done.
    assert (s2.ok, s2.failed, s2.skipped_done) == (len(b_failed), 0, len(b_ok)), s2.errors
    df = load_results(db, "fleet")
    assert len(df) == 12 and df.key.is_unique and (df.status == "ok").all()
    b = df[df.hardware_fingerprint == "other-cpu"].set_index("key")
    assert {"host-c", "host-d"} <= set(b.host)
    assert all(b.loc[k, "host"] == "host-b" and b.loc[k, "created_at"] == t for k, t in stored_b.items())


def test_cli_profiles_on_named_hosts_and_compares_types(fleet, lenet_ir, tmp_path):
    fleet.start_workers(("host-e", 0, {}))
    db = tmp_path / "cli.db"
    cmd = [sys.executable, "-m", "wb_core"]
    r = subprocess.run(cmd + ["profile", str(lenet_ir), "--cluster", fleet.address, "--hosts", "host-e",
                              "--batch", "1", "--max-time", "0.4", "--warmup", "0.1", "--window", "0.1",
                              "--tolerance", "0.5", "--study", "cli", "--db", str(db), "-q", "--ship-model"],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    df = load_results(db, "cli")
    assert len(df) == 1 and df.loc[0, "status"] == "ok" and df.loc[0, "host"] == "host-e"
    r = subprocess.run(cmd + ["compare-hosts", "--study", "cli", "--db", str(db), "--price", "host-e=1.5"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "host-e" in r.stdout and "USD per million" in r.stdout, r.stderr
    r = subprocess.run(cmd + ["hosts", "--cluster", fleet.address, "--hosts", "nope"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "No host named nope" in r.stderr
