"""Measurements that hold up under noise: enough requests, honest spaces, repeats and intervals."""

from __future__ import annotations

import pytest

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


def _rounds(values, p99=1.0):
    from wb_core.sweep.context import aggregate_rounds

    rounds = [{"round": i, "status": "ok", "metrics": {"throughput": v, "latency_ms_p99": p99 * (1 + 0.01 * i)}}
              for i, v in enumerate(values)]
    return aggregate_rounds(rounds, len(values))[1]


def test_overlapping_intervals_are_a_tie_and_the_simpler_run_is_picked():
    from analysis_data import HARDWARE, frame, run
    from wb_core.analysis.recommend import recommend

    same = [1000, 1040, 980, 1010, 1030]
    df = frame([
        run(threads=4, **_rounds([v * 1.01 for v in same])),  # the same speed with threads set by hand
        run(threads=None, **_rounds(same)),  # runtime defaults
        run(threads=1, cores=[0], batch=2, **_rounds([700, 690, 720, 705, 710])),  # clearly slower
    ])
    rec = recommend(df, hardware=HARDWARE)
    assert len(rec.tied) == 2
    assert rec.best["threads"] is None  # the runtime's defaults win the tie
    assert "tied within noise" in rec.reason
    assert rec.margin is not None and rec.margin.clear and 1.3 < rec.margin.ratio < 1.55
    assert "95% CI" in rec.reason


def test_unmeasured_int8_is_passed_over_unless_allowed():
    from analysis_data import HARDWARE, frame, run
    from wb_core.analysis.recommend import recommend

    df = frame([run(precision="int8", thr=3000), run(precision="fp32", thr=1000)])
    rec = recommend(df, hardware=HARDWARE)
    assert rec.best["precision"] == "fp32" and "never measured" in rec.reason
    allowed = recommend(df, hardware=HARDWARE, allow_unmeasured_accuracy=True)
    assert allowed.best["precision"] == "int8" and "Accuracy not measured" in allowed.reason
    measured = recommend(frame([run(precision="int8", thr=3000, accuracy=0.95, accuracy_drop=0.001),
                                run(precision="fp32", thr=1000)]), hardware=HARDWARE)
    assert measured.best["precision"] == "int8" and "measured" not in measured.reason


def test_paired_ratio_cancels_drift_both_saw():
    from wb_core.stats import ratio

    drift = [1.0, 0.7, 1.2, 0.9, 1.1]
    a = [100 * d for d in drift]
    b = [110 * d for d in drift]
    paired = ratio(a, b, [0, 1, 2, 3, 4], [0, 1, 2, 3, 4])
    unpaired = ratio(a, b)
    assert paired.paired and abs(paired.ratio - 1.1) < 1e-9 and paired.clear
    assert not unpaired.clear  # without the pairing the drift hides the 10%


@pytest.mark.slow
def test_confirm_measures_the_pick_beside_the_defaults_and_never_recommends_worse(lenet_ir, db, fast):
    from wb_core.api import confirm
    from wb_core.config import SweepSpec
    from wb_core.sweep.local import run_sweep

    run_sweep(lenet_ir, SweepSpec(backends="openvino", threads="1,2", batch_sizes="1", repeats=2), db, "s",
              settings=fast)
    out = confirm("s", db, rounds=3, settings=fast, design="rounds")  # fresh rounds: three of each
    assert set(out["defaults"]) >= {"OpenVINO LATENCY hint"}
    assert out["tuned"]["rounds"] == 3 and out["gain"] is not None and out["gain"].n == 3
    rec = out["recommended"]
    # The verdict follows the interval both ways (not only when it says "better").
    assert out["tuned_is_better"] == (out["gain"].low > 1), out["verdict"]
    if out["tuned_is_better"]:
        assert out["gain"].low > 1 and rec["key"] == out["tuned"]["key"]
    else:
        assert rec["key"] in {r["key"] for r in out["defaults"].values()}
        assert ("within noise" if out["gain"].high >= 1 else "better beyond noise") in out["verdict"]


