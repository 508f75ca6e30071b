"""Figures of a training study (plotly `go.Figure`, never displayed here)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from wb_core.training.study import thread_label


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    if df is None or df.empty or "epoch_s" not in df.columns:
        return pd.DataFrame()
    ok = df[(df["status"] == "ok") & df["epoch_s"].notna()].copy()
    if not ok.empty:
        ok["setting"] = ok.apply(lambda r: f"b{int(r['batch_size'])} " + thread_label(r), axis=1)
    return ok


def _empty(title: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, xaxis={"visible": False}, yaxis={"visible": False},
                      annotations=[{"text": "No successful training runs to plot.", "showarrow": False}])
    return fig


def scaling(df: pd.DataFrame) -> go.Figure:
    """Epoch time, CPU use and samples/s per core against the cores given, one line per thread setting."""
    title = "Training against the cores given"
    ok = _ok(df)
    if ok.empty:
        return _empty(title)
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07,
                        subplot_titles=("seconds per epoch (lower is better)", "CPU use (% of the cores given)",
                                        "samples/s per core (higher is better)"))
    colours = {}
    palette = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac"]
    for name, part in ok.groupby("setting", sort=True):
        part = part.sort_values("cores_given")
        c = colours.setdefault(name, palette[len(colours) % len(palette)])
        for row, col in ((1, "epoch_s"), (2, "cpu_util_pct"), (3, "throughput_per_core")):
            fig.add_trace(go.Scatter(x=part["cores_given"], y=part[col], mode="lines+markers", name=name,
                                     legendgroup=name, showlegend=row == 1, line={"color": c}), row=row, col=1)
    fig.update_xaxes(title_text="cores given", dtick=1, row=3, col=1)
    fig.update_layout(title=title, height=760)
    return fig


def settings_bars(df: pd.DataFrame) -> go.Figure:
    """Seconds per epoch of every setting, fastest first (the default-threading run marked)."""
    title = "Seconds per epoch by setting"
    ok = _ok(df)
    if ok.empty:
        return _empty(title)
    ok = ok.sort_values("epoch_s")
    labels = [f"{r['setting']} cores={r['cores']}" for _, r in ok.iterrows()]
    err_hi = (ok["epoch_s_max"] - ok["epoch_s"]).clip(lower=0)
    err_lo = (ok["epoch_s"] - ok["epoch_s_min"]).clip(lower=0)
    fig = go.Figure(go.Bar(x=ok["epoch_s"], y=labels, orientation="h",
                           error_x={"type": "data", "array": err_hi, "arrayminus": err_lo},
                           text=[f"{v:.2f} s, {u:.0f}% CPU" for v, u in zip(ok["epoch_s"], ok["cpu_util_pct"])],
                           textposition="auto"))
    fig.update_layout(title=title, xaxis_title="seconds per epoch (median; bars: min-max)",
                      yaxis={"autorange": "reversed"}, height=max(320, 40 * len(ok) + 120))
    return fig


def training_figures(df: pd.DataFrame) -> dict[str, go.Figure]:
    return {"scaling": scaling(df), "settings": settings_bars(df)}
