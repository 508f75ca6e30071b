"""A mix of sequence lengths in the recommendation: figures weighed over the lengths, configurations
missing a length left out with a note; and the figures against sequence length."""

from __future__ import annotations

import pandas as pd
import pytest
from typer.testing import CliRunner

from wb_core.analysis.recommend import recommend
from wb_core.analysis.seq_mix import mix_lengths, parse_seq_mix
from wb_core.errors import ConfigError


def _frame():
    # (precision, batch, seq_len, throughput samples/s, p50 ms, p99 ms)
    runs = [("fp32", 1, 128, 100.0, 10.0, 12.0), ("fp32", 1, 384, 25.0, 40.0, 50.0),
            ("int8", 1, 128, 200.0, 5.0, 6.0), ("int8", 1, 384, 20.0, 50.0, 80.0),  # int8 slow at 384
            ("fp32", 8, 128, 400.0, 20.0, 22.0)]  # batch 8 never measured at 384
    rows = []
    for i, (prec, b, seq, thr, p50, p99) in enumerate(runs):
        rows.append({"key": f"k{i}", "backend": "openvino", "precision": prec, "batch_size": b, "threads": None,
                     "inter_op_threads": None, "streams": None, "cores": None, "instances": 1, "concurrency": 1,
                     "hint": None, "onednn": None, "cpu_pinning": None, "cores_per_instance": None, "rate": None,
                     "seq_len": seq, "throughput": thr, "latency_ms_p50": p50, "latency_ms_mean": p50,
                     "latency_ms_p99": p99, "status": "ok", "accuracy": 1.0 if prec == "fp32" else 0.99,
                     "accuracy_drop": 0.0 if prec == "fp32" else 0.01, "rss_mb": 100.0 + seq, "cpu_util": 1.0})
    return pd.DataFrame(rows)


def test_parse_seq_mix():
    assert parse_seq_mix("128:0.8,384:0.2") == {128: 0.8, 384: 0.2}
    assert parse_seq_mix("384:20, 128:80") == {128: 0.8, 384: 0.2}  # normalised, sorted by length
    assert parse_seq_mix({64: 1}) == {64: 1.0}
    for bad, match in (("128", "LENGTH:WEIGHT"), ("x:0.5", "whole length"), ("128:-1", "at least 0"),
                       ("128:0", "weight above 0"), ("", "at least one length")):
        with pytest.raises(ConfigError, match=match):
            parse_seq_mix(bad)


def test_mix_weighs_time_per_request_and_per_sample():
    mixed, notes = mix_lengths(_frame(), {128: 0.8, 384: 0.2})
    assert len(mixed) == 2  # batch 8 lacks 384
    fp32 = mixed[mixed["precision"] == "fp32"].iloc[0]
    int8 = mixed[mixed["precision"] == "int8"].iloc[0]
    assert fp32["latency_ms_p50"] == pytest.approx(0.8 * 10 + 0.2 * 40)  # 16 ms
    assert fp32["throughput"] == pytest.approx(1 / (0.8 / 100 + 0.2 / 25))  # 62.5/s
    assert int8["throughput"] == pytest.approx(1 / (0.8 / 200 + 0.2 / 20))  # 71.4/s
    assert int8["latency_ms_p99"] == 80.0 and int8["rss_mb"] == 484.0 and int8["mix_keys"] == "k2,k3"
    assert notes == ["1 configuration was not measured at sequence length 384 and is not eligible for the mix."]


def test_recommendation_changes_with_the_mix():
    df = _frame()
    short = recommend(df, seq_mix="128:1")
    assert (short.best["precision"], short.best["batch_size"]) == ("fp32", 8)  # 400/s at 128
    mostly_short = recommend(df, seq_mix="128:0.8,384:0.2")
    assert mostly_short.best["precision"] == "int8" and "80% at 128, 20% at 384" in mostly_short.reason
    assert any("not eligible" in n for n in mostly_short.notes)
    mostly_long = recommend(df, seq_mix="128:0.2,384:0.8")
    assert mostly_long.best["precision"] == "fp32"  # int8 loses at 384
    by_latency = recommend(df, objective="latency", seq_mix="128:0.8,384:0.2")
    assert by_latency.best["precision"] == "fp32"  # p99 is the worst length's: 50 < 80 ms
    with pytest.raises(ConfigError, match="measured at every length of the mix \\(128, 512\\); its lengths are "
                                          "128, 384"):
        recommend(df, seq_mix="128:0.5,512:0.5")
    with pytest.raises(ConfigError, match="no sequence-length axis"):
        recommend(df.drop(columns="seq_len"), seq_mix="128:1")


def test_seq_len_figure_has_a_line_per_precision_and_batch():
    from wb_core.plots import has_seq_axis, seq_len_curves, study_figures

    df = _frame()
    assert has_seq_axis(df) and "seq_len" in study_figures(df)
    fig = seq_len_curves(df)
    names = sorted({t.name for t in fig.data})
    assert names == ["fp32, batch 1", "fp32, batch 8", "int8, batch 1"]
    assert len(fig.data) == 9  # p50, p99, throughput for each
    int8_thr = [t for t in fig.data if t.name == "int8, batch 1" and t.yaxis == "y3"][0]
    assert list(int8_thr.x) == [128, 384] and list(int8_thr.y) == [200.0, 20.0]
    assert "seq_len" not in study_figures(df[df["seq_len"] == 128])


def test_cli_recommend_with_a_mix(tmp_path):
    from wb_core.cli import app
    from wb_core.store import Store

    db = tmp_path / "mix.db"
    df = _frame()
    with Store(db) as s:
        s.ensure_study("mix", "m.xml", "openvino", "fp0", {}, "hw0", {}, {"sweep": {}, "settings": {}, "inputs": {}})
        for _, r in df.iterrows():
            cfg = {c: (int(r[c]) if c in ("batch_size", "seq_len") else r[c])
                   for c in ("backend", "precision", "batch_size", "seq_len")}
            metrics = {c: r[c] for c in ("throughput", "latency_ms_p50", "latency_ms_mean", "latency_ms_p99",
                                         "accuracy", "accuracy_drop", "rss_mb", "cpu_util")}
            s.add_run("mix", r["key"], cfg, "ok", metrics)
    res = CliRunner().invoke(app, ["recommend", "--study", "mix", "--db", str(db), "--seq-mix", "128:0.8,384:0.2"])
    assert res.exit_code == 0, res.output
    assert "Best for the mix: OpenVINO · INT8 · batch 1" in res.output and "not eligible" in res.output
    res = CliRunner().invoke(app, ["recommend", "--study", "mix", "--db", str(db), "--seq-mix", "128:0.5,999:0.5"])
    assert res.exit_code != 0 and "every length of the mix" in str(res.exception)  # main() prints it in one line
    out = tmp_path / "plots.html"
    res = CliRunner().invoke(app, ["plot", "--study", "mix", "--db", str(db), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "seq_len" in res.output and "Sequence length: latency and throughput" in out.read_text()