def test_smart_search_does_not_move_on_a_gain_within_noise():
    from wb_core.config import SweepSpec
    from wb_core.sweep.search import Goal, Observation, drive, smart

    spec = SweepSpec(backends="openvino", threads="1,2", batch_sizes="1,2")

    def evaluate(noisy):
        def run(configs):  # threads 1 looks 10% faster, but its interval overlaps threads 2's; batch 2 is slower
            out = []
            for c in configs:
                thr = (1100.0 if c.threads == 1 else 1000.0) * (0.8 if c.batch_size == 2 else 1.0)
                ci = (thr - 150, thr + 150) if noisy else None
                out.append(Observation(c, "ok", thr, 1.0, ci, (0.9, 1.1) if noisy else None))
            return out
        return run

    goal = Goal()
    assert goal.beats(Observation(spec.expand()[1], "ok", 1100.0, 1.0), Observation(spec.expand()[0], "ok", 1000.0, 1.0), 0.03)
    assert not goal.beats(Observation(spec.expand()[1], "ok", 1100.0, 1.0, (950, 1250)),
                          Observation(spec.expand()[0], "ok", 1000.0, 1.0, (850, 1150)), 0.03)

    def measured(noisy):
        return {(o.config.threads, o.config.batch_size) for o in drive(smart(spec.expand(), goal), evaluate(noisy))}

    # Without intervals the 10% is a gain: the search moves to threads 1 and tunes its batch size there.
    assert (1, 2) in measured(False)
    # With overlapping intervals it stays at the start (threads 2): threads 1's batch ladder is never climbed.
    noisy = measured(True)
    assert (1, 1) in noisy and (1, 2) not in noisy, noisy


