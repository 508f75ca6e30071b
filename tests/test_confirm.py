"""Confirming a pick: the study's own data and variant used again, real runtime defaults, and a
verdict whose ratios and intervals match the stored rounds (recomputed here with numpy/scipy)."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
from scipy import stats as sps

from wb_core.errors import ConfigError


def cpu_flags() -> set[str]:
    flags: set[str] = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags |= set(line.split(":", 1)[1].split())
    return flags


BF16_CPU = bool(cpu_flags() & {"avx512_bf16", "amx_bf16"})


def _rounds(db, study: str, key: str, left_out=()) -> dict[int, float]:
    from wb_core.store import Store

    with Store(db, readonly=True) as s:
        return {int(r["round"]): float(r["metrics"]["throughput"]) for r in s.rounds(study, key)
                if r["status"] == "ok" and int(r["round"]) not in left_out}


def paired_ratio(a: dict[int, float], b: dict[int, float]) -> tuple[float, float, float]:
    """B over A: geometric mean of the per-round ratios, with a 95% t interval."""
    common = sorted(set(a) & set(b))
    d = np.log([b[r] / a[r] for r in common])
    m = float(d.mean())
    half = float(sps.t.ppf(0.975, len(d) - 1)) * float(d.std(ddof=1)) / math.sqrt(len(d))
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def _check_ratio(got, db, study, base_key, new_key, left_out=()):
    want = paired_ratio(_rounds(db, study, base_key, left_out), _rounds(db, study, new_key, left_out))
    assert got is not None
    assert got.ratio == pytest.approx(want[0], rel=1e-9)
    assert (got.low, got.high) == pytest.approx(want[1:], rel=1e-3)  # the t quantile comes from a table
    assert got.low <= got.ratio <= got.high


def _optimal_requests(model) -> int:
    import openvino as ov

    compiled = ov.Core().compile_model(str(model), "CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    return int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))


def _confirm_checks(out, db, model):
    name = out["study"]
    t = out["tuned"]
    defaults = out["defaults"]
    assert {"OpenVINO untouched", "OpenVINO LATENCY hint", "OpenVINO THROUGHPUT hint"} <= set(defaults)
    # The untouched default is what the runtime chose: BF16 on BF16 CPUs, FP32 elsewhere.
    assert defaults["OpenVINO untouched"]["executed_precision"] == ("bf16" if BF16_CPU else "f32")
    assert int(defaults["OpenVINO THROUGHPUT hint"]["requests_in_flight"]) == _optimal_requests(model)
    best = max(defaults.values(), key=lambda r: r["throughput"])
    cut = out["left_out_cycles"]  # cycles side by side measured busy, when enough quiet ones were left
    _check_ratio(out["gain"], db, name, best["key"], t["key"], cut)
    g = out["gain"]  # the verdict's words follow the interval
    if t["key"] == best["key"]:
        assert "is a runtime default itself" in out["verdict"]
    elif g.low > 1:
        undecided = out["decisions"].get("gain") is not None and out["decisions"]["gain"].outcome == "undecided"
        assert out["verdict"].startswith("Tuning likely pays" if undecided else "Tuning pays")
        assert out["recommended"]["key"] == t["key"]
    else:
        assert ("better beyond noise" if g.high < 1 else "as good within noise") in out["verdict"]
        assert out["recommended"]["key"] == best["key"]
    hinted = out["same_variant_hint"]
    assert hinted is not None and hinted["hint"] == "throughput"
    _check_ratio(out["precision_gain"], db, name, best["key"], hinted["key"], cut)
    _check_ratio(out["tuning_gain"], db, name, hinted["key"], t["key"], cut)
    if hinted["key"] == best["key"]:  # the pick's variant under the hint is the best default itself
        assert "is that default itself" in out["verdict"]
    else:
        assert "What tuning buys on top" in out["verdict"] and "What the" in out["verdict"]
    return t


def defaults_accuracy(out):
    return out["defaults"]["OpenVINO untouched"].get("accuracy")


def test_confirm_an_int8_pick_uses_the_studys_data_and_int8_model(lenet_ir, db, fast):
    from wb_core.api import confirm, profile

    df = profile(lenet_ir, db=db, study="s", precisions="int8", batch_sizes="1", threads="1", repeats=2,
                 settings=fast, data="demo:lenet-digits", calib_size=64)
    study_row = df[df["status"] == "ok"].iloc[0]
    out = confirm("s", db, rounds=2, settings=fast)
    t = _confirm_checks(out, db, lenet_ir)
    assert t["precision"] == "int8" and t["executed_precision"] in ("u8", "i8")
    assert t["variant_path"] == study_row["variant_path"]  # the very INT8 IR the study measured
    assert out["same_variant_hint"]["variant_path"] == study_row["variant_path"]
    # The untouched default's accuracy is measured like any variant's, against the FP32 outputs.
    assert defaults_accuracy(out) is not None


@pytest.mark.skipif(not BF16_CPU, reason="this CPU has neither avx512_bf16 nor amx_bf16 (/proc/cpuinfo)")
def test_confirm_a_bf16_pick(lenet_ir, db, fast):
    from wb_core.api import confirm, profile

    profile(lenet_ir, db=db, study="b", precisions="bf16", batch_sizes="1", threads="1", repeats=2, settings=fast,
            accuracy=False)
    out = confirm("b", db, rounds=2, settings=fast)
    t = _confirm_checks(out, db, lenet_ir)
    assert t["precision"] == "bf16" and t["executed_precision"] == "bf16"
    # Untouched, the BF16 pick's model is the FP32 IR left to the runtime: the THROUGHPUT default itself.
    assert out["same_variant_hint"]["key"] == out["defaults"]["OpenVINO THROUGHPUT hint"]["key"]


def test_confirm_refuses_a_moved_or_changed_model_and_a_study_without_ok_runs(lenet_ir, tmp_path, db, fast):
    from wb_core.api import confirm, profile
    from wb_core.store import Store

    d = tmp_path / "m"
    d.mkdir()
    model = d / "lenet.xml"
    shutil.copy(lenet_ir, model)
    shutil.copy(lenet_ir.with_suffix(".bin"), d / "lenet.bin")
    profile(model, db=db, study="s", batch_sizes="1", threads="1", settings=fast)
    (d / "lenet.bin").write_bytes((d / "lenet.bin").read_bytes()[::-1])
    with pytest.raises(ConfigError, match="has changed since study 's' measured it: its file 'lenet.bin' differs"):
        confirm("s", db, rounds=2, settings=fast)
    shutil.rmtree(d)
    with pytest.raises(ConfigError, match="is no longer there"):
        confirm("s", db, rounds=2, settings=fast)
    # INT8 without calibration data is skipped: a study with no successful run.
    profile(lenet_ir, db=db, study="none", precisions="int8", batch_sizes="1", threads="1", settings=fast)
    with pytest.raises(ConfigError, match="has no successful runs to confirm"):
        confirm("none", db, rounds=2, settings=fast)
    with Store(db, readonly=True) as s:  # nothing was measured
        assert s.get_study("s-confirm") is None and s.get_study("none-confirm") is None


def test_confirm_accepts_a_renamed_identical_copy(lenet_ir, tmp_path, db, fast):
    """Content is compared, not names: the study's IR moved and renamed (both files) is the same model."""
    from wb_core.api import confirm, profile

    d = tmp_path / "m"
    d.mkdir()
    shutil.copy(lenet_ir, d / "lenet.xml")
    shutil.copy(lenet_ir.with_suffix(".bin"), d / "lenet.bin")
    profile(d / "lenet.xml", db=db, study="s", batch_sizes="1", threads="1", settings=fast, accuracy=False)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (d / "lenet.xml").rename(moved / "renamed.xml")
    (d / "lenet.bin").rename(moved / "renamed.bin")
    out = confirm("s", db, rounds=2, settings=fast, model=moved / "renamed.xml")
    assert out["tuned"] is not None and out["tuned"]["status"] == "ok"
    data = bytearray((moved / "renamed.bin").read_bytes())
    data[-1] ^= 0xFF
    (moved / "renamed.bin").write_bytes(bytes(data))
    with pytest.raises(ConfigError, match="its file 'renamed.bin' differs"):
        confirm("s", db, rounds=2, settings=fast, model=moved / "renamed.xml")


