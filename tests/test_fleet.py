"""The fleet coordinator's rules, on a stand-in fleet (threads, canned points): retries by
hardware type, failures with reasons, resume; and the host-type comparison on known numbers."""

from __future__ import annotations

import queue
import sqlite3
import threading
import time
from concurrent.futures import Future, InvalidStateError

import pandas as pd
import pytest

from wb_core.config import SweepSpec
from wb_core.errors import ConfigError
from wb_core.fleet.compare import (
    compare_host_types,
    config_by_host_type,
    cost_per_million,
    parse_prices,
    select_host_type,
)
from wb_core.fleet.hosts import Host
from wb_core.fleet.plots import host_type_bars, host_type_scatter
from wb_core.fleet.sweep import fleet_key
from wb_core.store import Store, load_results
from wb_core.sweep.local import run_sweep

HW = {"cpu_model": "Test CPU", "vendor": "x", "architecture": "x86_64", "physical_cores": 4, "logical_cores": 4,
      "available_cpus": [0, 1, 2, 3], "sockets": 1, "numa_nodes": 1, "numa_cpus": {}, "l1d_kb": None, "l2_kb": None,
      "l3_kb": None, "base_ghz": 2.0, "flags": {"avx2": True}, "memory_gb": 8.0, "fma_units": 2,
      "ops_per_cycle": {"fp32": 32, "bf16": 32, "int8": 64}, "peak_gflops": {"fp32": 256.0}}


def _host(name, fp):
    return Host(id=f"tcp://127.0.0.1/{name}", name=name, fingerprint=fp, detected_fingerprint=fp, hardware=HW)


class StandInFleet:
    """Runs each job in a thread with made-up points; a host named in `dies_after` vanishes after that many."""

    def __init__(self, hosts, dies_after=None, point_s=0.05):
        self._hosts, self.alive = hosts, {h.id for h in hosts}
        self.dies_after = dict(dies_after or {})
        self.point_s = point_s
        self.q = queue.Queue()
        self.ran: list[tuple[str, str]] = []  # (host, cfg key) for every point measured

    def hosts(self):
        return list(self._hosts)

    def live_hosts(self):
        return set(self.alive)

    def points(self):
        return self.q

    def cancel(self, fut):
        fut.cancel()

    def submit(self, host, job):
        fut = Future()

        def work():
            points = []
            for m in job["members"]:
                from wb_core.config import RunConfig

                if self.dies_after.get(host.name) == 0:
                    self.alive.discard(host.id)
                    return  # the future never completes, as with a dead machine
                time.sleep(self.point_s)
                cfg = RunConfig.from_dict(m)
                msg = {"job": job["id"], "key": cfg.key, "status": "ok", "metrics": {
                    "throughput": 100.0 * (2 if host.fingerprint == "fast" else 1) * cfg.batch_size,
                    "latency_ms_p99": 1.0, "cpu_util": 1.0}, "error": None}
                self.ran.append((host.name, cfg.key))
                points.append(msg)
                self.q.put(msg)
                if host.name in self.dies_after:
                    self.dies_after[host.name] -= 1
            try:
                fut.set_result({"job": job["id"], "points": points})
            except InvalidStateError:  # the coordinator gave up on this host meanwhile (cancelled)
                pass

        threading.Thread(target=work, daemon=True).start()
        return fut


SPEC = SweepSpec(threads="1,2", batch_sizes="1,2,4")  # 2 groups of 3 points


def test_a_dropped_host_is_retried_on_same_hardware_else_failed(lenet_ir, db, fast):
    fleet = StandInFleet([_host("a1", "slow"), _host("a2", "slow"), _host("b1", "fast")],
                         dies_after={"a1": 1, "b1": 2})
    s = run_sweep(lenet_ir, SPEC, db, "f", settings=fast, executor=fleet)
    df = load_results(db, "f")
    assert df.key.is_unique and len(df) == 12
    slow, fast_ = df[df.hardware_fingerprint == "slow"], df[df.hardware_fingerprint == "fast"]
    # a1 died after one point: its group went on on a2, the other host of its type.
    assert (slow.status == "ok").all() and set(slow.host) == {"a1", "a2"}
    assert (slow.host == "a1").sum() == 1
    # b1 was the only fast host: what it had not finished is failed, with the reason.
    assert (fast_.status == "ok").sum() == 2
    failed = fast_[fast_.status == "failed"]
    assert len(failed) == 4 and failed.error.str.contains("no other host with the same hardware").any()
    assert failed.error.str.contains("No host with hardware fast is left").any()
    assert (s.ok, s.failed) == (8, 4) and any("b1 dropped out" in e for e in s.errors)
    # Every finished point was measured once and stored once.
    assert len(fleet.ran) == len(set(fleet.ran)) == 8

    # Resume with a healthy fast host: only the failed points run again; nothing stored is redone.
    fleet2 = StandInFleet([_host("a2", "slow"), _host("b2", "fast")])
    s2 = run_sweep(lenet_ir, SPEC, db, "f", settings=fast, executor=fleet2)
    assert (s2.ok, s2.failed, s2.skipped_done) == (4, 0, 8)
    assert {h for h, _ in fleet2.ran} == {"b2"}
    df = load_results(db, "f")
    assert len(df) == 12 and (df.status == "ok").all()
    assert set(df.key) == {fleet_key(c, fp) for c in SPEC.expand() for fp in ("slow", "fast")}


