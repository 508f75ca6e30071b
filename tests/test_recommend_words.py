"""What recommend says is what the table holds: every figure and every "highest"/"ahead of" in its
reason is checked against the frame; ties are broken by simplicity only within a stated margin;
runs that failed the accuracy guard and runs at other sequence lengths are never ranked in."""

from __future__ import annotations

import re

import numpy as np
import pytest

from analysis_data import HARDWARE, frame, run
from wb_core.analysis.recommend import recommend
from wb_core.analysis.words import run_name


def rounds(values, p99=1.0):
    from wb_core.sweep.context import aggregate_rounds

    rs = [{"round": i, "status": "ok", "metrics": {"throughput": v, "latency_ms_p99": p99}}
          for i, v in enumerate(values)]
    return aggregate_rounds(rs, len(values))[1]


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _fmt_matches(claimed: str, value: float) -> bool:
    """`claimed` is `value` written to 3 significant digits (thousands: whole numbers)."""
    v = float(value)
    want = f"{v:,.0f}" if abs(v) >= 1000 else (f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}")
    return claimed == want


def check_reason(reason: str, df) -> None:
    ok = df[df["status"] == "ok"]
    labels = {run_name(r): r for _, r in ok.iterrows()}
    best_thr = float(np.max(ok["throughput"].to_numpy(dtype=float)))
    m = re.search(r"^(.+?) has the highest throughput \(([\d,.]+) samples/s\) of all (\d+) successful runs", reason)
    if m:
        assert m.group(1) in labels
        assert _fmt_matches(m.group(2), labels[m.group(1)]["throughput"])
        assert _fmt_matches(m.group(2), best_thr)  # "highest" is the highest in the frame
        assert int(m.group(3)) == len(ok)
        pick = float(labels[m.group(1)]["throughput"])
    else:
        m = re.search(r"^(.+?) gives ([\d,.]+) samples/s, equivalent to the highest throughput of all (\d+) "
                      r"successful runs \((.+?), ([\d,.]+) samples/s\)", reason)
        assert m, reason
        assert _fmt_matches(m.group(2), labels[m.group(1)]["throughput"])
        assert _fmt_matches(m.group(5), best_thr) and _fmt_matches(m.group(5), labels[m.group(4)]["throughput"])
        assert int(m.group(3)) == len(ok)
        pick = float(labels[m.group(1)]["throughput"])
    for label, value in re.findall(r"ahead of (.+?) \(([\d,.]+) samples/s\)", reason):
        assert label in labels and _fmt_matches(value, labels[label]["throughput"])
        assert float(labels[label]["throughput"]) < pick  # "ahead of" means below the pick


def test_the_reason_cites_the_frames_own_figures_when_the_simplest_is_picked():
    # Two runs 1.2% apart in every round (equivalent within 3%), threads set by hand the higher median.
    base = [650, 660, 655, 652, 658]
    df = frame([
        run(threads=4, **rounds([v * 1.012 for v in base])),
        run(threads=None, **rounds(base)),  # the runtime's defaults
        run(threads=1, cores=[0], batch=4, **rounds([v * 0.6 for v in base])),
        run(threads=1, cores=[0], batch=8, thr=300.0),
    ])
    rec = recommend(df, hardware=HARDWARE)
    assert rec.best["threads"] is None  # equivalent within 3%: the simplest
    assert "equivalent to the highest throughput" in rec.reason
    check_reason(rec.reason, df)


def test_overlapping_but_not_equivalent_runs_keep_the_higher_median_and_ask_for_rounds():
    df = frame([
        run(threads=2, cores=[0, 1], **rounds([757, 600, 900, 700, 820])),  # higher median, wide
        run(threads=None, **rounds([655, 640, 670, 650, 660])),
    ])
    rec = recommend(df, hardware=HARDWARE)
    assert rec.best["threads"] == 2
    from wb_core.axes import word_for_cli, word_for_dashboard

    assert "not shown equivalent within +-3%" in rec.reason and "--ci 3%" in word_for_cli(rec.reason)
    assert "Interval target 3%" in word_for_dashboard(rec.reason)
    check_reason(rec.reason, df)


def test_a_clear_winner_reason_matches_the_frame():
    from analysis_data import sample_frame

    df = sample_frame()
    rec = recommend(df, hardware=HARDWARE)
    check_reason(rec.reason, df)
    assert rec.best["throughput"] == df["throughput"].max()


