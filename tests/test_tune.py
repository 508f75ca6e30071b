"""`wb tune`: a budget too small is refused before anything runs; a small budget on LeNet ends with
a confirmed recommendation, its interval, both ratios and a YAML export."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from wb_core.errors import ConfigError


@pytest.mark.parametrize("text,seconds", [("180", 180), ("90s", 90), ("3m", 180), ("2m30s", 150), (45, 45)])
def test_time_budgets_read_as_seconds(text, seconds):
    from wb_core.tune import parse_time

    assert parse_time(text) == seconds


def test_a_budget_too_small_for_one_round_is_one_sentence_and_nothing_is_measured(lenet_ir, db, fast):
    from wb_core.api import tune

    with pytest.raises(ConfigError, match="too small for one round of one configuration") as e:
        tune(lenet_ir, time_budget="1s", db=db, settings=fast)
    assert "\n" not in str(e.value) and str(e.value).endswith(".")
    assert not db.exists()
    with pytest.raises(ConfigError, match="not a duration"):
        tune(lenet_ir, time_budget="soon", db=db, settings=fast)


def test_cli_tune_refuses_a_tiny_budget_without_a_traceback(lenet_ir, db):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "wb_core.cli", "tune", str(lenet_ir), "--time", "1s", "--db", str(db)],
                       capture_output=True, text=True)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "too small for one round" in out and "Traceback" not in out
    assert not db.exists()


@pytest.mark.parametrize("left,needed,budget,runs", [
    (132, 135, 180, True),    # 3 s short of a 135 s estimate with 132 s left of 3 minutes: confirm, ending 3 s over
    (170, 135, 180, True),
    (162, 180, 180, True),    # 18 s over: the most 10% of the budget allows
    (161, 180, 180, False),
    (100, 135, 180, False),   # 35 s short: leave it, and say so
    (0, 10, 60, False),
])
def test_confirmation_may_run_a_tenth_past_the_budget(left, needed, budget, runs):
    from wb_core.tune import confirm_fits

    assert confirm_fits(left, needed, budget) is runs


CPUINFO = Path(__file__).parent / "cpuinfo"


@pytest.mark.parametrize("cpuinfo", ["synthetic-amd-epyc-9r14-zen4.cpuinfo", "synthetic-amd-epyc-7763-zen3.cpuinfo",
                                     "intel-xeon-emerald-rapids-kvm.cpuinfo", "amd-epyc-zen4-kvm.cpuinfo"])
@pytest.mark.parametrize("has_data", [True, False])
def test_the_variants_planned_follow_the_cpus_flags_and_the_data(cpuinfo, has_data):
    from cpu_flags import cpu_flags
    from wb_core.hardware import hardware_from_cpuinfo
    from wb_core.tune import plan_variants

    flags = cpu_flags(str(CPUINFO / cpuinfo))  # read here, not through the code under test
    bf16 = bool({"avx512_bf16", "amx_bf16"} & flags)
    int8 = bool({"avx2", "avx512_vnni", "avx_vnni", "amx_int8"} & flags)
    hw = hardware_from_cpuinfo((CPUINFO / cpuinfo).read_text())
    planned, left_out = plan_variants("onnx", hw, has_data)
    want = [p for p, yes in (("int8", has_data and int8), ("bf16", bf16), ("fp32", True)) if yes]
    assert planned == want  # INT8 first, FP32 last
    assert set(left_out) == {"int8", "bf16", "fp32"} - set(want)
    if not bf16:
        assert "BF16" in left_out["bf16"]  # the CPU's reason, in words
    if not has_data:
        assert "calibration data" in left_out["int8"]


def test_each_variant_is_first_measured_under_the_throughput_hint_at_two_batch_sizes():
    from wb_core.tune import probe_batches, probe_configs

    assert probe_batches([1, 4, 8, 16]) == [1, 8]
    assert probe_batches([8, 1]) == [1, 8]
    assert probe_batches([4]) == [4]
    assert probe_batches([2, 4, 8]) == [2, 4]
    configs = probe_configs(["int8", "bf16", "fp32"], [1, 4, 8, 16], n_cpus=2)
    assert [(c.precision, c.batch_size) for c in configs] == [("int8", 1), ("int8", 8), ("bf16", 1), ("bf16", 8),
                                                             ("fp32", 1), ("fp32", 8)]
    # The hint with the precision set (FP32 stays FP32 on a BF16 CPU), requests for every CPU.
    assert all(c.hint == "throughput" and not c.untouched and c.concurrency == 2 and c.threads is None
               and c.streams is None for c in configs)
    # One worker per variant: its two batch sizes share the process.
    assert len({c.group for c in configs}) == 3


@pytest.mark.parametrize("budget,cost,fmt,want", [
    # 40% of 180 s is 72 s for the confirmation: six configurations loaded side by side (1.5 s start,
    # 1 s each) and 5 x 8 s of measuring is 47.5 s, within it. The other 108 s: 60% (64.8 s) to the
    # variants and the search, the leaders until 108 s.
    (180, 12.0, "onnx", (64.8, 108.0, 72.0, 6, 5)),
    # Side by side, the round cost does not count: the same plan at 4 s a round.
    (180, 4.0, "onnx", (64.8, 108.0, 72.0, 6, 5)),
    # A TensorFlow model: its default cannot share the pick's worker and is left out for time, so
    # the same side-by-side plan: 40% of 300 s is 120 s, and 5 rounds (47.5 s) are the most.
    (300, 12.0, "keras", (108.0, 180.0, 120.0, 6, 5)),
    # 40% of 100 s is 40 s: 7.5 + 4 x 8 = 39.5 s fits, 5 rounds (47.5 s) do not.
    (100, 12.0, "onnx", (36.0, 60.0, 40.0, 6, 4)),
    # 40% of 45 s is 18 s, less than the smallest (1.5 + 3 + 2 x 8 = 20.5 s), which is within half
    # the budget (22.5 s): the smallest is kept.
    (45, 12.0, "onnx", (14.7, 24.5, 20.5, 3, 2)),
    # 40% of 20 s is 8 s, and 20.5 s is more than half of it: none is planned, every second goes to
    # the search and the leaders.
    (20, 12.0, "onnx", (12.0, 20.0, 0.0, None, None)),
])
def test_the_time_plan_keeps_the_confirmations_share_from_the_start(budget, cost, fmt, want):
    from wb_core.tune import plan_time

    p = plan_time(budget, cost, fmt)
    assert p.search_until == pytest.approx(want[0]) and p.leaders_until == pytest.approx(want[1])
    assert p.confirm_s == pytest.approx(want[2])
    assert (p.confirm_configs, p.confirm_rounds) == want[3:]


@pytest.mark.parametrize("seconds,cost,fmt,want", [
    (23.5, 12, "onnx", (6, 2)),     # 1.5 + 6 x 1 + 2 x 8
    (23.4, 12, "onnx", (5, 2)),     # six need 23.5; five 22.5, and three rounds (30.5) do not fit
    (20.5, 12, "onnx", (3, 2)),     # the smallest: 1.5 + 3 + 16
    (20.4, 12, "onnx", None),       # not even the smallest
    (47.5, 10, "onnx", (6, 5)),     # the most rounds
    (1000, 1, "onnx", (6, 5)),      # never more than 5 rounds
    (23.5, 12, "savedmodel", (6, 2)),  # the same for a SavedModel: its TensorFlow default is left out
])
def test_a_confirmation_that_does_not_fit_is_planned_smaller(seconds, cost, fmt, want):
    from wb_core.tune import plan_confirmation

    assert plan_confirmation(seconds, cost, fmt) == want


def test_the_side_by_side_time_is_what_is_left_after_the_start():
    from wb_core.tune import paired_confirm_time

    # The worker's loads come out of its own time (it measures less when loading took longer).
    assert paired_confirm_time(60) == pytest.approx(60 - 1.5)
    assert paired_confirm_time(1) == 3.0  # never less than a few seconds


def test_a_smaller_confirmation_leaves_out_the_runner_up_then_the_defaults_the_objective_does_not_favour():
    from wb_core.analysis.confirm import smaller
    from wb_core.config import RunConfig

    labels = ["tuned", "runner-up", "OpenVINO untouched", "OpenVINO LATENCY hint", "OpenVINO THROUGHPUT hint",
              "same variant"]
    configs = {label: RunConfig("openvino", batch_size=i + 1) for i, label in enumerate(labels)}
    defaults = {"OpenVINO untouched", "OpenVINO LATENCY hint", "OpenVINO THROUGHPUT hint"}
    kept, out = smaller(configs, defaults, "throughput", 3)
    assert list(kept) == ["tuned", "OpenVINO THROUGHPUT hint", "same variant"]
    assert out == ["runner-up", "OpenVINO untouched", "OpenVINO LATENCY hint"]
    kept, out = smaller(configs, defaults, "throughput", 5)
    assert out == ["runner-up"] and len(kept) == 5
    kept, out = smaller(configs, defaults, "latency", 3)
    assert "OpenVINO LATENCY hint" in kept and "OpenVINO THROUGHPUT hint" not in kept
    assert smaller(configs, defaults, "throughput", None) == (configs, [])
    # Two labels of one configuration count once: four configurations here, so only the runner-up goes.
    configs["same variant"] = configs["OpenVINO THROUGHPUT hint"]
    assert smaller(configs, defaults, "throughput", 4)[1] == ["runner-up"]
    # A default that cannot share the pick's worker (another runtime) goes before the others: it
    # alone would need fresh rounds.
    configs["TensorFlow, default threads"] = RunConfig("tensorflow", batch_size=1)
    kept, out = smaller(configs, defaults | {"TensorFlow, default threads"}, "throughput", 4)
    assert out == ["runner-up", "TensorFlow, default threads"]


def _probe(precision, batch, thr, guard=None, status="ok", error=None, note=None):
    from analysis_data import run

    return run(precision=precision, batch=batch, threads=None, thr=thr, status=status, hint="throughput",
               untouched=False, accuracy_guard=guard, accuracy_guard_note=note, **({"error": error} if error else {}))


def test_the_answer_names_every_variant_not_reached_and_why():
    from analysis_data import frame
    from wb_core.tune import best_variant, variant_outcomes, variants_sentence

    df = frame([_probe("int8", 1, 900.0, "failed", note="INT8 top-1 agreement 0.61 is under the guard's 0.98."),
                _probe("int8", 8, 1500.0, "failed", note="INT8 top-1 agreement 0.61 is under the guard's 0.98."),
                _probe("fp32", 1, 400.0, "passed"), _probe("fp32", 8, 650.0, "passed")])
    out = variant_outcomes(df, ["int8", "bf16", "fp32"], {})
    assert out["int8"]["state"] == "guard failed" and "0.61" in out["int8"]["why"]
    assert out["bf16"]["state"] == "out of time"  # planned, never measured
    assert out["fp32"]["state"] == "measured" and out["fp32"]["best"]["throughput"] == 650.0
    assert best_variant(out)["precision"] == "fp32"  # INT8 is faster but failed the guard
    words = variants_sentence(out)
    assert "FP32 650 samples/s (batch 8" in words
    assert "INT8 (guard failed: INT8 top-1 agreement 0.61" in words and "BF16 (out of time" in words

    df = frame([_probe("fp32", 1, 400.0), _probe("fp32", 8, 650.0),
                _probe("bf16", 1, float("nan"), status="failed", error="the worker ran out of memory.")])
    out = variant_outcomes(df, ["bf16", "fp32"], {"int8": "quantizing needs calibration data"})
    words = variants_sentence(out)
    assert "INT8 (quantizing needs calibration data)" in words
    assert "BF16 (failed: the worker ran out of memory)" in words


def test_tunes_answer_says_when_its_pick_or_verdict_rests_on_busy_points(tmp_path):
    from analysis_data import HARDWARE, frame, run
    from wb_core.analysis.confirm import verdict
    from wb_core.analysis.recommend import recommend
    from wb_core.sweep.context import aggregate_rounds
    from wb_core.tune import _answer

    df = frame([run(threads=2, thr=900.0, busy=True), run(threads=1, thr=500.0)])
    rec = recommend(df, hardware=HARDWARE)
    outcomes = {"int8": {"state": "not planned", "why": "quantizing needs calibration data", "best": None},
                "fp32": {"state": "measured", "why": "", "best": rec.best}}
    text = _answer(Path("m.xml"), rec.best, rec, None, None, 100.0, 180.0, outcomes)
    assert "This pick rests on points measured on a busy machine" in text
    assert "the pick, OpenVINO · FP32 · batch 1 · 2 threads" in text
    assert "Not reached: INT8 (quantizing needs calibration data)." in text and "FP32 900 samples/s" in text

    def rounds(values, busy):
        rs = [{"round": i, "status": "ok", "metrics": {"throughput": v, "latency_ms_p99": 1.0, "busy": busy and i == 0}}
              for i, v in enumerate(values)]
        return {**aggregate_rounds(rs, len(values))[1], "status": "ok", "key": f"k{values[0]}", "precision": "fp32",
                "backend": "openvino", "batch_size": 1}

    rows = {"tuned": rounds([900.0, 910.0, 905.0], busy=True),
            "OpenVINO THROUGHPUT hint": rounds([500.0, 505.0, 502.0], busy=False)}
    conf = verdict(rows, {"OpenVINO THROUGHPUT hint"}, "throughput", "c", frame([]), remeasured=True)
    assert conf["busy"] == ["tuned"]
    text = _answer(Path("m.xml"), rows["tuned"] | {"latency_ms_p99": 1.0, "throughput": 905.0}, rec, conf, None,
                   100.0, 180.0)
    assert "This verdict rests on rounds measured on a busy machine" in text
    assert "even after they were measured again once" in text


def test_tunes_answer_credits_the_confirmation_with_an_overrun_only_when_one_ran():
    from analysis_data import HARDWARE, frame, run
    from wb_core.analysis.recommend import recommend
    from wb_core.tune import _answer

    rec = recommend(frame([run(threads=2, thr=900.0), run(threads=1, thr=500.0)]), hardware=HARDWARE)
    unconfirmed = _answer(Path("m.xml"), rec.best, rec, None, None, 64.0, 45.0)
    assert unconfirmed.endswith("Tuning took 64 s of the 45 s budget (19 s past it).")
    assert "confirmation" not in unconfirmed
    confirmed = _answer(Path("m.xml"), rec.best, rec, {"verdict": "Confirmed."}, None, 48.0, 45.0)
    assert "(the confirmation ran 3 s past it, within the 10% it may take" in confirmed
    assert _answer(Path("m.xml"), rec.best, rec, None, None, 40.0, 45.0).endswith("Tuning took 40 s of the 45 s budget.")


@pytest.mark.slow
def test_tune_lenet_within_a_small_budget(lenet_ir, db, fast, tmp_path):
    from wb_core.api import tune
    from wb_core.store import Store

    said = []
    res = tune(lenet_ir, time_budget=120, db=db, study="t", data="demo:lenet-digits", calib_size=64, settings=fast,
               export_dir=tmp_path / "out", on_progress=said.append, batch_sizes="1,8")
    assert said[0].startswith("Measuring the variants first") and said[-1] == res.answer
    with Store(db, readonly=True) as s:
        rounds = s.round_counts("t")
        runs = s.to_frame("t")
    measured = runs[runs["status"] == "ok"]
    # The variants come first: INT8 (with data) and FP32 under the THROUGHPUT hint at both batch
    # sizes, each measured before any point that sets threads or streams.
    probes = measured[(measured["hint"] == "throughput") & (measured["untouched"] != True)]  # noqa: E712
    assert {"int8", "fp32"} <= set(probes["precision"])
    assert set(probes["batch_size"].astype(int)) == {1, 8}
    searched = measured[measured["threads"].notna() | measured["streams"].notna()]
    assert not searched.empty
    # Runs are stored in the order they were first measured (a later round rewrites, never moves them).
    assert max(runs.index.get_loc(i) for i in probes.index) < min(runs.index.get_loc(i) for i in searched.index)
    assert searched["precision"].nunique() == 1  # the search stays on the best passing variant
    assert res.variants["int8"]["state"] in ("measured", "guard failed") and res.variants["fp32"]["state"] == "measured"
    # OpenVINO's own THROUGHPUT hint, untouched, is always a candidate beside the leaders.
    assert ((measured["hint"] == "throughput") & (measured["untouched"] == True)).any()  # noqa: E712
    # One round for most configurations; more only for the leaders.
    assert len(measured) >= 2 and sum(1 for k in measured["key"] if rounds.get(k, 1) > 1) <= 5
    conf = res.confirmation
    assert conf is not None and conf["gain"] is not None and conf["gain"].low <= conf["gain"].ratio <= conf["gain"].high
    assert res.recommended["key"] == conf["recommended"]["key"]
    assert "samples/s" in res.answer and "budget" in res.answer and "Variants under the THROUGHPUT hint" in res.answer
    doc = yaml.safe_load(Path(res.export_path).read_text())
    assert doc["measurement"]["measured_on_busy_machine"] is bool(res.confirmation.get("busy"))


def test_tunes_answer_says_why_a_reduced_precision_ran_slower_or_which_runs_to_profile(tmp_path):
    """The probes' INT8 lost to FP32: the answer carries the core's sentence, from the stored layer
    profiles when both are kept, else naming the two runs to profile."""
    import pandas as pd

    from analysis_data import HARDWARE, frame, make_study_db, run
    from wb_core import faces
    from wb_core.analysis.layers import LAYER_COLUMNS, LayerProfile
    from wb_core.analysis.precision_loss import study_loss_notes
    from wb_core.analysis.recommend import recommend
    from wb_core.tune import _answer

    fp32, int8 = run(precision="fp32", thr=1000.0), run(precision="int8", thr=400.0)
    db = tmp_path / "t.db"
    make_study_db(db, [fp32, int8])
    rec = recommend(frame([fp32, int8]), hardware=HARDWARE)
    text = _answer(Path("m.xml"), rec.best, rec, None, None, 10.0, 180.0, None, study_loss_notes(db, "t"))
    assert (f"Why INT8 ran slower than FP32 (0.40x) shows in the layer profiles of OpenVINO · INT8 · batch 1 · 1 "
            f"thread · not pinned (run {int8['key']}) and of its FP32 twin OpenVINO · FP32 · batch 1 · 1 thread · not "
            f"pinned (run {fp32['key']})") in text, text

    def profile(key, rows):
        df = pd.DataFrame([(n, t, f"x_{p}", p, ms, ms, 0.0, "EXECUTED") for n, t, p, ms in rows],
                          columns=list(LAYER_COLUMNS))
        return LayerProfile(key=key, label=key, iterations=10, batch_size=1, layers=df)

    faces.save_layer_profile("t", fp32["key"], profile(fp32["key"], [("fc", "FullyConnected", "f32", 0.02)]), db)
    faces.save_layer_profile("t", int8["key"], profile(int8["key"], [
        ("fc", "FullyConnectedQuantizedLegacy", "i8", 0.02), ("x/fq", "FakeQuantize", "f32", 0.01)]), db)
    text = _answer(Path("m.xml"), rec.best, rec, None, None, 10.0, 180.0, None, study_loss_notes(db, "t"))
    assert ("INT8 ran at 0.40x the throughput of FP32" in text and "The layer only INT8 runs (FakeQuantize) took "
            "0.01 ms, and no layer it shares with FP32 ran faster: quantizing and dequantizing costs more") in text
    assert text.index("INT8 ran at 0.40x") < text.index("Tuning took 10 s")