def test_one_group_at_a_time_per_host(lenet_ir, db, fast):
    class Watching(StandInFleet):
        busy, overlap = set(), []

        def submit(self, host, job):
            if host.id in self.busy:
                self.overlap.append(host.name)
            self.busy.add(host.id)
            fut = super().submit(host, job)
            fut.add_done_callback(lambda _: self.busy.discard(host.id))
            return fut

    fleet = Watching([_host("a1", "slow")])
    s = run_sweep(lenet_ir, SweepSpec(threads="1,2,3", batch_sizes="1"), db, "g", settings=fast, executor=fleet)
    assert s.ok == 3 and not fleet.overlap


def test_unknown_or_infeasible_is_skipped_per_host_type(lenet_ir, db, fast):
    no_bf16 = {**HW, "flags": {"avx2": True}}
    fleet = StandInFleet([Host(id="x", name="x", fingerprint="old", detected_fingerprint="old", hardware=no_bf16)])
    s = run_sweep(lenet_ir, SweepSpec(precisions="fp32,bf16"), db, "p", settings=fast, executor=fleet)
    df = load_results(db, "p").set_index("precision")
    assert s.skipped == 1 and "BF16" in df.loc["bf16", "error"] and df.loc["fp32", "status"] == "ok"


def test_old_database_gains_the_host_columns(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as c:
        c.executescript("CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, study TEXT NOT NULL, key TEXT NOT NULL, "
                        "status TEXT NOT NULL, error TEXT, config_json TEXT NOT NULL, metrics_json TEXT NOT NULL, "
                        "created_at TEXT NOT NULL, UNIQUE (study, key));")
    with Store(path) as s:
        s.ensure_study("o", "m", "openvino", "fp", {}, "hw", {}, {})
        s.add_run("o", "k", {"backend": "openvino", "cores": None}, "ok", {"throughput": 1.0}, host="h",
                  hardware_fingerprint="t")
        s.add_host("o", "h", "t", {"cpu_model": "c"})
        assert s.runs("o")[0]["host"] == "h" and s.hosts("o")[0]["hardware"] == {"cpu_model": "c"}


# ---------------------------------------------------------------- comparison


def _fleet_frame():
    rows = []
    for fp, host, scale in (("old", "o1", 1.0), ("new", "n1", 3.0)):
        for b, thr, p99 in ((1, 100.0, 1.0), (8, 400.0, 5.0)):
            rows.append({"study": "s", "key": f"{fp}{b}", "backend": "openvino", "precision": "fp32", "batch_size": b,
                         "threads": 2, "cores": "0-1", "n_cores": 2, "instances": 1, "concurrency": 1,
                         "throughput": thr * scale, "latency_ms_p99": p99 / scale, "status": "ok", "error": None,
                         "host": host, "hardware_fingerprint": fp})
    rows.append({**rows[0], "key": "bad", "batch_size": 64, "status": "failed", "throughput": None})
    return pd.DataFrame(rows)


def _hosts():
    return [{"name": "o1", "hardware_fingerprint": "old", "hardware": {**HW, "cpu_model": "Old CPU"}},
            {"name": "n1", "hardware_fingerprint": "new", "hardware": {**HW, "cpu_model": "New CPU",
                                                                         "available_cpus": list(range(8))}}]


def test_best_configuration_and_cost_per_host_type():
    from wb_core.analysis.recommend import Constraints

    raw = compare_host_types(_fleet_frame(), _hosts(), prices=parse_prices(["Old CPU=1.0", "n1=2.0"]))
    c = raw.set_index("hardware_fingerprint")
    assert c.loc["old", "best_config"].startswith("OpenVINO · FP32 · batch 8") and c.loc["old", "throughput"] == 400
    assert c.loc["old", "throughput_per_core"] == 200 and c.loc["old", "runs_failed"] == 1
    # 4 usable CPUs / 2 used -> 2 copies; 1 USD/h / (800/s * 3600) * 1e6
    assert c.loc["old", "copies_per_host"] == 2
    assert c.loc["old", "cost_per_million"] == pytest.approx(1.0 / (800 * 3600) * 1e6)
    assert c.loc["new", "copies_per_host"] == 4 and c.loc["new", "price_per_hour"] == 2.0
    # Under a p99 limit the old type keeps only batch 1; a limit nothing meets gives a note.
    c2 = compare_host_types(_fleet_frame(), _hosts(), constraints=Constraints(max_p99_ms=2)).set_index(
        "hardware_fingerprint")
    assert c2.loc["old", "throughput"] == 100 and c2.loc["new", "throughput"] == 1200
    c3 = compare_host_types(_fleet_frame(), _hosts(), constraints=Constraints(max_p99_ms=0.01))
    assert c3.best_config.isna().all() and c3.note.str.contains("p99").all()
    assert len(host_type_bars(raw).data) == 3 and not host_type_bars(c3).data, host_type_scatter(_fleet_frame())
    table = config_by_host_type(_fleet_frame())
    assert list(table.columns) == ["new", "old"] and len(table) == 2


def test_prices_and_host_type_selection_errors():
    assert cost_per_million(None, 1.0) is None and cost_per_million(10, None) is None
    with pytest.raises(ConfigError, match="HOST_OR_TYPE"):
        parse_prices(["1.0"])
    with pytest.raises(ConfigError, match="positive"):
        parse_prices(["a=-1"])
    with pytest.raises(ConfigError, match="No host, hardware type or CPU model named nope"):
        compare_host_types(_fleet_frame(), _hosts(), prices={"nope": 1.0})
    sub, fp, hw = select_host_type(_fleet_frame(), _hosts(), "n1")
    assert fp == "new" and set(sub.host) == {"n1"} and hw["cpu_model"] == "New CPU"
    assert select_host_type(_fleet_frame(), _hosts(), "ol")[1] == "old"
    with pytest.raises(ConfigError, match="matches none"):
        select_host_type(_fleet_frame(), _hosts(), "zzz")


# ---------------------------------------------------------------- hosts that misbehave


class Misbehaving(StandInFleet):
    """A stand-in fleet where `garbage` hosts report a throughput that is no number, `hung` hosts
    never answer (yet stay in the cluster), and the first group sent to `cut` is lost with the
    connection (as Dask's client gives up its futures when the scheduler connection drops)."""

    def __init__(self, hosts, garbage=(), hung=(), cut=(), **kw):
        super().__init__(hosts, **kw)
        self.garbage, self.hung, self.cut = set(garbage), set(hung), set(cut)
        self.lost_with_connection = set()

    def interrupted(self, fut):
        return fut in self.lost_with_connection

    def submit(self, host, job):
        if host.name in self.hung:
            return Future()  # never completes, never sends a point
        if host.name in self.cut:
            self.cut.discard(host.name)
            fut = Future()
            fut.cancel()
            fut.set_running_or_notify_cancel()
            self.lost_with_connection.add(fut)
            return fut
        if host.name in self.garbage:
            self._spoil(job)
        return super().submit(host, job)

    def _spoil(self, job):
        """What the host streams for `job` arrives with a throughput that is no number."""
        real_put = self.q.put

        def put(msg):
            if msg.get("job") == job["id"]:
                msg = {**msg, "metrics": {**msg["metrics"], "throughput": float("nan")}}
            real_put(msg)

        self.q.put = put


def test_a_host_sending_garbage_is_set_aside_and_its_group_measured_on_its_type(lenet_ir, db, fast):
    fleet = Misbehaving([_host("a1", "slow"), _host("a2", "slow"), _host("b1", "fast")], garbage={"a1"})
    s = run_sweep(lenet_ir, SPEC, db, "g", settings=fast, executor=fleet)
    df = load_results(db, "g")
    assert len(df) == 12 and df.key.is_unique and (df.status == "ok").all()
    assert "a1" not in set(df.host)  # nothing it sent was stored
    assert set(df[df.hardware_fingerprint == "slow"].host) == {"a2"} and (df.throughput > 0).all()
    assert any("a1 sent a point that is not a measurement (throughput 'nan')" in e for e in s.errors), s.errors


def test_a_hung_host_is_noticed_and_its_group_measured_on_its_type(lenet_ir, db, fast, monkeypatch):
    from wb_core.fleet import sweep as fleet_sweep

    monkeypatch.setattr(fleet_sweep, "HANG_MARGIN_S", 0.0)
    fleet = Misbehaving([_host("a1", "slow"), _host("a2", "slow"), _host("b1", "fast")], hung={"a1"})
    s = run_sweep(lenet_ir, SPEC, db, "h", settings=fast, executor=fleet, timeout_s=1)
    df = load_results(db, "h")
    assert len(df) == 12 and (df.status == "ok").all() and "a1" not in set(df.host)
    assert any("a1 stopped answering" in e for e in s.errors), s.errors


def test_groups_lost_with_the_connection_go_back_to_the_queue(lenet_ir, db, fast):
    fleet = Misbehaving([_host("a1", "slow"), _host("b1", "fast")], cut={"a1", "b1"})
    s = run_sweep(lenet_ir, SPEC, db, "c", settings=fast, executor=fleet)
    df = load_results(db, "c")
    # Both hosts stay in use (the connection, not the host, was lost) and nothing is failed.
    assert len(df) == 12 and (df.status == "ok").all() and set(df.host) == {"a1", "b1"}
    assert (s.ok, s.failed) == (12, 0) and not fleet.cut
    assert len(fleet.ran) == len(set(fleet.ran)) == 12
