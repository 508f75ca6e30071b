"""Faults during a sweep: each gives a clear failed record or message, and no finished point is lost."""

import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace

import psutil
import pytest

from wb_core.config import RunConfig, SweepSpec
from wb_core.errors import StoreError
from wb_core.store import Store, load_results
from wb_core.sweep.local import run_sweep


def _measuring_worker(db, min_age=1.0, timeout=120):
    """The first measuring worker of this process alive for `min_age` seconds.

    The study row is written after the preflight inspection, so once it exists every worker
    child is a measuring one.
    """
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with sqlite3.connect(db, timeout=1) as c:
                if not c.execute("SELECT COUNT(*) FROM studies").fetchone()[0]:
                    raise sqlite3.OperationalError("no study yet")
        except sqlite3.OperationalError:
            time.sleep(0.05)
            continue
        for p in psutil.Process().children(recursive=True):
            try:
                if "wb_core.proc.worker" in " ".join(p.cmdline()) and time.time() - p.create_time() > min_age:
                    return p
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.05)
    raise AssertionError("no worker appeared")


def _sweep_with(action, lenet_ir, db, settings, **kw):
    # Two points in two workers: threads alone would share one (a compile property), so the second
    # point is pinned to a core as well, which needs a process of its own.
    configs = [RunConfig(backend="openvino", threads=1, batch_size=1),
               RunConfig(backend="openvino", threads=2, batch_size=1, cores=(0,))]
    t = threading.Thread(target=lambda: action(_measuring_worker(db)), daemon=True)
    t.start()
    summary = run_sweep(lenet_ir, SweepSpec(), db, "f", settings=settings, configs=configs, **kw)
    t.join()
    return summary, load_results(db, "f").set_index("threads")


def test_worker_killed_with_sigkill(lenet_ir, db, fast):
    settings = replace(fast, max_time_s=4.0, tolerance=1e-9)  # never stable: the worker stays busy
    s, df = _sweep_with(lambda p: p.send_signal(signal.SIGKILL), lenet_ir, db, settings)
    assert (s.failed, s.ok) == (1, 1)
    assert "killed by signal SIGKILL" in df.loc[1, "error"]
    assert df.loc[2, "status"] == "ok"


def test_worker_that_hangs_is_killed_after_its_timeout(lenet_ir, db, fast):
    settings = replace(fast, max_time_s=4.0, tolerance=1e-9)
    # 15 s: far above a worker's start-up on a busy machine, so only the stopped worker is killed; a
    # kill that never came would hang the test until pytest-timeout fails it.
    s, df = _sweep_with(lambda p: p.send_signal(signal.SIGSTOP), lenet_ir, db, settings, timeout_s=15.0)
    assert "stopped responding" in df.loc[1, "error"]
    assert df.loc[2, "status"] == "ok"
    assert not [p for p in psutil.Process().children(recursive=True) if p.status() == psutil.STATUS_STOPPED]


def _fixed_batch_ir(tmp_path):
    """An IR whose Reshape only fits batch 2: other batch sizes fail inside OpenVINO."""
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([-1, 4], ov.Type.f32, name="x")
    y = ops.reshape(x, ops.constant([2, 2, 2], ov.Type.i64), special_zero=False)
    model = ov.Model([ops.relu(y)], [x], "fixed")
    path = tmp_path / "fixed.xml"
    ov.save_model(model, str(path), compress_to_fp16=False)
    return path


def test_exception_inside_the_runtime_fails_one_point_only(tmp_path, db, fast):
    path = _fixed_batch_ir(tmp_path)
    s = run_sweep(path, SweepSpec(batch_sizes="1,2,3"), db, "rt", settings=fast)
    df = load_results(db, "rt").set_index("batch_size")
    assert df.loc[2, "status"] == "ok"
    assert df.loc[1, "status"] == "failed" and df.loc[3, "status"] == "failed"
    assert "batch size 1" in df.loc[1, "error"] and "\n" not in df.loc[1, "error"]
    assert s.ok == 1 and s.failed == 2


def test_out_of_memory_at_a_huge_batch_keeps_the_small_one(lenet_ir, db, fast):
    s = run_sweep(lenet_ir, SweepSpec(batch_sizes="1,65536"), db, "oom", settings=fast, memory_limit_mb=1500)
    df = load_results(db, "oom").set_index("batch_size")
    assert df.loc[1, "status"] == "ok"
    assert df.loc[65536, "status"] == "failed" and df.loc[65536, "error"]
    assert s.ok == 1 and s.failed == 1