@pytest.mark.slow
def test_confirm_measures_busy_rounds_again_once_and_a_smaller_one_says_what_it_left_out(lenet_ir, db, fast):
    import sqlite3

    from wb_core.api import confirm, profile

    profile(lenet_ir, db=db, study="b", precisions="fp32", batch_sizes="1", threads="1", settings=fast)
    out = confirm("b", db, rounds=2, settings=fast, max_configs=3, remeasure_busy=False, design="rounds")
    # Five labels, four configurations (the FP32 model under the hint is the THROUGHPUT default
    # itself), no runner-up: the first default without the THROUGHPUT hint goes, leaving three.
    assert out["left_out"] == ["OpenVINO untouched"]
    assert "Left out of this confirmation for time: OpenVINO untouched (" in out["verdict"]
    measured = set(out["frame"]["key"])
    assert len(measured) == 3
    # Every stored round of the confirmation marked busy, with a throughput no real round has.
    with sqlite3.connect(db) as c:
        c.execute("UPDATE runs SET metrics_json = json_set(metrics_json, '$.busy', json('true')) WHERE study = ?",
                  ("b-confirm",))
        c.execute("UPDATE rounds SET metrics_json = json_set(metrics_json, '$.busy', json('true'), '$.throughput', "
                  "1.0) WHERE study = ?", ("b-confirm",))

    def stored_throughputs():
        with sqlite3.connect(db) as c:
            return [t for (t,) in c.execute("SELECT json_extract(metrics_json, '$.throughput') FROM rounds "
                                            "WHERE study = ? AND status = 'ok'", ("b-confirm",))]

    kept = confirm("b", db, rounds=2, settings=fast, max_configs=3, remeasure_busy=False, design="rounds")
    assert "This verdict rests on rounds measured on a busy machine" in kept["verdict"]
    assert "were not measured again" in kept["verdict"] and kept["busy"]
    assert set(stored_throughputs()) == {1.0}  # nothing measured again
    again = confirm("b", db, rounds=2, settings=fast, max_configs=3, design="rounds")
    assert 1.0 not in stored_throughputs() and len(stored_throughputs()) == 2 * len(measured)
    if again["busy"]:  # still busy after measuring again once (a shared machine): said, not hidden
        assert "even after they were measured again once" in again["verdict"]
    else:
        assert "busy machine" not in again["verdict"]


