"""Runs side by side, the best run of several studies, and the per-layer difference of two profiles."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis_data import HARDWARE, frame, run
from wb_core import api, faces
from wb_core.analysis.compare import base_type, best_runs, compare_runs, layer_diff, ratio_sentences
from wb_core.analysis.layers import LAYER_COLUMNS, LayerProfile
from wb_core.config import RunConfig, SweepSpec
from wb_core.errors import ConfigError, StoreError, WorkbenchError
from wb_core.store import Store


def _runs():
    return frame([run(precision="fp32", thr=1000, p99=2.0, rss=100),
                  run(precision="int8", thr=2100, p99=1.0, rss=80),
                  run(precision="int8", batch=8, thr=5000, p99=4.0, rss=90)])


def test_compare_runs_flags_the_settings_that_differ_and_gives_ratios_to_the_first():
    df = _runs()
    out, differing = compare_runs(df, [df["key"][0], df["key"][1]])
    assert list(out["key"]) == [df["key"][0], df["key"][1]]
    assert differing == {"precision"}
    assert out["throughput_x"].tolist() == pytest.approx([1.0, 2.1])
    assert out["p99_x"].tolist() == pytest.approx([1.0, 0.5])
    for col in ("latency_ms_p50", "cpu_util", "rss_mb", "accuracy", "executed_precision", "label"):
        assert col in out.columns
    lines = ratio_sentences(out, ["FP32", "INT8"])
    assert lines == ["INT8: 2.1× the throughput of the first run, and 0.5× its p99 latency (faster)."]


def test_compare_runs_of_three_takes_key_prefixes_and_keeps_their_order():
    df = _runs()
    keys = [df["key"][2][:6], df["key"][0]]
    out, differing = compare_runs(df, keys + [df["key"][1]])
    assert out["key"].tolist() == [df["key"][2], df["key"][0], df["key"][1]]
    assert differing == {"precision", "batch_size"}
    assert out["throughput_x"].iloc[1] == pytest.approx(0.2)


def test_compare_runs_refuses_fewer_than_two_or_the_same_run_twice():
    df = _runs()
    with pytest.raises(ConfigError, match="at least two"):
        compare_runs(df, [df["key"][0]])
    with pytest.raises(ConfigError, match="twice"):
        compare_runs(df, [df["key"][0], df["key"][0]])
    with pytest.raises(ConfigError, match="No run with key"):
        compare_runs(df, [df["key"][0], "zzzz"])
    with pytest.raises(WorkbenchError, match="no runs"):
        compare_runs(pd.DataFrame(), ["a", "b"])


def test_a_failed_run_compares_without_ratios():
    df = frame([run(thr=1000), run(threads=2, status="failed", thr=float("nan"), p99=float("nan"))])
    out, _ = compare_runs(df, list(df["key"]))
    assert math.isnan(out["throughput_x"].iloc[1])
    assert "no measurement" in ratio_sentences(out)[0]


def _study(store: Store, name: str, runs: list[dict], cpu: str = "Test CPU") -> None:
    store.ensure_study(name, f"/models/{name}.xml", "openvino-ir", f"fp-{name}", HARDWARE | {"cpu_model": cpu},
                       "hw", {}, {})
    for r in runs:
        cfg = RunConfig.from_dict(r | {"cores": None})
        metrics = {k: r[k] for k in ("latency_ms_p50", "latency_ms_p99", "throughput", "cpu_util", "rss_mb")}
        store.add_run(name, cfg.key, cfg.to_dict(), r["status"], metrics)


def test_best_runs_of_two_studies_go_side_by_side(db):
    with Store(db) as s:
        _study(s, "before", [run(thr=1000, p99=1.0), run(threads=2, thr=1500, p99=1.0)])
        _study(s, "after", [run(thr=3000, p99=1.0), run(threads=2, status="failed", thr=9e9)], cpu="Other CPU")
    best = best_runs(db, ["before", "after"])
    assert best["study"].tolist() == ["before", "after"]
    assert best["throughput"].tolist() == [1500, 3000]
    assert best["cpu"].tolist() == ["Test CPU", "Other CPU"]
    out, differing = compare_runs(best)  # same settings in both? no: threads differ, and so do study and CPU
    assert {"study", "cpu", "model", "threads"} <= differing
    assert out["throughput_x"].iloc[1] == pytest.approx(2.0)
    with pytest.raises(ConfigError, match="at least two"):
        best_runs(db, ["before"])
    with pytest.raises(StoreError, match="No study named 'nope'"):
        best_runs(db, ["before", "nope"])


def _profile(key: str, rows: list[tuple], batch: int = 1) -> LayerProfile:
    df = pd.DataFrame([(n, t, f"x_{p}", p, ms, ms, 0.0, "EXECUTED") for n, t, p, ms in rows],
                      columns=list(LAYER_COLUMNS))
    df["share"] = df["time_ms"] / df["time_ms"].sum()
    return LayerProfile(key=key, label=key, iterations=10, batch_size=batch,
                        layers=df.sort_values("time_ms", ascending=False, ignore_index=True))


FP32 = [("conv1", "Convolution", "f32", 0.30), ("conv2", "Convolution", "f32", 0.10),
        ("fc", "FullyConnected", "f32", 0.20), ("pool", "AvgPool", "f32", 0.02)]
INT8 = [("conv1", "Convolution", "u8", 0.10), ("conv2", "Convolution", "f32", 0.10),
        ("fc/DequantizationMultiply", "FullyConnectedQuantizedLegacy", "u8", 0.05),
        ("pool", "AvgPool", "u8", 0.04), ("input/fq_output_0", "Subgraph", "f32", 0.01),
        ("conv1_f32_u8_pool", "Reorder", "f32", 0.02)]


def test_layer_diff_matches_types_across_precisions_and_names_where_they_agree():
    d = layer_diff(_profile("a", FP32), _profile("b", INT8))
    t = d.by_type.set_index("type")
    assert base_type("FullyConnectedQuantizedLegacy") == "FullyConnected"
    assert t.loc["FullyConnected", "time_a_ms"] == pytest.approx(0.20)
    assert t.loc["FullyConnected", "time_b_ms"] == pytest.approx(0.05)
    assert t.loc["FullyConnected", "speedup"] == pytest.approx(4.0)
    assert t.loc["Convolution", "precisions_b"] == "f32, u8"
    assert t.loc["Reorder", "layers_a"] == 0 and math.isnan(t.loc["Reorder", "speedup"])
    assert d.by_type["type"].iloc[0] == "Convolution"  # most time first
    layers = d.by_layer.set_index("name")
    assert set(layers.index) == {"conv1", "conv2", "pool"}
    assert layers.loc["conv1", "speedup"] == pytest.approx(3.0) and layers.loc["conv1", "precision_b"] == "u8"
    assert d.only_a == ["fc"]
    assert set(d.only_b) == {"fc/DequantizationMultiply", "input/fq_output_0", "conv1_f32_u8_pool"}
    assert d.faster(1)["type"].tolist() == ["Convolution"]  # 0.2 ms saved beats FullyConnected's 0.15
    assert d.slower(3)["type"].tolist() == ["AvgPool", "Reorder", "Subgraph"]
    text = d.summary("INT8", "FP32")
    assert text.startswith("The layers of INT8 took 0.32 ms per inference in all, against 0.62 for FP32 (1.9× faster).")
    assert "INT8 helped most in Convolution (2.0× faster" in text
    assert "It did not help in AvgPool (2.0× slower" in text and "Reorder (added" in text
    assert layer_diff(_profile("a", FP32), _profile("b", FP32)).summary("the second run").count(
        "The second run was faster in no layer type beyond noise") == 1
    assert "1 layer of FP32 and 3 of INT8 have no layer of the same name" in text


def test_layer_diff_compares_per_sample_when_batches_differ():
    d = layer_diff(_profile("a", FP32, batch=1), _profile("b", FP32, batch=4))
    assert d.per_sample and "per sample" in d.summary()
    assert d.by_type.set_index("type").loc["Convolution", "speedup"] == pytest.approx(4.0)


def test_layer_diff_of_an_empty_profile_says_so():
    empty = LayerProfile(key="e", label="empty run", iterations=1, batch_size=1,
                         layers=pd.DataFrame(columns=list(LAYER_COLUMNS)))
    with pytest.raises(WorkbenchError, match="empty run holds no executed layers"):
        layer_diff(empty, _profile("b", INT8))


def test_a_layer_profile_round_trips_through_the_store(db):
    prof = _profile("k1", INT8)
    prof.properties = {"INFERENCE_PRECISION_HINT": "<Type: 'float32'>"}
    with Store(db) as s:
        assert s.layer_profile("st", "k1") is None
        s.save_layer_profile("st", "k1", prof.to_dict())
    with Store(db, readonly=True) as s:
        back = LayerProfile.from_dict(s.layer_profile("st", "k1"))
    pd.testing.assert_frame_equal(back.layers, prof.layers)
    assert back.label == "k1" and back.batch_size == 1 and back.properties["INFERENCE_PRECISION_HINT"]
    assert faces.stored_layer_profile(db, "st", "other") is None


def test_a_study_run_is_profiled_once_and_then_read_back(lenet_ir, db, fast):
    from wb_core.sweep.local import run_sweep

    s = run_sweep(lenet_ir, SweepSpec(threads="1"), db, "lay", settings=fast)
    assert s.ok == 1, s.errors
    key = api.results("lay", db)["key"].iloc[0]
    assert faces.stored_layer_profile(db, "lay", key) is None
    first = api.layer_profile("lay", key, db, iterations=5, reuse=True)
    assert not first.layers.empty
    stored = faces.stored_layer_profile(db, "lay", key)
    pd.testing.assert_frame_equal(stored.layers, first.layers)
    with Store(db) as st:  # mark the stored copy: a reuse must return it, not measure again
        d = st.layer_profile("lay", key)
        d["label"] = "from the store"
        st.save_layer_profile("lay", key, d)
    assert api.layer_profile("lay", key, db, iterations=5, reuse=True).label == "from the store"
    assert api.layer_profile("lay", key, db, iterations=5).label != "from the store"  # no reuse: measured


# ---------------------------------------------------------------- the Compare and Layers tabs, without a browser


def test_layers_and_compare_tabs_profile_compare_and_reuse(lenet_ir, db, fast):
    pytest.importorskip("ipywidgets", reason="the ui extra is not installed (pip install -e '.[ui]')")
    from wb_core.sweep.local import run_sweep
    from wb_core.ui.compare_panel import ComparePanel
    from wb_core.ui.layers_panel import LayersPanel
    from wb_core.ui.state import DashboardState

    assert run_sweep(lenet_ir, SweepSpec(threads="1,2"), db, "two", settings=fast).ok == 2
    assert run_sweep(lenet_ir, SweepSpec(threads="1"), db, "one", settings=fast).ok == 1
    session = DashboardState(db)
    session.study = "two"
    layers = LayersPanel(session)
    keys = [k for _, k in layers.run.options]
    assert len(keys) == 2 and layers.run.options[0][0].startswith("OpenVINO · FP32 · batch 1 · 1 thread")
    assert "Not profiled yet" in layers.status.value
    layers.profile_button.click()
    layers._thread.join(120)
    assert "Profiled" in layers.status.value, layers.messages.text.value
    assert not layers.profile_button.disabled
    html_out = " ".join(getattr(c, "value", "") for c in layers.result.children)
    assert "Layer type" in html_out and "Convolution" in html_out and "Executed in" in html_out
    assert any(type(c).__name__ == "PlotArea" and len(c.figure.data) for c in layers.result.children)
    assert faces.stored_layer_profile(db, "two", keys[0]) is not None
    assert "Profiled earlier" in LayersPanel(session).status.value  # a new page shows the kept profile at once

    compare = ComparePanel(session)
    compare.shown()
    assert compare.runs.value == (session.current_pick().key,)  # Explore's pick is the first run to compare
    compare.compare_button.click()
    assert "Pick at least two runs" in compare.messages.text.value
    compare.runs.value = tuple(keys)
    compare.baseline.value = keys[1]  # the 2-thread run is the baseline
    assert compare.chosen_keys() == [keys[1], keys[0]]
    compare.compare_button.click()
    assert "wb-diff" in compare.table.value and "Threads" in compare.table.value
    assert "the throughput of the first run" in compare.ratios.value
    assert compare.layers_button.layout.display == ""
    compare.layers_button.click()
    compare._thread.join(120)
    assert not compare.layers_button.disabled
    summary = " ".join(getattr(c, "value", "") for c in compare.layers_result.children)
    assert "wb-layer-summary" in summary and "Second run (ms)" in summary, compare.messages.text.value
    assert "closed loop" in compare.ratios.value and "sum of layer times" in summary  # the modes, and why they differ
    assert faces.stored_layer_profile(db, "two", keys[1]) is not None  # profiled by Compare, kept for next time

    compare.mode.value = "studies"
    assert compare.studies_box.layout.display == "" and compare.runs_box.layout.display == "none"
    # Hiding one control hides no other: each has its own layout.
    controls = (compare.runs, compare.baseline, compare.studies, compare.objective)
    assert len({id(c.layout) for c in controls}) == 4 and compare.objective.layout.display != "none"
    compare.studies.value = ("two", "one")
    compare.compare_button.click()
    assert "Study" in compare.table.value and "wb-diff" in compare.table.value, compare.messages.text.value


def test_the_layers_tab_says_in_a_sentence_when_a_runtime_has_no_layer_counters():
    pytest.importorskip("ipywidgets", reason="the ui extra is not installed (pip install -e '.[ui]')")
    from wb_core.ui.compare_panel import shown_columns, side_names
    from wb_core.ui.layers_panel import run_choices, unsupported

    assert unsupported("openvino") is None
    assert unsupported("tensorflow").startswith("Per-layer times come from OpenVINO's performance counters, and "
                                                "this run used TensorFlow")
    df = frame([run(backend="tensorflow"), run(), run(threads=2, status="failed")])
    assert [n for n, _ in run_choices(df)] == ["TensorFlow · FP32 · batch 1 · 1 thread · not pinned",
                                               "OpenVINO · FP32 · batch 1 · 1 thread · not pinned"]
    out, differing = compare_runs(df, list(df["key"][:2]))
    cols = shown_columns(out.assign(run="x"), differing)
    assert cols[0] == "run" and "backend" in cols and "study" not in cols and "rate" not in cols
    assert side_names(out) == ("the first run", "the second run")
