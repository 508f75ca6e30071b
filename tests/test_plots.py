"""Plot builders return figures with the expected traces and never display anything."""

from __future__ import annotations

import re

import plotly.graph_objects as go

from analysis_data import HARDWARE, frame, run, sample_frame
from wb_core import plots
from wb_core.analysis.recommend import with_efficiency
from wb_core.measure import latency_histogram


def _names(fig):
    return [t.name for t in fig.data]


def test_latency_throughput_has_series_and_pareto_front():
    fig = plots.latency_throughput(sample_frame())
    assert isinstance(fig, go.Figure)
    assert _names(fig) == ["OpenVINO FP32", "TensorFlow FP32", "Pareto front"]
    front = fig.data[-1]
    assert list(front.x) == [0.5, 2.0, 8.0]
    assert "OpenVINO · FP32 · batch 1 · 1 thread · cores 0" in front.text[0]  # hover names the run in words


def test_curves_take_the_best_run_per_value():
    df = with_efficiency(sample_frame(), HARDWARE)
    batch = plots.batch_curves(df)
    ov = [t for t in batch.data if t.name == "OpenVINO FP32"]
    assert len(ov) == 2  # latency row and throughput row
    assert list(ov[0].x) == [1, 8, 32]
    assert list(ov[1].y) == [2000, 9000, 15000]  # b8: the 9000 run beats the 5000 one
    threads = plots.threads_curves(df)
    assert {t.name for t in threads.data} == {"OpenVINO FP32", "TensorFlow FP32"}
    cores = plots.cores_curves(df)
    assert len(cores.data) == 6  # 2 series x throughput, run time, CPU
    assert list([t for t in cores.data if t.name == "OpenVINO FP32"][0].x) == [1.0, 2.0, 4.0]


def test_accuracy_plot_only_with_accuracy():
    assert plots.accuracy_tradeoff(sample_frame()) is None
    df = frame([run(precision="fp32", thr=1000, accuracy=0.99), run(precision="int8", batch=2, thr=3000,
                                                                     accuracy=0.97)])
    fig = plots.accuracy_tradeoff(df)
    assert _names(fig) == ["fp32", "int8", "Pareto front"]
    assert "accuracy" in plots.study_figures(df)


def test_latency_distribution_from_histogram_and_fallback():
    values = [0.1] * 50 + [0.2] * 40 + [1.5] * 10
    hist = latency_histogram(values)
    assert len(hist["counts"]) == 50 and len(hist["edges_ms"]) == 51 and sum(hist["counts"]) == 100
    r = run(p99=1.5, latency_hist=hist)
    fig = plots.latency_distribution(r)
    assert fig.data[0].type == "bar" and sum(fig.data[0].y) == 100
    lines = {t.name.split()[0]: t for t in fig.data if t.type == "scatter"}
    assert list(lines["p99"].x) == [1.5, 1.5] and "p99 1.5 ms" in lines["p99"].text  # the label on its own line
    assert list(lines["p50"].x) == [r["latency_ms_p50"]] * 2 and f"p50 {r['latency_ms_p50']:.3g} ms" in lines["p50"].text
    lo, hi = fig.layout.xaxis.range  # log10 units: the axis ends near the slowest request, not at 10^5 ms
    assert fig.layout.xaxis.type == "log" and 10 ** hi < 3 * max(values) and 10 ** lo > min(values) / 3
    fallback = plots.latency_distribution(run(p99=1.5))
    assert list(fallback.data[0].x) == ["p50", "p90", "p95", "p99"]
    assert latency_histogram([]) is None


def test_empty_study_gives_a_figure_that_says_so():
    fig = plots.latency_throughput(frame([run(status="failed", p99=float("nan"), thr=float("nan"))]))
    assert not fig.data and "No successful runs" in fig.layout.annotations[0].text


def test_layer_charts():
    import pandas as pd

    from wb_core.analysis.layers import LayerProfile

    layers = pd.DataFrame({"name": ["conv1", "fc", "pool"], "type": ["Convolution", "FullyConnected", "AvgPool"],
                           "exec_type": ["brgconv_avx512_bf16", "brgemm_avx512_f32", "jit_avx512_bf16"],
                           "precision": ["bf16", "f32", "bf16"], "time_ms": [0.5, 0.3, 0.2],
                           "cpu_time_ms": [0.5, 0.3, 0.2], "share": [0.5, 0.3, 0.2],
                           "status": ["EXECUTED"] * 3})
    p = LayerProfile(key="k", label="openvino bf16 b1", iterations=10, batch_size=1, layers=layers)
    assert set(_names(plots.layer_bars(p))) == {"bf16", "f32"}
    types = p.by_type()
    assert list(types["type"]) == ["Convolution", "FullyConnected", "AvgPool"]
    assert list(plots.layer_type_bars(p).data[0].text) == ["bf16", "f32", "bf16"]
    # The Layers tab's bars: the two slowest types, one trace per precision they ran in, in words.
    stack = plots.layer_type_stack(p, 2)
    assert [(t.name, list(t.y), list(t.x)) for t in stack.data] == [("BF16", ["Convolution"], [0.5]),
                                                                     ("FP32", ["FullyConnected"], [0.3])]
    assert stack.layout.title.text == "Time per layer type (top 2)"
    # The Compare tab's bars: each run's time per type, side by side.
    from wb_core.analysis.compare import layer_diff

    bars = plots.layer_diff_bars(layer_diff(p, p), "the first run", "the second run")
    assert [t.name for t in bars.data] == ["the first run", "the second run"]
    assert sorted(bars.data[0].y) == sorted(bars.data[1].y) == [0.2, 0.3, 0.5]


def _tick_values(text: str) -> float:
    m = re.fullmatch(r"([0-9][0-9,]*(?:\.[0-9]+)?) ms", text)
    assert m, f"tick label {text!r} is not a number with its unit"
    return float(m.group(1).replace(",", ""))


def test_log_axes_label_every_tick_in_full_with_its_unit():
    """0.2 ms reads as 0.2 ms (plotly's own log ticks read 2 3 5 7 1 2 ..., bare digits between decades)."""
    df = frame([run(batch=1, threads=1, p99=0.2, thr=1000), run(batch=8, threads=2, p99=2.0, thr=4000),
                run(batch=32, threads=2, p99=20.0, thr=8000)])
    fig = plots.latency_throughput(df)
    x = fig.layout.xaxis
    assert x.type == "log" and x.tickvals and len(x.ticktext) == len(x.tickvals) >= 3
    for value, label in zip(x.tickvals, x.ticktext):
        assert _tick_values(label) == value  # every label is its own value, in ms
    lo, hi = 10 ** x.range[0], 10 ** x.range[1]
    assert lo < 0.2 and hi > 20 and all(lo <= v <= hi for v in x.tickvals)
    assert {"0.2 ms", "2 ms", "20 ms"} <= set(x.ticktext)
    narrow = plots.latency_throughput(frame([run(p99=0.31, thr=1000), run(batch=2, p99=0.38, thr=1500)]))
    assert len(narrow.layout.xaxis.tickvals) >= 2 and all(t.endswith(" ms") for t in narrow.layout.xaxis.ticktext)
    batch = plots.batch_curves(with_efficiency(df, HARDWARE))
    assert list(batch.layout.xaxis2.ticktext or batch.layout.xaxis.ticktext) == ["1", "8", "32"]
