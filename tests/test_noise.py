"""Measurements that hold up under noise: enough requests, honest spaces, repeats and intervals."""

from __future__ import annotations

from wb_core.measure import is_stable


def test_agreeing_windows_are_not_stable_on_a_handful_of_requests():
    windows = [100.0, 101.0, 100.5]
    assert is_stable(windows, 3, 0.05)
    assert not is_stable(windows, 3, 0.05, requests=6, min_requests=100)
    assert is_stable(windows, 3, 0.05, requests=150, min_requests=100)


def test_repeats_are_interleaved_rounds_in_fresh_workers_with_intervals(lenet_ir, db, fast):
    from wb_core.config import SweepSpec
    from wb_core.store import Store, load_results
    from wb_core.sweep.local import run_sweep

    spec = SweepSpec(backends="openvino", threads="1,2", batch_sizes="1", repeats=3)
    seen = []
    summary = run_sweep(lenet_ir, spec, db, "r", settings=fast, on_point=lambda p: seen.append(p))
    assert summary.ok == 2 and summary.failed == 0
    # one row per configuration, key unchanged, every round stored
    df = load_results(db, "r")
    assert sorted(df["key"]) == sorted(c.key for c in spec.expand())
    with Store(db) as s:
        rounds = s.rounds("r")
    assert len(rounds) == 6 and {r["round"] for r in rounds} == {0, 1, 2}
    # interleaved: each round of every config before the next round of any
    by_time = [p["round"] for p in seen]
    assert by_time == sorted(by_time)
    for _, row in df.iterrows():
        assert row["rounds"] == 3 and len(row["round_throughput"]) == 3
        assert row["throughput_ci_low"] <= row["throughput_mean"] <= row["throughput_ci_high"]
        assert row["throughput"] == sorted(row["round_throughput"])[1]  # the median
        assert row["latency_ms_p99_ci_low"] <= row["latency_ms_p99_ci_high"]
    # a resume with more repeats measures only the rounds missing
    more = run_sweep(lenet_ir, SweepSpec(backends="openvino", threads="1,2", batch_sizes="1", repeats=4), db, "r",
                     settings=fast)
    assert more.ok == 2
    with Store(db) as s:
        assert len(s.rounds("r")) == 8
    assert set(load_results(db, "r")["rounds"]) == {4}


def test_bad_repeats_get_one_sentence():
    import pytest

    from wb_core.config import SweepSpec
    from wb_core.errors import ConfigError

    for bad in (0, -2, "x", 1.5):
        with pytest.raises(ConfigError, match="Repeats must be a whole number"):
            SweepSpec(repeats=bad)


def test_cli_refuses_zero_repeats_in_one_sentence(lenet_ir, db):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "wb_core.cli", "profile", str(lenet_ir), "--db", str(db),
                        "--repeats", "0", "-q"], capture_output=True, text=True)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "Repeats must be a whole number of at least 1" in out and "Traceback" not in out
