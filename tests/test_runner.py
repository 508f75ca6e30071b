"""Sweeps with real OpenVINO workers on the LeNet IR: rows, pinning, precision, failures, resume."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from cpu_flags import bf16_native
from wb_core.config import SweepSpec
from wb_core.hardware import detect
from wb_core.store import RESULT_COLUMNS, Store, load_results
from wb_core.sweep.local import run_sweep


def test_sweep_stores_every_point_with_public_columns(lenet_ir, db, fast):
    spec = SweepSpec(backends="openvino", threads="1,2", batch_sizes="1,8", cores="none,0")
    s = run_sweep(lenet_ir, spec, db, "t", settings=fast)
    assert s.ok == 8 and s.failed == 0
    df = load_results(db, "t")
    assert list(df.columns[: len(RESULT_COLUMNS)]) == list(RESULT_COLUMNS)
    assert (df.status == "ok").all()
    assert (df.latency_ms_p50 <= df.latency_ms_p99).all() and (df.throughput > 0).all()
    assert set(df.executed_precision) == {"f32"}
    assert set(df.cores) == {"none", "0"}
    # How much faster batch 8 is depends on the machine and its load: benchmarks/ measures that, not this test.
    assert sorted(set(df.batch_size)) == [1, 8] and sorted(set(df.threads)) == [1, 2]


@pytest.mark.skipif(len(detect().available_cpus) < 2, reason="needs two CPUs")
def test_pinning_confines_every_runtime_thread(lenet_ir, db, fast):
    """Pinned and unpinned in one run; the checks hold on a busy machine too.

    Every thread of a pinned worker (OpenVINO's pool included) may run only on the cores asked
    for, read per thread in the worker. Two threads pinned to one core can use at most that
    core: a ceiling that other load can only lower, and that a broken pinning on an idle machine
    (two threads on two cores) would break.
    """
    from dataclasses import replace

    spec = SweepSpec(backends="openvino", threads="2", batch_sizes="64", cores="none,0,0-1")
    run_sweep(lenet_ir, spec, db, "pin", settings=replace(fast, max_time_s=1.0))
    df = load_results(db, "pin").set_index("cores")
    assert (df["status"] == "ok").all(), df["error"].tolist()
    everywhere = sorted(detect().available_cpus)
    assert list(df.loc["0", "thread_cpus"]) == [0]
    assert list(df.loc["0-1", "thread_cpus"]) == [0, 1]
    assert list(df.loc["none", "thread_cpus"]) == everywhere
    assert df.loc["0", "process_threads"] >= 2  # the runtime's pool was there to be checked
    assert df.loc["0", "cpu_util"] < 1.15


def test_bf16_runs_really_execute_bf16(lenet_ir, db, fast):
    ok = bf16_native()  # from /proc/cpuinfo, not from the rule under test
    spec = SweepSpec(backends="openvino", precisions="fp32,bf16", threads="1", batch_sizes="1")
    run_sweep(lenet_ir, spec, db, "prec", settings=fast)
    df = load_results(db, "prec").set_index("precision")
    assert df.loc["fp32", "executed_precision"] == "f32"
    if ok:
        assert df.loc["bf16", "executed_precision"] == "bf16"
    else:
        assert df.loc["bf16", "status"] == "skipped" and "bf16" in df.loc["bf16", "error"]


def test_tensorflow_backend_on_ir_is_skipped_with_reason(lenet_ir, db, fast):
    s = run_sweep(lenet_ir, SweepSpec(backends="tensorflow"), db, "skip", settings=fast)
    df = load_results(db, "skip")
    assert s.skipped == 1 and "cannot run a model in the OpenVINO IR format" in df.error.iloc[0]


def test_worker_out_of_memory_is_a_failed_record_and_sweep_goes_on(lenet_ir, db, fast):
    spec = SweepSpec(backends="openvino", batch_sizes="1")
    s = run_sweep(lenet_ir, spec, db, "oom", settings=fast, memory_limit_mb=60)
    assert s.failed == 1
    df = load_results(db, "oom")
    assert df.status.iloc[0] == "failed" and df.error.iloc[0]
    # The same study resumes and measures the failed point once memory allows.
    s2 = run_sweep(lenet_ir, spec, db, "oom", settings=fast)
    assert s2.ok == 1
    assert len(load_results(db, "oom")) == 1


def test_rerun_skips_stored_points(lenet_ir, db, fast):
    spec = SweepSpec(backends="openvino", batch_sizes="1,2")
    run_sweep(lenet_ir, spec, db, "r", settings=fast)
    first = load_results(db, "r").set_index("key").created_at
    s = run_sweep(lenet_ir, spec, db, "r", settings=fast)
    assert s.skipped_done == 2 and s.ok == 0
    assert load_results(db, "r").set_index("key").created_at.equals(first)


def test_killed_sweep_resumes_without_measuring_twice(lenet_ir, db, tmp_path):
    cmd = [sys.executable, "-m", "wb_core.cli", "profile", str(lenet_ir), "--backend", "openvino",
           "--threads", "1,2", "--batch", "1,2,4,8", "--db", str(db), "--study", "k", "--max-time", "0.6",
           "--window", "0.2", "--warmup", "0.1", "--quiet"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    stored = 0
    while time.time() < deadline and stored < 2:
        time.sleep(0.2)
        if db.exists():
            try:
                with sqlite3.connect(db, timeout=5) as c:
                    stored = c.execute("SELECT COUNT(*) FROM runs WHERE status='ok'").fetchone()[0]
            except sqlite3.OperationalError:
                pass
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert stored >= 2
    before = load_results(db, "k").set_index("key").created_at
    # Killed within 0.2 s of the second point stored, with six more of at least 0.6 s each to go: on
    # any machine, fast or busy, the kill lands before the end.
    assert len(before) < 8, "the sweep finished before it could be killed"
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"{len(before)} already stored" in done.stdout
    after = load_results(db, "k")
    assert len(after) == 8 and after.key.is_unique and (after.status == "ok").all()
    # Points stored before the kill were not measured again.
    assert after.set_index("key").created_at[before.index].equals(before)


def test_study_with_other_model_is_refused(lenet_ir, lenet_ir_copy, db, fast, tmp_path):
    from wb_core.errors import StoreError

    run_sweep(lenet_ir, SweepSpec(), db, "s", settings=fast)
    other = tmp_path / "other.xml"
    other.write_text(lenet_ir_copy.read_text().replace("lenet5", "lenet5x"))
    (tmp_path / "other.bin").write_bytes(lenet_ir_copy.with_suffix(".bin").read_bytes())
    with pytest.raises(StoreError, match="different model"):
        run_sweep(other, SweepSpec(), db, "s", settings=fast)
    assert len(load_results(db, "s")) == 1


def test_readonly_store_refuses_writes_cleanly(lenet_ir, db, fast):
    from wb_core.errors import StoreError

    run_sweep(lenet_ir, SweepSpec(), db, "ro", settings=fast)
    with Store(db, readonly=True) as s, pytest.raises(StoreError, match="Cannot write"):
        s.add_run("ro", "x", {}, "ok")
