"""Several fleet coordinators on one store: three studies written at once, and one study started twice.

Run on a real PostgreSQL server (started by the test, as tests/test_store_postgres.py does) and on
one SQLite file. The coordinators are the real one (`run_sweep(..., executor=...)`) in threads of this
process; their hosts are the stand-in fleet of tests/test_fleet.py (threads answering known points),
so what is checked is the store and its leases: every point stored once, none measured twice, and
SQLite serialising the writers without corruption.
"""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from test_fleet import StandInFleet, _host
from wb_core.config import RunConfig, SweepSpec
from wb_core.fleet import fleet_key
from wb_core.store import Store, load_results
from wb_core.sweep.local import run_sweep

SPEC = SweepSpec(threads="1,2,3,4,5", batch_sizes="1,2,3,4")  # 20 configs, 5 groups, per type
TYPES = ("slow", "fast")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store_target(request, tmp_path_factory):
    if request.param == "sqlite":
        yield str(tmp_path_factory.mktemp("sqlite") / "shared.db")
        return
    pytest.importorskip("psycopg", reason="psycopg 3 is not installed (pip install '.[fleet]')")
    from postgres_server import postgres_url

    with postgres_url() as url:
        yield url


def _fleet(tag: str, **kw) -> StandInFleet:
    return StandInFleet([_host(f"{tag}-s1", "slow"), _host(f"{tag}-s2", "slow"), _host(f"{tag}-f1", "fast")], **kw)


def _expected_throughput(key_to_cfg: dict, key: str, fp: str) -> float:
    # StandInFleet's rule, written out: 100 per sample of batch, twice that on the "fast" type.
    return 100.0 * (2 if fp == "fast" else 1) * key_to_cfg[key].batch_size


def _measured(fleets) -> list[tuple[str, str]]:
    """(hardware type, configuration key) of every point any host measured."""
    out = []
    for f in fleets:
        types = {h.name: h.fingerprint for h in f.hosts()}
        out += [(types[host], key) for host, key in f.ran]
    return out


def _leases(target, study) -> int:
    with Store(target, readonly=True) as st:
        return int(st.db.execute("SELECT COUNT(*) AS n FROM leases WHERE study = ?", (study,))[0]["n"])


def test_three_coordinators_write_three_studies_at_once(store_target, lenet_ir, fast):
    fleets = {f"study-{i}-{time.time_ns()}": _fleet(f"c{i}", point_s=0.01) for i in range(3)}
    results, errors = {}, []
    start = threading.Barrier(len(fleets))

    def coordinate(study, fleet):
        try:
            start.wait()
            results[study] = run_sweep(lenet_ir, SPEC, store_target, study, settings=fast, executor=fleet)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=coordinate, args=item) for item in fleets.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    configs = {c.key: c for c in SPEC.expand()}
    for study, fleet in fleets.items():
        s = results[study]
        assert (s.ok, s.failed, s.held_elsewhere) == (40, 0, 0), s.errors
        df = load_results(store_target, study)
        assert len(df) == 40 and df.key.is_unique and (df.status == "ok").all()
        assert set(df.key) == {fleet_key(c, fp) for c in configs.values() for fp in TYPES}
        for _, r in df.iterrows():
            assert r.throughput == _expected_throughput(configs, r.config_key, r.hardware_fingerprint)
        assert len(_measured([fleet])) == len(set(_measured([fleet]))) == 40
        assert _leases(store_target, study) == 0  # every lease given back once its point was stored
    if not store_target.startswith("postgresql"):
        with sqlite3.connect(store_target) as c:  # three writers at once were serialised, not interleaved
            assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


class GatedFleet(StandInFleet):
    """A stand-in fleet whose hosts wait for `gate` before measuring anything."""

    def __init__(self, *a, gate: threading.Event, **kw):
        super().__init__(*a, **kw)
        self.gate = gate

    def submit(self, host, job):
        self.gate.wait(120)
        return super().submit(host, job)


def test_a_study_started_twice_measures_each_point_once(store_target, lenet_ir, fast):
    study = f"twice-{time.time_ns()}"
    gate = threading.Event()
    first_fleet = GatedFleet([_host("a-s1", "slow"), _host("a-f1", "fast")], gate=gate, point_s=0.01)
    first = {}
    t = threading.Thread(target=lambda: first.update(s=run_sweep(lenet_ir, SPEC, store_target, study, settings=fast,
                                                                  executor=first_fleet)))
    t.start()
    deadline = time.time() + 120
    while time.time() < deadline and _leases(store_target, study) < 40:
        time.sleep(0.05)
    assert _leases(store_target, study) == 40  # the first coordinator holds every point, measuring none yet

    second_fleet = _fleet("b", point_s=0.01)
    second = run_sweep(lenet_ir, SPEC, store_target, study, settings=fast, executor=second_fleet)
    # The second start measures nothing the first holds, and says so in one sentence.
    assert (second.ok, second.failed, second.held_elsewhere) == (0, 0, 40)
    assert not second_fleet.ran
    assert any("left to another sweep measuring them" in n for n in second.notes), second.notes

    gate.set()
    t.join(timeout=300)
    assert (first["s"].ok, first["s"].failed) == (40, 0), first["s"].errors
    measured = _measured([first_fleet, second_fleet])
    assert len(measured) == len(set(measured)) == 40  # nothing measured twice, nothing left out
    df = load_results(store_target, study)
    assert len(df) == 40 and df.key.is_unique and (df.status == "ok").all()

    # A third start once both are done finds everything stored.
    third = run_sweep(lenet_ir, SPEC, store_target, study, settings=fast, executor=_fleet("c"))
    assert (third.ok, third.skipped_done, third.held_elsewhere) == (0, 40, 0)


def test_a_dead_coordinators_leases_are_taken_over_by_its_restart(store_target):
    """A coordinator killed on this host leaves leases under a process id that is gone: they are taken
    at once; a live holder's are not (the rule every restart of a killed coordinator relies on)."""
    import os
    import socket
    import subprocess
    import sys

    study = f"leases-{time.time_ns()}"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    key = fleet_key(RunConfig("openvino", batch_size=1), "slow")
    with Store(store_target) as st:
        assert st.claim(study, key, "killed", socket.gethostname(), dead_pid) is None
        assert st.claim(study, key, "restart", socket.gethostname(), os.getpid()) is None  # taken over
        holder = st.claim(study, key, "third", socket.gethostname(), dead_pid)
        assert holder is not None and holder["owner"] == "restart"  # ... but not from a live one
        st.release("restart")
