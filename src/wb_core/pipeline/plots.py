"""Figures of a pipeline study (plotly `go.Figure`, never displayed here).

- `stage_times`: per arrangement, where each side's time went: the preprocessing side (decode,
  preprocess, waiting for a free slot) per process, the inference side (model, waiting for a
  batch) per inference thread. The side with the long wait is not the bottleneck.
- `throughput_vs_workers`: frames/s against the number of preprocessing processes (0 = serial).
- `batch_tradeoff`: frames/s and p99 per-frame latency against batch size.
- `queue_occupancy`: mean batches waiting in the queue against its depth.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

STAGE_COLOURS = {"decode": "#4c78a8", "preprocess": "#72b7b2", "waiting for a free slot": "#d3d3d3",
                 "model": "#f58518", "waiting for a batch": "#bab0ac"}


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    if df is None or df.empty or "pre_workers" not in df.columns:
        return pd.DataFrame()
    ok = df[(df["status"] == "ok") & df["throughput"].notna()].copy()
    return ok


def _empty(title: str, why: str = "No successful pipeline runs to plot.") -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, xaxis={"visible": False}, yaxis={"visible": False},
                      annotations=[{"text": why, "showarrow": False, "font": {"size": 14}}])
    return fig


def point_label(r) -> str:
    """`serial b1`, `2 pre b8 t1 c2` ..."""
    n = int(r["pre_workers"])
    return ("serial" if n == 0 else f"{n} pre") + " " + inference_label(r)


def inference_label(r) -> str:
    """The inference side's settings: `b8 t1 c2` ..."""
    parts = [f"b{int(r['batch_size'])}"]
    if _num(r.get("threads")):
        parts.append(f"t{int(r['threads'])}")
    if _num(r.get("streams")):
        parts.append(f"s{int(r['streams'])}")
    if (_num(r.get("concurrency")) or 1) > 1:
        parts.append(f"c{int(r['concurrency'])}")
    if str(r.get("pre_cores") or "none") != "none" or str(r.get("cores") or "none") != "none":
        parts.append(f"pre@{r.get('pre_cores')}/inf@{r.get('cores')}")
    from wb_core.backends.registry import default_backend

    if r.get("backend") and r.get("backend") != default_backend():  # the default backend goes unnamed
        parts.insert(0, str(r["backend"]))
    return " ".join(parts)


def _num(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def stage_times(df: pd.DataFrame) -> go.Figure:
    title = "Where the time went, per side (the side that waits is not the bottleneck)"
    ok = _ok(df)
    if ok.empty:
        return _empty(title)
    ok = ok.sort_values(["pre_workers", "batch_size"])
    labels = [point_label(r) for _, r in ok.iterrows()]
    n = ok["pre_workers"].clip(lower=1).astype(float)
    k = ok.get("infer_threads", pd.Series(1, index=ok.index)).fillna(1).clip(lower=1).astype(float)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=("Preprocessing side: seconds per process",
                                        "Inference side: seconds per inference thread"))
    for name, col, per, row in (("decode", "decode_s", n, 1), ("preprocess", "preprocess_s", n, 1),
                                ("waiting for a free slot", "queue_wait_s", n, 1),
                                ("model", "infer_s", k, 2), ("waiting for a batch", "infer_wait_s", k, 2)):
        fig.add_trace(go.Bar(x=labels, y=ok[col].astype(float) / per, name=name,
                             marker_color=STAGE_COLOURS[name], legendgroup=name), row=row, col=1)
    for row in (1, 2):
        fig.add_trace(go.Scatter(x=labels, y=ok["wall_s"], mode="markers", name="wall time",
                                 marker={"symbol": "line-ew-open", "size": 22, "color": "black"},
                                 showlegend=row == 1, legendgroup="wall"), row=row, col=1)
    fig.update_layout(title=title, barmode="stack", height=620)
    fig.update_yaxes(title_text="seconds", row=1, col=1)
    fig.update_yaxes(title_text="seconds", row=2, col=1)
    for i, (_, r) in enumerate(ok.iterrows()):
        fig.add_annotation(x=labels[i], y=float(r["wall_s"]), text=str(r.get("bottleneck", "")), showarrow=False,
                           yshift=14, font={"size": 10}, row=2, col=1)
    return fig


def throughput_vs_workers(df: pd.DataFrame) -> go.Figure:
    title = "Frames per second against preprocessing processes (0 = serial loop)"
    ok = _ok(df)
    if ok.empty:
        return _empty(title)
    fig = go.Figure()
    ok["series"] = ok.apply(inference_label, axis=1)
    for name, part in ok.groupby("series", sort=True):
        best = part.sort_values("throughput").groupby("pre_workers").tail(1).sort_values("pre_workers")
        fig.add_trace(go.Scatter(x=best["pre_workers"], y=best["throughput"], mode="lines+markers", name=name,
                                 text=[f"{point_label(r)}<br>{r['throughput']:.1f} frames/s<br>"
                                       f"bottleneck: {r.get('bottleneck')}" for _, r in best.iterrows()],
                                 hoverinfo="text"))
    fig.update_layout(title=title, xaxis_title="preprocessing processes", yaxis_title="frames/s",
                      xaxis={"dtick": 1})
    return fig


def batch_tradeoff(df: pd.DataFrame) -> go.Figure:
    title = "Batch size: frames/s (lines) and p99 latency per frame (dashed)"
    ok = _ok(df)
    if ok.empty:
        return _empty(title)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for n, part in ok.groupby("pre_workers", sort=True):
        best = part.sort_values("throughput").groupby("batch_size").tail(1).sort_values("batch_size")
        name = "serial" if int(n) == 0 else f"{int(n)} pre"
        fig.add_trace(go.Scatter(x=best["batch_size"], y=best["throughput"], mode="lines+markers",
                                 name=f"{name}: frames/s"), secondary_y=False)
        fig.add_trace(go.Scatter(x=best["batch_size"], y=best["latency_ms_p99"], mode="lines+markers",
                                 line={"dash": "dash"}, name=f"{name}: p99 ms"), secondary_y=True)
    fig.update_layout(title=title, xaxis_title="batch size", xaxis_type="log")
    fig.update_yaxes(title_text="frames/s", secondary_y=False)
    fig.update_yaxes(title_text="p99 latency per frame (ms)", secondary_y=True)
    return fig


def queue_occupancy(df: pd.DataFrame) -> go.Figure:
    title = "Queue occupancy: mean batches waiting, against the queue's depth"
    ok = _ok(df)
    ok = ok[ok["pre_workers"] > 0] if not ok.empty else ok
    if ok.empty or "queue_mean" not in ok:
        return _empty(title, "Only the serial loop was run: it has no queue.")
    labels = [point_label(r) for _, r in ok.iterrows()]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=ok["queue_mean"], name="mean waiting",
                         text=ok.get("bottleneck"), textposition="outside"))
    fig.add_trace(go.Scatter(x=labels, y=ok["queue_depth"], mode="markers", name="depth",
                             marker={"symbol": "line-ew-open", "size": 22, "color": "black"}))
    fig.update_layout(title=title, yaxis_title="batches", xaxis_title="arrangement")
    return fig


def pipeline_figures(df: pd.DataFrame) -> dict[str, go.Figure]:
    return {"stages": stage_times(df), "throughput": throughput_vs_workers(df), "batch": batch_tradeoff(df),
            "queue": queue_occupancy(df)}
