"""Figures that put host types side by side (plotly; they return figures and never display)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

PANELS = (("throughput", "Best throughput (samples/s)"),
          ("throughput_per_core", "Throughput per core"),
          ("cost_per_million", "Cost per million inferences (USD)"))


def _type_label(row) -> str:
    hosts = row.get("hosts") or ""
    return f"{row['hardware_fingerprint']}" + (f" ({hosts})" if hosts else "")


def host_type_bars(comparison: pd.DataFrame) -> go.Figure:
    """Best configuration per hardware type: throughput, throughput per core, and cost when priced."""
    panels = [(c, t) for c, t in PANELS if c in comparison and comparison[c].notna().any()]
    if comparison.empty or not panels:
        fig = go.Figure()
        fig.update_layout(title="Host types", annotations=[{"text": "No host type has a successful run.",
                                                             "showarrow": False, "xref": "paper", "yref": "paper",
                                                             "x": 0.5, "y": 0.5}])
        return fig
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[t for _, t in panels])
    labels = [_type_label(r) for _, r in comparison.iterrows()]
    hover = [f"{r['best_config']}<br>p99 {r['latency_ms_p99']:.3g} ms" if r.get("best_config") else (r.get("note") or "")
             for _, r in comparison.iterrows()]
    for i, (col, title) in enumerate(panels, start=1):
        fig.add_trace(go.Bar(x=labels, y=comparison[col].astype(float), name=title, hovertext=hover,
                             showlegend=False), row=1, col=i)
    fig.update_layout(title="Host types side by side (best configuration of each)", bargap=0.3)
    return fig


def host_type_scatter(df: pd.DataFrame) -> go.Figure:
    """Every successful run: p99 latency against throughput, one colour per hardware type."""
    ok = df[(df["status"] == "ok") & df["hardware_fingerprint"].notna()] if "hardware_fingerprint" in df else df.iloc[0:0]
    fig = go.Figure()
    for fp, sub in ok.groupby("hardware_fingerprint"):
        hosts = ", ".join(sorted(set(sub["host"].dropna()))) if "host" in sub else ""
        fig.add_trace(go.Scatter(x=sub["throughput"].astype(float), y=sub["latency_ms_p99"].astype(float),
                                 mode="markers", name=f"{fp}" + (f" ({hosts})" if hosts else ""),
                                 text=[f"b{b} t{t}" for b, t in zip(sub["batch_size"], sub["threads"])]))
    fig.update_layout(title="Latency against throughput by host type", xaxis_title="throughput (samples/s)",
                      yaxis_title="p99 latency (ms)")
    return fig