def test_runs_that_failed_the_accuracy_guard_are_never_recommended_and_the_note_says_why(tmp_path):
    from analysis_data import make_study_db
    from wb_core.store import load_results

    note = "INT8 cosine to FP32 0.081 is below the guard's 0.99"
    runs = [run(precision="int8", thr=5000, accuracy=0.081, accuracy_drop=0.9, accuracy_guard="failed",
                accuracy_guard_note=note),
            run(precision="fp32", thr=1000, accuracy=1.0, accuracy_drop=0.0),
            run(precision="bf16", thr=1500, accuracy=0.999, accuracy_drop=0.001, accuracy_guard="passed")]
    rec = recommend(frame(runs), hardware=HARDWARE)
    assert rec.best["precision"] == "bf16"
    assert f"INT8 runs were left out (1): {note}." in rec.notes
    make_study_db(tmp_path / "r.db", runs)  # through the store as well
    stored = recommend(load_results(tmp_path / "r.db", "t"), hardware=HARDWARE)
    assert stored.best["precision"] == "bf16" and any("left out" in n for n in stored.notes)
    without = recommend(frame([{k: v for k, v in r.items() if not k.startswith("accuracy_guard")} for r in runs]),
                        hardware=HARDWARE)
    assert without.best["precision"] == "int8"  # no guard column: nothing left out


def test_sequence_lengths_are_never_ranked_against_each_other():
    df = frame([
        run(threads=1, cores=[0], thr=9000, seq_len=32),
        run(threads=2, cores=[0, 1], thr=7000, seq_len=32),
        run(threads=1, cores=[0], thr=800, seq_len=128),
        run(threads=2, cores=[0, 1], thr=1200, seq_len=128),
    ])
    rec = recommend(df, hardware=HARDWARE)
    assert set(rec.per_length) == {32, 128}
    assert rec.per_length[32].best["threads"] == 1 and rec.per_length[128].best["threads"] == 2
    assert rec.seq_len == 128 and rec.best["seq_len"] == 128
    assert all(r["seq_len"] == 128 for r in rec.runners_up)
    assert "one recommendation per length" in rec.reason
    at32 = recommend(df, hardware=HARDWARE, seq_len=32)
    assert at32.best["throughput"] == 9000 and all(r["seq_len"] == 32 for r in at32.runners_up)
    check_reason(at32.reason, df[df["seq_len"] == 32])
    with pytest.raises(Exception, match="no runs at sequence length 64"):
        recommend(df, hardware=HARDWARE, seq_len=64)


def test_every_precision_left_out_by_the_guard_gets_its_own_sentence_in_order():
    # INT8 rows come first in the frame; the notes are in precision order, one per precision.
    runs = [run(precision="int8", threads=1, thr=6000, accuracy_guard="failed",
                accuracy_guard_note="INT8 has a cosine similarity to FP32 of 0.081, which misses the accuracy guard "
                                    "(at least 0.99)."),
            run(precision="int8", threads=2, thr=7000, accuracy_guard="failed", accuracy_guard_note=None),
            run(precision="bf16", threads=1, thr=3000, accuracy_guard="failed", accuracy_guard_note=float("nan")),
            run(precision="fp32", threads=1, thr=1000)]
    rec = recommend(frame(runs), hardware=HARDWARE)
    assert rec.best["precision"] == "fp32"
    left_out = [n for n in rec.notes if "runs were left out" in n]
    assert left_out == [
        "BF16 runs were left out (1): they failed the accuracy guard.",
        "INT8 runs were left out (2): INT8 has a cosine similarity to FP32 of 0.081, which misses the accuracy guard "
        "(at least 0.99).",
    ]


def test_the_per_length_sentence_names_each_length_and_the_lengths_no_run_meets():
    from wb_core.analysis.recommend import Constraints

    df = frame([
        run(threads=1, cores=[0], thr=9000, p99=5.0, seq_len=32),
        run(threads=1, cores=[0], thr=800, p99=1.0, seq_len=128),
        run(threads=2, cores=[0, 1], thr=1200, p99=1.5, seq_len=128),
        run(threads=1, cores=[0], thr=300, p99=1.8, seq_len=384),
    ])
    rec = recommend(df, Constraints(max_p99_ms=2.0), hardware=HARDWARE)
    assert rec.seq_len == 384 and set(rec.per_length) == {128, 384}
    at128, at384 = rec.per_length[128].best, rec.per_length[384].best
    assert at128["throughput"] == 1200 and at384["throughput"] == 300
    note = next(n for n in rec.notes if n.startswith("Sequence length is the workload"))
    assert note.startswith("Sequence length is the workload, not a setting: runs at different lengths are not ranked "
                           "against each other; one recommendation per length: "
                           f"length 128: {run_name(at128)} (1,200 samples/s); "
                           f"length 384: {run_name(at384)} (300 samples/s). The figures above are for the "
                           "longest, 384;")
    assert note.count("No run meets the constraints at length 32: ") == 1 and note.endswith(".")
    assert "at length 128" not in note and "at length 384" not in note
    assert rec.reason.endswith(" " + note) and rec.notes.count(note) == 1
    with pytest.raises(Exception) as err:  # no length meets: one sentence per length
        recommend(df, Constraints(max_p99_ms=0.5), hardware=HARDWARE)
    text = str(err.value)
    assert [m for m in re.findall(r"at length (\d+): ", text)] == ["32", "128", "384"]