def test_confirm_measures_side_by_side_what_shares_a_worker_and_says_the_rules_answer(lenet_ir, db, fast):
    from wb_core.api import confirm, profile
    from wb_core.store import Store

    profile(lenet_ir, db=db, study="p", precisions="fp32", batch_sizes="1", threads="1", settings=fast,
            accuracy=False)
    out = confirm("p", db, rounds=2, settings=fast, max_s=4)
    # Every OpenVINO default differs from the pick only in what its compiled model is given.
    assert out["design"] == "paired" and set(out["measured_in"].values()) == {"paired"}
    assert out["outcome"] in ("difference", "equivalent", "undecided")
    d = out["decisions"]["gain"]
    assert d.outcome == out["outcome"] and (d.ratio.ratio, d.ratio.low, d.ratio.high) == pytest.approx(
        (out["gain"].ratio, out["gain"].low, out["gain"].high))
    words = {"difference": "differs beyond +-3%", "equivalent": "is equivalent within +-3%",
             "undecided": "is undecided"}[out["outcome"]]
    if out["tuned"]["key"] != max(out["defaults"].values(), key=lambda r: r["throughput"])["key"]:
        assert words in out["verdict"]
    assert "Measured side by side in one worker" in out["verdict"]
    with Store(db, readonly=True) as s:
        rounds = [r for r in s.rounds("p-confirm") if r["status"] == "ok"]
    keys = {r["key"] for r in rounds}
    assert len(keys) == len(set(out["frame"]["key"])) >= 3
    for r in rounds:  # each cycle stored as a round of every configuration, with the order it ran in
        assert r["metrics"]["design"] == "paired" and sorted(r["metrics"]["cycle_order"]) == sorted(keys)
    assert len(rounds) == len(keys) * len({r["round"] for r in rounds})
    # Confirmed again: new cycles are added to the study, and the verdict reads this run's only.
    first = {int(r["round"]) for r in rounds}
    again = confirm("p", db, rounds=2, settings=fast, max_s=4)
    assert set(again["left_out_cycles"]) >= first
    assert again["gain"].n <= len(again["paired"].cycles) and min(again["paired"].rounds[0]) > max(first)


def test_a_pick_pinned_to_its_cores_keeps_fresh_rounds_and_says_why(lenet_ir, db, fast):
    import subprocess
    import sys

    from wb_core.api import profile

    profile(lenet_ir, db=db, study="c", precisions="fp32", batch_sizes="1", threads="1", cores="0", settings=fast,
            accuracy=False)
    r = subprocess.run([sys.executable, "-m", "wb_core.cli", "confirm", "--study", "c", "--db", str(db),
                        "--rounds", "2"], capture_output=True, text=True, timeout=600)
    out = r.stdout
    assert r.returncode == 0, r.stdout + r.stderr
    assert "In fresh interleaved rounds, each in its own worker, beside the pick" in out
    assert "its cores differs, which takes a process of its own" in out
    assert "gain: " in out and any(w in out for w in ("difference (", "equivalent (", "undecided ("))


@pytest.mark.slow
def test_copies_that_would_not_fit_in_memory_fall_back_to_fresh_rounds_and_say_why(lenet_ir, db, fast, monkeypatch):
    import wb_core.sweep.paired as paired
    from wb_core.api import confirm, profile

    profile(lenet_ir, db=db, study="m", precisions="fp32", batch_sizes="1", threads="1", settings=fast,
            accuracy=False)
    monkeypatch.setattr(paired, "MEMORY_SHARE", 0.0)  # no memory to spare: not even two copies fit
    out = confirm("m", db, rounds=2, settings=fast)
    assert out["design"] == "rounds" and set(out["measured_in"].values()) == {"rounds"}
    assert "copies side by side would take about" in out["verdict"] and "available now" in out["verdict"]
    _confirm_checks(out, db, lenet_ir)


def test_an_unknown_design_is_one_sentence_before_anything_is_read(db):
    from wb_core.api import confirm

    with pytest.raises(ConfigError, match=r"design must be one of auto, paired, rounds; got 'abba'\.") as e:
        confirm("nothing-here", db, design="abba")
    assert "\n" not in str(e.value) and not db.exists()