def _loaded_core(cpu: int):
    """A busy-loop process pinned to one CPU, started and spinning before it is returned."""
    import subprocess
    import sys
    import time

    code = (f"import os, sys\nos.sched_setaffinity(0, {{{cpu}}})\nsys.stdout.write('go\\n')\nsys.stdout.flush()\n"
            "while True:\n    pass\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "go"
    time.sleep(0.2)
    return p


def _flag_follows_numbers(row):
    from wb_core.measure import BUSY_OTHER_CPU, BUSY_STEAL_PCT

    assert isinstance(row["other_cpu"], float) and isinstance(row["steal_pct"], float)
    assert row["other_cpu"] >= 0 and 0 <= row["steal_pct"] <= 100
    assert bool(row["busy"]) == (row["other_cpu"] > BUSY_OTHER_CPU or row["steal_pct"] > BUSY_STEAL_PCT)


def test_a_point_sharing_its_core_with_a_busy_loop_is_flagged_busy_and_can_be_measured_again(lenet_ir, db, fast):
    import os

    from wb_core.config import SweepSpec
    from wb_core.store import load_results
    from wb_core.sweep.local import run_sweep

    cpu = min(os.sched_getaffinity(0))
    spec = SweepSpec(backends="openvino", threads="1", cores=str(cpu), batch_sizes="1")
    # Two busy loops on the worker's core: they take about two thirds of it, far above the 0.25 rule,
    # so a machine whose other load squeezes everyone on that core still flags the point.
    hogs = [_loaded_core(cpu), _loaded_core(cpu)]
    try:
        summary = run_sweep(lenet_ir, spec, db, "busy", settings=fast)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
            hog.stdout.close()
    row = load_results(db, "busy").iloc[0]
    assert row["status"] == "ok" and list(row["load_cores"]) == [cpu]
    assert row["other_cpu"] > 0.25 and row["busy"]  # the loops had about two thirds of the core
    _flag_follows_numbers(row)
    from wb_core.axes import word_for_cli, word_for_dashboard

    assert summary.busy and any("--remeasure-busy" in word_for_cli(n) for n in summary.notes)
    assert not any("--" in word_for_dashboard(n) for n in summary.notes)
    # shown: a column and a note in `wb results`, a section in the report
    import subprocess
    import sys

    from wb_core.report import build_report

    r = subprocess.run([sys.executable, "-m", "wb_core.cli", "results", "--study", "busy", "--db", str(db)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "other_cpu" in r.stdout and " busy" in r.stdout
    assert "measured on a busy machine" in r.stdout and "--remeasure-busy" in r.stdout
    import html

    from wb_core.faces import label

    page = build_report(db, "busy")
    assert "<h2>Busy machine</h2>" in page and f"<th>{html.escape(label('other_cpu'))}</th>" in page  # worded
    # a plain rerun keeps the busy point; --remeasure-busy measures it again and replaces it
    again = run_sweep(lenet_ir, spec, db, "busy", settings=fast)
    assert again.ok == 0 and again.skipped_done == 1
    redo = run_sweep(lenet_ir, spec, db, "busy", settings=fast, remeasure_busy=True)
    assert redo.ok == 1
    fresh = load_results(db, "busy").iloc[0]
    assert fresh["created_at"] != row["created_at"]
    _flag_follows_numbers(fresh)


def test_an_unloaded_point_carries_its_load_numbers_and_the_flag_follows_them(lenet_ir, db, fast):
    from wb_core.config import SweepSpec
    from wb_core.store import Store, load_results
    from wb_core.sweep.local import run_sweep

    run_sweep(lenet_ir, SweepSpec(backends="openvino", threads="1", batch_sizes="1", repeats=2), db, "idle",
              settings=fast)
    row = load_results(db, "idle").iloc[0]
    _flag_follows_numbers(row)
    with Store(db) as s:
        rounds = s.rounds("idle")
    assert all("other_cpu" in r["metrics"] and "busy" in r["metrics"] for r in rounds)
    assert bool(row["busy"]) == any(r["metrics"]["busy"] for r in rounds)


def test_an_idle_interval_is_not_busy_and_a_loaded_one_is():
    """The busy flag from /proc/stat counters: our own CPU time is not "other" load; numbers worked by hand."""
    import os

    from wb_core.measure import LoadSnapshot, machine_load

    tick = os.sysconf("SC_CLK_TCK")

    def between(own_s, others_s, steal_s=0.0, wall_s=2.0):
        busy_ticks = round((own_s + others_s + steal_s) * tick)
        a = LoadSnapshot(10.0, 1.0, (0,), 1000, 50, 5000)
        b = LoadSnapshot(10.0 + wall_s, 1.0 + own_s, (0,), 1000 + busy_ticks, 50 + round(steal_s * tick),
                         5000 + round(wall_s * tick))
        return machine_load(a, b)

    idle = between(own_s=1.9, others_s=0.1)  # we used 95% of the core, others 0.05 cores
    assert idle["busy"] is False and idle["other_cpu"] == pytest.approx(0.05, abs=0.01) and idle["steal_pct"] == 0
    loaded = between(own_s=1.0, others_s=1.0)  # a busy loop took half the core
    assert loaded["busy"] is True and loaded["other_cpu"] == pytest.approx(0.5, abs=0.01)
    stolen = between(own_s=1.6, others_s=0.0, steal_s=0.4)  # the hypervisor took 20% of the core
    assert stolen["busy"] is True and stolen["steal_pct"] == pytest.approx(20.0, abs=1)
    assert machine_load(None, None) == {}


def test_bad_interval_targets_and_budgets_get_one_sentence(lenet_ir, db):
    import subprocess
    import sys

    from wb_core.api import profile
    from wb_core.config import check_max_rounds, parse_ci_target
    from wb_core.errors import ConfigError

    assert parse_ci_target("3%") == pytest.approx(0.03) and parse_ci_target("12.5") == pytest.approx(0.125)
    for text, words in (("0%", "above 0%"), ("150%", "at most 100%"), ("three", "percentage such as 3%")):
        with pytest.raises(ConfigError, match=words):
            parse_ci_target(text)
    for bad in (0, -1):
        with pytest.raises(ConfigError, match="at least one round"):
            check_max_rounds(bad)
    with pytest.raises(ConfigError, match="above 0%"):
        profile(lenet_ir, db=db, ci_target=0.0)
    with pytest.raises(ConfigError, match="at least one round"):
        profile(lenet_ir, db=db, ci_target=0.03, max_rounds=0)
    for args, words in ((["--ci", "0%"], "above 0%"), (["--ci", "101%"], "at most 100%"),
                        (["--ci", "3%", "--max-rounds", "0"], "at least one round")):
        r = subprocess.run([sys.executable, "-m", "wb_core.cli", "profile", str(lenet_ir), "--db", str(db), "-q",
                            *args], capture_output=True, text=True)
        out = r.stdout + r.stderr
        assert r.returncode == 2 and words in out and "Traceback" not in out and len(out.strip().splitlines()) == 1
    assert not db.exists()  # nothing was measured, nothing stored


def test_an_interval_target_adds_rounds_until_the_budget_is_spent(lenet_ir, db, fast):
    from wb_core.config import SweepSpec
    from wb_core.store import Store, load_results
    from wb_core.sweep.local import run_sweep

    spec = SweepSpec(backends="openvino", threads="1", batch_sizes="1")
    # an unreachable target: the leader (the only config, so the best) gets the whole budget
    tight = run_sweep(lenet_ir, spec, db, "tight", settings=fast, ci_target=1e-6, max_rounds=1)
    assert tight.ok == 1 and tight.ci.extra_rounds == 1 and tight.ci.missed == [spec.expand()[0].label()]
    assert not tight.ci.reached and tight.ci.half_widths[tight.ci.missed[0]] > 1e-6
    from wb_core.axes import word_for_cli

    assert any("did not" in n and "--max-rounds" in word_for_cli(n) for n in tight.notes)
    with Store(db) as s:
        rounds = s.rounds("tight")
    assert sorted(r["round"] for r in rounds) == [0, 1, 2, 3]  # 3 first rounds, then 1 extra
    row = load_results(db, "tight").iloc[0]
    assert row["rounds"] == 4 and row["rounds_planned"] == 4 and len(row["round_throughput"]) == 4


@pytest.mark.slow
def test_an_interval_target_reports_each_leader_by_its_own_interval(lenet_ir, db, fast):
    from wb_core.config import SweepSpec
    from wb_core.store import load_results
    from wb_core.sweep.local import run_sweep

    spec = SweepSpec(backends="openvino", threads="1,2", batch_sizes="1")
    # A target no real measurement meets (+-0.0001%): every leader misses it and the whole budget is spent.
    tight = run_sweep(lenet_ir, spec, db, "tight", settings=fast, ci_target=1e-6, max_rounds=2).ci
    assert tight.missed and not tight.reached and tight.extra_rounds == 2
    assert all(tight.half_widths[lab] > 1e-6 for lab in tight.missed)
    assert (load_results(db, "tight")["rounds"] >= 3).all() and load_results(db, "tight")["rounds"].max() == 5
    # A target of +-100%: three rounds of LeNet meet it unless their spread is wild; each leader is
    # reported by its own interval, and rounds stop being added once all met it.
    loose = run_sweep(lenet_ir, spec, db, "loose", settings=fast, ci_target=1.0, max_rounds=2).ci
    assert all(loose.half_widths[lab] <= 1.0 for lab in loose.reached)
    assert all(loose.half_widths[lab] > 1.0 for lab in loose.missed)
    assert loose.extra_rounds == 2 if loose.missed else loose.extra_rounds < 2
    assert loose.reached, loose.half_widths


def test_results_and_report_show_intervals_and_ties_as_columns(lenet_ir, db, fast):
    import subprocess
    import sys

    from wb_core.api import results
    from wb_core.config import SweepSpec
    from wb_core.report import build_report
    from wb_core.sweep.local import run_sweep

    run_sweep(lenet_ir, SweepSpec(backends="openvino", threads="1,2", batch_sizes="1", repeats=2), db, "cols",
              settings=fast)
    df = results("cols", db)
    assert list(df["tied_with_best"]).count("best") == 1
    assert set(df["tied_with_best"]) <= {"best", "yes", "no"}
    best = df[df["tied_with_best"] == "best"].iloc[0]
    assert best["throughput"] == df["throughput"].max()
    for _, row in df[df["tied_with_best"] != "best"].iterrows():  # the tie follows the intervals
        overlap = row["throughput_ci_low"] <= best["throughput_ci_high"] and \
            best["throughput_ci_low"] <= row["throughput_ci_high"]
        assert (row["tied_with_best"] == "yes") == overlap
    r = subprocess.run([sys.executable, "-m", "wb_core.cli", "results", "--study", "cols", "--db", str(db)],
                       capture_output=True, text=True)
    header = r.stdout.splitlines()[0].split()
    for col in ("throughput_ci_low", "throughput_ci_high", "latency_ms_p99_ci_low", "latency_ms_p99_ci_high",
                "tied_with_best", "rounds", "other_cpu", "busy"):
        assert col in header
    import html

    from wb_core.faces import label

    page = build_report(db, "cols")
    for col in ("throughput_ci_low", "throughput_ci_high", "latency_ms_p99_ci_high", "tied_with_best"):
        assert f"<th>{html.escape(label(col))}</th>" in page  # the report's columns in words
    assert "<td>best</td>" in page


def test_every_new_column_has_a_worded_label():
    from wb_core.ui.words import LABELS

    for col in ("throughput_ci_low", "throughput_ci_high", "latency_ms_p99_ci_low", "latency_ms_p99_ci_high",
                "tied_with_best", "other_cpu", "steal_pct", "busy"):
        assert col in LABELS and "_" not in LABELS[col]