# ---------------------------------------------------------------- busy points are said, never silent


def test_a_pick_resting_on_busy_points_says_so_and_a_quiet_one_does_not():
    df = frame([run(threads=2, thr=900.0, busy=True), run(threads=1, thr=500.0, busy=False),
                run(threads=1, batch=8, thr=450.0, busy=True)])
    rec = recommend(df, hardware=HARDWARE)
    assert rec.best["threads"] == 2
    assert rec.busy == [run_name(df.iloc[0]), run_name(df.iloc[2])]
    assert rec.busy_sentence in rec.notes and rec.busy_sentence in rec.reason
    assert f"the pick, {run_name(df.iloc[0])}, was measured on a busy machine" in rec.reason
    # a busy runner measured low may be the true best: it is named too
    assert f"1 other run it was compared with was measured on a busy machine and may be faster than it reads " \
           f"({run_name(df.iloc[2])})" in rec.reason
    check_reason(rec.reason, df)
    quiet = recommend(frame([run(threads=2, thr=900.0, busy=False), run(threads=1, thr=500.0)]), hardware=HARDWARE)
    assert quiet.busy == [] and quiet.busy_sentence is None and "busy" not in quiet.reason


def test_a_tie_between_busy_runs_says_so():
    base = [650, 660, 655, 652, 658]
    df = frame([run(threads=4, busy=True, **rounds([v * 1.012 for v in base])),
                run(threads=None, busy=True, **rounds(base))])
    rec = recommend(df, hardware=HARDWARE)
    assert len(rec.tied) == 2
    assert "the pick, " in rec.reason and "1 run it is tied with was too" in rec.reason


def test_the_exported_yaml_marks_a_pick_resting_on_busy_points(tmp_path):
    import yaml

    from analysis_data import make_study_db
    from wb_core.export import deployment_for_study, export
    from wb_core.export.deployment import DeploymentConfig

    busy_db, quiet_db = tmp_path / "busy.db", tmp_path / "quiet.db"
    make_study_db(busy_db, [run(threads=2, thr=900.0, busy=True), run(threads=1, thr=500.0, busy=False)])
    make_study_db(quiet_db, [run(threads=2, thr=900.0, busy=False), run(threads=1, thr=500.0, busy=False)])
    res = export(deployment_for_study(busy_db, "t"), "yaml", tmp_path / "busy")
    doc = yaml.safe_load((tmp_path / "busy" / next(iter(res["yaml"].files))).read_text())
    m = doc["measurement"]
    assert m["measured_on_busy_machine"] is True
    assert "busy machine" in m["busy_note"] and "OpenVINO · FP32 · batch 1 · 2 threads" in m["busy_note"]
    assert DeploymentConfig.from_dict(doc).measurement.measured_on_busy_machine is True  # the schema takes it
    # Exported by its key, the busy run says so itself.
    key = run(threads=2, thr=900.0)["key"]
    assert deployment_for_study(busy_db, "t", run_key=key).measurement.measured_on_busy_machine is True
    quiet = deployment_for_study(quiet_db, "t").measurement
    assert quiet.measured_on_busy_machine is False and quiet.busy_note is None


def test_one_successful_run_is_called_the_only_one():
    """A count of one is no comparison: never "of all 1 successful runs"."""
    from wb_core.analysis.recommend import Constraints

    df = frame([run(thr=500.0), run(threads=2, status="failed")])
    reason = recommend(df).reason
    assert "as the only successful run;" in reason and "all 1" not in reason
    reason = recommend(df, Constraints(max_p99_ms=5.0)).reason
    assert "as the only successful run that meets p99 latency" in reason and "the 1 successful" not in reason