def test_two_sweeps_write_one_database_at_once(lenet_ir, db):
    common = ["--db", str(db), "--quiet", "--max-time", "0.4", "--window", "0.1", "--warmup", "0.05",
              "--batch", "1,2,4"]
    procs = [subprocess.Popen([sys.executable, "-m", "wb_core", "profile", str(lenet_ir), "--study", study, *common],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for study in ("a", "b", "a")]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    for study in ("a", "b"):
        df = load_results(db, study)
        assert len(df) == 3 and df.key.is_unique and (df.status == "ok").all()
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 6
        assert c.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0  # every lease given back
    # The two identical sweeps of "a" measured each point once between them, and said who left what.
    ok = [int(re.search(r"(\d+) ok", out).group(1)) for out, _ in (outs[0], outs[2])]
    stored = [int(re.search(r"(\d+) already stored", out).group(1)) for out, _ in (outs[0], outs[2])]
    left = [int(m.group(1)) if (m := re.search(r"(\d+) left to another sweep", out)) else 0
            for out, _ in (outs[0], outs[2])]
    assert sum(ok) == 3, outs
    assert [o + s_ + le for o, s_, le in zip(ok, stored, left)] == [3, 3], outs


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_points_leased_by_a_live_sweep_are_left_to_it_and_dead_leases_taken_over(lenet_ir, db, fast):
    import os
    import socket

    spec = SweepSpec(batch_sizes="1,2,3")
    keys = {c.batch_size: c.key for c in spec.expand()}
    host = socket.gethostname()
    run_sweep(lenet_ir, SweepSpec(batch_sizes="4"), db, "l", settings=fast)  # creates the study
    with Store(db) as st:
        assert st.claim("l", keys[1], "other-live", host, os.getpid()) is None  # this process: alive
        assert st.claim("l", keys[2], "other-dead", host, _dead_pid()) is None
        assert st.claim("l", keys[1], "someone", host, os.getpid())["owner"] == "other-live"
    s = run_sweep(lenet_ir, spec, db, "l", settings=fast)
    assert (s.ok, s.held_elsewhere) == (2, 1), s
    assert "left to another sweep" in s.line() and any("left to another sweep" in n for n in s.notes)
    df = load_results(db, "l").set_index("batch_size")
    assert 1 not in df.index and df.loc[2, "status"] == "ok" and df.loc[3, "status"] == "ok"
    with Store(db) as st:
        rows = st.db.execute("SELECT owner FROM leases")
    assert [r["owner"] for r in rows] == ["other-live"]  # ours given back, the live one untouched


def test_a_point_measured_while_another_sweep_runs_here_is_flagged(lenet_ir, db, fast):
    import os
    import socket

    run_sweep(lenet_ir, SweepSpec(batch_sizes="1"), db, "quiet", settings=fast)
    with Store(db) as st:
        st.claim("elsewhere", "k", "other-sweep", socket.gethostname(), os.getpid())
    run_sweep(lenet_ir, SweepSpec(batch_sizes="2"), db, "quiet", settings=fast)
    df = load_results(db, "quiet").set_index("batch_size")
    assert df.loc[2, "contended"] is True or df.loc[2, "contended"] == 1
    assert "contended" not in df.columns or df.loc[1, "contended"] != True  # noqa: E712


def test_a_worker_ends_within_a_second_of_its_parents_death(tmp_path):
    script = ("import sys, time\nfrom wb_core.proc.supervisor import Supervisor\n"
              "c = Supervisor(timeout=600).start({'task': 'selftest', 'mode': 'hang'})\n"
              "print(c.proc.pid, flush=True)\ntime.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    worker = psutil.Process(int(parent.stdout.readline()))
    time.sleep(1.0)  # the worker is up and hanging
    assert worker.is_running()
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    parent.stdout.close()
    deadline = time.time() + 2.0
    while time.time() < deadline:
        try:
            if worker.status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    else:
        worker.kill()
        raise AssertionError("the worker outlived its parent")


def test_a_worker_killed_mid_group_fails_only_the_point_it_was_measuring(lenet_ir, db, fast):
    spec = SweepSpec(batch_sizes="1,2,4,8")
    settings = replace(fast, max_time_s=3.0, tolerance=1e-9)  # each point runs its full time
    killed = []

    def on_point(point):
        if not killed:
            for p in psutil.Process().children(recursive=True):
                if "wb_core.proc.worker" in " ".join(p.cmdline()):
                    time.sleep(0.5)  # well inside the next point
                    p.send_signal(signal.SIGKILL)
                    killed.append(p.pid)

    s = run_sweep(lenet_ir, spec, db, "mid", settings=settings, on_point=on_point)
    df = load_results(db, "mid").set_index("batch_size")
    assert df.loc[1, "status"] == "ok"
    assert df.loc[2, "status"] == "failed" and "SIGKILL" in df.loc[2, "error"]
    assert 4 not in df.index and 8 not in df.index  # never started: left for a resume
    assert (s.ok, s.failed) == (1, 1) and any("not started" in n for n in s.notes)
    s2 = run_sweep(lenet_ir, spec, db, "mid", settings=fast)
    assert s2.ok == 3 and s2.skipped_done == 1


def test_a_briefly_locked_database_is_waited_for(lenet_ir, db, fast):
    run_sweep(lenet_ir, SweepSpec(), db, "lock", settings=fast)
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    threading.Timer(1.5, lambda: holder.execute("COMMIT")).start()
    s = run_sweep(lenet_ir, SweepSpec(batch_sizes="2"), db, "lock", settings=fast)
    assert s.ok == 1 and len(load_results(db, "lock")) == 2


def test_corrupt_database_is_a_clear_error(tmp_path):
    bad = tmp_path / "results.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="Cannot open results database"):
        Store(bad)
    r = subprocess.run([sys.executable, "-m", "wb_core", "results", "--study", "x", "--db", str(bad)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("Error: Cannot open results database")


def test_database_in_missing_folder(tmp_path, lenet_ir, fast):
    with pytest.raises(StoreError, match="folder"):
        run_sweep(lenet_ir, SweepSpec(), tmp_path / "nope" / "r.db", "x", settings=fast)


def test_store_queries_are_parameterised(db):
    """A hostile study name is stored as text, not run as SQL."""
    evil = "x'); DROP TABLE runs; --"
    with Store(db) as s:
        s.ensure_study(evil, "m", "openvino", "fp", {}, "hw", {}, {})
        s.add_run(evil, "k", {"backend": "openvino", "cores": None}, "ok", {"throughput": 1.0})
        assert s.get_study(evil)["name"] == evil
        assert len(s.runs(evil)) == 1
