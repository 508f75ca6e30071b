"""Plot builders return figures with the expected traces and never display anything."""

from __future__ import annotations

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
    assert any("p99" in a.text for a in fig.layout.annotations)
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
