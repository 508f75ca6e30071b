"""Plotly figures of a study's trade-offs. Builders return `go.Figure` and never display anything.

Curves against one setting (batch size, threads, cores) show, for each backend and precision,
the best run at each value of that setting: a sweep holds many runs per value, and the best is
what a user would deploy.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from wb_core.analysis.recommend import pareto_mask, successful, uses_accuracy
from wb_core.analysis.words import executed_words, rounded, run_name
from wb_core.axes import WEIGHT_FORMAT_WORDS
from wb_core.backends.registry import title
from wb_core.limits import within_p99
from wb_core.precisions import baseline
from wb_core.variants.guard import FAILED_WORDS, guard_failed_runs

# What a hover says about a run, in words: (column, how the line reads with the value in {}).
HOVER_COLUMNS = (("seq_len", "sequence length {}"),
                 ("throughput", "{} samples/s (closed loop, in process)"), ("latency_ms_p50", "p50 latency {} ms"),
                 ("latency_ms_p99", "p99 latency {} ms"), ("cpu_util", "{} CPU cores busy"),
                 ("rss_mb", "peak memory {} MB"), ("executed_precision", "executed as {}"),
                 ("accuracy", "accuracy {}"), ("accuracy_guard_note", "{}"))
GUARD_FAILED_NAME = f"{FAILED_WORDS} (never recommended)"


def _hover(df: pd.DataFrame) -> list[str]:
    lines = []
    for _, r in df.iterrows():
        parts = [f"<b>{run_name(r)}</b>"]
        for col, how in HOVER_COLUMNS:
            if col in r and not _missing(r[col]):
                parts.append(how.format(rounded(r[col], col)))
        if r.get("busy") is True or r.get("busy") == 1:
            parts.append("measured on a busy machine")
        lines.append("<br>".join(parts))
    return lines


def guard_failed(df: pd.DataFrame) -> pd.Series:
    """Runs whose accuracy guard failed (never recommended; drawn apart). None when not measured."""
    return guard_failed_runs(df)


def guard_failed_trace(bad: pd.DataFrame, x: str = "latency_ms_p99", y: str = "throughput") -> go.Scatter:
    """Runs whose accuracy guard failed, as every plot draws them: grey crosses, named apart."""
    return go.Scatter(x=list(bad[x]), y=list(bad[y]), mode="markers", name=GUARD_FAILED_NAME, text=_hover(bad),
                      hoverinfo="text", marker={"size": 11, "symbol": "x", "color": "#7f7f7f"})


def tick_text(v: float, unit: str = "") -> str:
    """A tick's label in full with its unit: 0.2 ms, 2 ms, 1,500 ms (never a bare 2 for 0.2)."""
    text = f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    return f"{text} {unit}".strip()


def log_ticks(lo: float, hi: float, unit: str = "") -> tuple[list[float], list[str]]:
    """Tick values from `lo` to `hi` (data units) on a log axis: 1, 2 and 5 times powers of ten (finer
    when the span is narrow), each labelled in full with its unit."""
    if not (lo > 0 and hi > 0):
        return [], []
    lo, hi = min(lo, hi), max(lo, hi)
    decades = range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
    vals: list[float] = []
    for steps in ((1, 2, 5), (1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9)):
        vals = [float(f"{m * 10 ** k:.6g}") for k in decades for m in steps if lo <= m * 10 ** k <= hi]
        if len(vals) >= 3:
            break
    if len(vals) < 2:  # a very narrow span: its ends and middle, rounded
        mid = math.sqrt(lo * hi)
        vals = sorted({float(f"{v:.2g}") for v in (lo, mid, hi)})
    return vals, [tick_text(v, unit) for v in vals]


def log_axis(fig: go.Figure, values, unit: str = "", axis: str = "x", pad: float = 0.08, **where) -> None:
    """Make an axis logarithmic over the positive `values` (padded), with full tick labels and units."""
    vals = [float(v) for v in values if v is not None and not _missing(v) and float(v) > 0]
    update = fig.update_xaxes if axis == "x" else fig.update_yaxes
    if not vals:
        update(type="log", **where)
        return
    a, b = math.log10(min(vals)), math.log10(max(vals))
    margin = max((b - a) * pad, 0.05)
    lo, hi = a - margin, b + margin
    tickvals, ticktext = log_ticks(10 ** lo, 10 ** hi, unit)
    update(type="log", range=[lo, hi], autorange=False, tickvals=tickvals, ticktext=ticktext, **where)


def _series_name(r) -> str:
    backend = title(str(r["backend"]))
    return f"{backend} {str(r['precision'] or baseline()).upper()}"


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    ok = successful(df)
    return ok[ok["throughput"].notna() & ok["latency_ms_p99"].notna()]


def _empty(title: str, why: str = "No successful runs to plot.") -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, xaxis={"visible": False}, yaxis={"visible": False},
                      annotations=[{"text": why, "showarrow": False, "font": {"size": 14}}])
    return fig


def latency_throughput(df: pd.DataFrame) -> go.Figure:
    """p99 latency vs throughput of every successful run, the Pareto front drawn as a line."""
    title = "Latency vs throughput (upper left is better)"
    ok = _ok(df)
    if ok.empty:
        return _empty(title)
    fig = go.Figure()
    failed = guard_failed(ok)
    bad, ok = ok[failed], ok[~failed]
    for name, part in (ok.groupby(ok.apply(_series_name, axis=1), sort=True) if not ok.empty else ()):
        fig.add_trace(go.Scatter(x=part["latency_ms_p99"], y=part["throughput"], mode="markers", name=name,
                                 text=_hover(part), hoverinfo="text", marker={"size": 9, "opacity": 0.8}))
    if not bad.empty:  # drawn, so the user sees them, but apart and off the front
        fig.add_trace(guard_failed_trace(bad))
    front = ok[pareto_mask(ok)].sort_values("latency_ms_p99") if not ok.empty else ok
    fig.add_trace(go.Scatter(x=front["latency_ms_p99"], y=front["throughput"], mode="lines+markers",
                             name="Pareto front", text=_hover(front), hoverinfo="text",
                             line={"shape": "hv", "width": 2, "color": "black"},
                             marker={"symbol": "circle-open", "size": 14, "color": "black"}))
    fig.update_layout(title=title, xaxis_title="p99 latency (ms)", yaxis_title="throughput (samples/s)",
                      legend_title="runtime and precision")
    log_axis(fig, list(ok["latency_ms_p99"]) + list(bad["latency_ms_p99"]), "ms")
    return fig


def _best_per(df: pd.DataFrame, setting: str) -> pd.DataFrame:
    """The highest-throughput run for each backend, precision and value of `setting`."""
    ok = _ok(df)
    ok = ok[ok[setting].notna()] if setting in ok.columns else ok.iloc[0:0]
    if ok.empty:
        return ok
    ok = ok.assign(_series=ok.apply(_series_name, axis=1))
    idx = ok.groupby(["_series", setting])["throughput"].idxmax()
    return ok.loc[idx.values].sort_values(["_series", setting])


def _curves(df: pd.DataFrame, setting: str, x_title: str, rows: list[tuple[str, str]], title: str,
            log_x: bool = False) -> go.Figure:
    best = _best_per(df, setting)
    if best.empty:
        return _empty(title, f"No successful runs with a {x_title.lower()} to plot.")
    fig = make_subplots(rows=len(rows), cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=[name for _, name in rows])
    colours = _colours(best["_series"].unique())
    for series, part in best.groupby("_series", sort=True):
        for i, (col, name) in enumerate(rows, start=1):
            fig.add_trace(go.Scatter(x=part[setting], y=part[col], mode="lines+markers", name=series,
                                     legendgroup=series, showlegend=(i == 1), text=_hover(part), hoverinfo="text",
                                     line={"color": colours[series]}), row=i, col=1)
            fig.update_yaxes(title_text=name, row=i, col=1)
    fig.update_xaxes(title_text=x_title, row=len(rows), col=1)
    if log_x:  # a setting's own values as ticks (batch 1, 8, 32), never bare digits between them
        ticks = sorted({float(v) for v in best[setting]})
        fig.update_xaxes(type="log", tickvals=ticks, ticktext=[tick_text(v) for v in ticks])
    fig.update_layout(title=title, height=260 * len(rows) + 80)
    return fig


def batch_curves(df: pd.DataFrame) -> go.Figure:
    """p99 latency and throughput against batch size, one line per backend and precision."""
    return _curves(df, "batch_size", "batch size",
                   [("latency_ms_p99", "p99 latency (ms)"), ("throughput", "throughput (samples/s)")],
                   "Batch size: latency and throughput (best run at each batch size)", log_x=True)


def threads_curves(df: pd.DataFrame) -> go.Figure:
    """Throughput and CPU utilisation against threads."""
    return _curves(df, "threads", "threads",
                   [("throughput", "throughput (samples/s)"), ("cpu_util", "CPU busy (cores)")],
                   "Threads: throughput and CPU utilisation (best run at each thread count)")


def cores_curves(df: pd.DataFrame) -> go.Figure:
    """Throughput, mean run time per request and CPU utilisation against the cores a run was given."""
    view = df.copy()
    if "cores_given" not in view.columns:
        from wb_core.analysis.recommend import with_efficiency

        view = with_efficiency(view)
    return _curves(view, "cores_given", "cores given (pinned, or all when unpinned)",
                   [("throughput", "throughput (samples/s)"), ("latency_ms_mean", "mean latency (ms)"),
                    ("cpu_util", "CPU busy (cores)")],
                   "Cores: throughput, run time and CPU utilisation (best run at each core count)")


def has_seq_axis(df: pd.DataFrame) -> bool:
    """The study measured more than one sequence length (a `seq_len` axis)."""
    return "seq_len" in df.columns and df["seq_len"].dropna().nunique() > 1


def seq_len_curves(df: pd.DataFrame) -> go.Figure:
    """p50 and p99 latency and throughput against sequence length, one line per batch size and
    precision (and backend, when there are several): the best run of each at each length."""
    title = "Sequence length: latency and throughput (best run at each length)"
    ok = _ok(df)
    ok = ok[ok["seq_len"].notna()] if "seq_len" in ok.columns else ok.iloc[0:0]
    if ok.empty:
        return _empty(title, "No successful runs with a sequence length to plot.")
    several = ok["backend"].nunique() > 1
    ok = ok.assign(_series=ok.apply(lambda r: (f"{r['backend']} " if several else "")
                                    + f"{r['precision']}, batch {int(r['batch_size'])}", axis=1))
    idx = ok.groupby(["_series", "seq_len"])["throughput"].idxmax()
    best = ok.loc[idx.values].sort_values(["precision", "batch_size", "seq_len"])
    rows = [("latency_ms_p50", "p50 latency (ms)"), ("latency_ms_p99", "p99 latency (ms)"),
            ("throughput", "throughput (samples/s)")]
    fig = make_subplots(rows=len(rows), cols=1, shared_xaxes=True, vertical_spacing=0.07,
                        subplot_titles=[name for _, name in rows])
    order = list(dict.fromkeys(best["_series"]))
    colours = _colours(order)
    for series in order:
        part = best[best["_series"] == series]
        dash = "dot" if str(part["precision"].iloc[0]) != baseline() else "solid"
        for i, (col, name) in enumerate(rows, start=1):
            fig.add_trace(go.Scatter(x=part["seq_len"], y=part[col], mode="lines+markers", name=series,
                                     legendgroup=series, showlegend=(i == 1), text=_hover(part), hoverinfo="text",
                                     line={"color": colours[series], "dash": dash}), row=i, col=1)
            fig.update_yaxes(title_text=name, row=i, col=1)
    fig.update_xaxes(title_text="sequence length (tokens)", type="log", row=len(rows), col=1)
    lengths = sorted(best["seq_len"].unique().tolist())
    fig.update_xaxes(tickvals=lengths, ticktext=[tick_text(v) for v in lengths])
    fig.update_layout(title=title, height=240 * len(rows) + 80, legend_title="precision, batch")
    return fig


def accuracy_tradeoff(df: pd.DataFrame) -> go.Figure | None:
    """Accuracy against throughput per precision; None when the study has no accuracy."""
    ok = _ok(df)
    if "accuracy" not in ok.columns or ok["accuracy"].isna().all():
        return None
    ok = ok[ok["accuracy"].notna()]
    fig = go.Figure()
    for prec, part in ok.groupby("precision", sort=True):
        fig.add_trace(go.Scatter(x=part["throughput"], y=part["accuracy"], mode="markers", name=str(prec),
                                 text=_hover(part), hoverinfo="text", marker={"size": 10}))
    if uses_accuracy(df):
        front = ok[pareto_mask(ok, with_accuracy=True)].sort_values("throughput")
        fig.add_trace(go.Scatter(x=front["throughput"], y=front["accuracy"], mode="markers", name="Pareto front",
                                 text=_hover(front), hoverinfo="text",
                                 marker={"symbol": "circle-open", "size": 16, "color": "black"}))
    fig.update_layout(title="Accuracy vs throughput by precision (upper right is better)",
                      xaxis_title="throughput (samples/s)", yaxis_title="accuracy", legend_title="precision")
    return fig


def latency_distribution(run: pd.Series | dict) -> go.Figure:
    """Histogram of one run's request latencies, with p50 and p99 marked.

    Uses the run's stored histogram (`latency_hist`); runs recorded before it existed show their
    percentiles only.
    """
    g = run.get
    title = f"Latency distribution: {run_name(run)}"
    fig = go.Figure()
    hist = g("latency_hist")
    if isinstance(hist, dict) and hist.get("counts"):
        edges, counts = list(hist["edges_ms"]), list(hist["counts"])
        used = [i for i, c in enumerate(counts) if c]  # the axis spans the bins that hold requests
        first, last = (used[0], used[-1]) if used else (0, len(counts) - 1)
        edges, counts = edges[first:last + 2], counts[first:last + 1]
        mids = [math.sqrt(a * b) if a > 0 and b > 0 else (a + b) / 2 for a, b in zip(edges[:-1], edges[1:])]
        widths = [b - a for a, b in zip(edges[:-1], edges[1:])]
        fig.add_trace(go.Bar(x=mids, y=counts, width=widths, name="requests",
                             hovertemplate="%{x:.4g} ms: %{y} requests<extra></extra>"))
    else:
        names = [("latency_ms_min", "min"), ("latency_ms_p50", "p50"), ("latency_ms_p90", "p90"),
                 ("latency_ms_p95", "p95"), ("latency_ms_p99", "p99"), ("latency_ms_max", "max")]
        pts = [(n, g(c)) for c, n in names if not _missing(g(c))]
        fig.add_trace(go.Bar(x=[n for n, _ in pts], y=[v for _, v in pts], name="percentiles (ms)"))
        title += " (percentiles only: no histogram stored for this run)"
        fig.update_layout(title=title, yaxis_title="latency (ms)")
        return fig
    # The percentiles as line traces in data units, each labelled at its own line (a shape on a log
    # axis would take its x as a power of ten).
    top = max(counts) if counts else 1
    xs = [e for e in edges if e > 0]
    for col, name, dash, colour in (("latency_ms_p50", "p50", "dash", "#1f77b4"),
                                    ("latency_ms_p99", "p99", "dot", "#d62728")):
        v = g(col)
        if not _missing(v):
            label = f"{name} {tick_text(float(v), 'ms')}"
            fig.add_trace(go.Scatter(x=[float(v), float(v)], y=[0, top * 1.08], mode="lines+text", name=label,
                                     text=["", label], textposition="top center", hoverinfo="name",
                                     line={"dash": dash, "color": colour, "width": 2}))
            xs.append(float(v))
    log_axis(fig, [min(xs), max(xs)] if xs else [], "ms", pad=0.03)
    fig.update_layout(title=title, xaxis_title="latency per request (ms)", yaxis_title="requests", bargap=0,
                      yaxis={"range": [0, top * 1.2]})
    return fig


def layer_bars(profile, top: int = 15) -> go.Figure:
    """Horizontal bars of the slowest layers of a LayerProfile, coloured by executed precision."""
    layers = profile.top(top).iloc[::-1]
    fig = go.Figure()
    colours = _colours(sorted(layers["precision"].unique()))
    for prec, part in layers.groupby("precision", sort=False):
        fig.add_trace(go.Bar(y=part["name"], x=part["time_ms"], orientation="h", name=str(prec),
                             marker={"color": colours[prec]},
                             customdata=part[["type", "exec_type", "share"]].to_numpy(),
                             hovertemplate="%{y}<br>%{customdata[0]} (%{customdata[1]})<br>%{x:.4f} ms, "
                                           "%{customdata[2]:.1%} of layer time<extra></extra>"))
    fig.update_layout(title=f"Slowest layers: {profile.label} (mean of {profile.iterations} inferences)",
                      xaxis_title="time per inference (ms)", legend_title="executed in", barmode="stack",
                      height=max(300, 28 * len(layers) + 140), yaxis={"categoryorder": "total ascending"})
    return fig


def layer_type_bars(profile) -> go.Figure:
    """Time per layer type of a LayerProfile, with the precisions each type ran in."""
    t = profile.by_type()
    fig = go.Figure(go.Bar(x=t["type"], y=t["time_ms"], text=t["precisions"], textposition="outside",
                           customdata=t[["layers", "share"]].to_numpy(),
                           hovertemplate="%{x}: %{y:.4f} ms in %{customdata[0]} layers "
                                         "(%{customdata[1]:.1%}), ran in %{text}<extra></extra>"))
    fig.update_layout(title=f"Time per layer type: {profile.label}", xaxis_title="layer type",
                      yaxis_title="time per inference (ms)")
    return fig


def study_figures(df: pd.DataFrame) -> dict[str, go.Figure]:
    """Every study-level figure that has data, by a short name (for reports and notebooks)."""
    figs = {"latency_throughput": latency_throughput(df), "batch": batch_curves(df), "threads": threads_curves(df),
            "cores": cores_curves(df)}
    if has_seq_axis(df):
        figs["seq_len"] = seq_len_curves(df)
    acc = accuracy_tradeoff(df)
    if acc is not None:
        figs["accuracy"] = acc
    return figs


PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")


def _colours(names) -> dict:
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def generation_pareto(df: pd.DataFrame) -> go.Figure:
    """A generation study: output tokens/s against p99 time per output token, one colour per weight
    format; quality-failed runs drawn apart (never picked), the Pareto front joined by a line."""
    ok = _ok(df)
    if ok.empty or "tpot_p99_ms" not in ok:
        return _empty("Text generation: tokens/s vs p99 TPOT")
    ok = ok[ok["tpot_p99_ms"].notna() & ok["output_tokens_per_s"].notna()]
    bad = guard_failed(ok)
    good = ok[~bad]
    fig = go.Figure()
    words = dict(WEIGHT_FORMAT_WORDS)
    for fmt, part in good.groupby("weight_format", sort=True):
        fig.add_trace(go.Scatter(x=part["tpot_p99_ms"], y=part["output_tokens_per_s"], mode="markers",
                                 name=words.get(str(fmt), str(fmt)),
                                 text=[run_name(r) for _, r in part.iterrows()], hoverinfo="text+x+y"))
    if not good.empty:
        axes = good.assign(latency_ms_p99=good["tpot_p99_ms"], throughput=good["output_tokens_per_s"])
        front = good[pareto_mask(axes, with_accuracy=False).to_numpy()].sort_values("tpot_p99_ms")
        fig.add_trace(go.Scatter(x=front["tpot_p99_ms"], y=front["output_tokens_per_s"], mode="lines",
                                 name="Pareto front", line={"dash": "dot", "color": "grey"}))
    if bad.any():
        fig.add_trace(guard_failed_trace(ok[bad], x="tpot_p99_ms", y="output_tokens_per_s"))
    fig.update_layout(title="Text generation: output tokens/s vs p99 time per output token",
                      xaxis_title="p99 TPOT (ms)", yaxis_title="output tokens/s", legend_title="Weights")
    return fig


# ---- the dashboard's figures (each tab shows them; built here, with their data) ----

LIVE_PLACEHOLDER = "runs"  # the legend of the live plot before any point is measured


def _measured(df) -> pd.DataFrame:
    if df is None or df.empty:
        return pd.DataFrame()
    return df[(df["status"] == "ok") & df["throughput"].notna() & df["latency_ms_p99"].notna()]


def _live_series(df) -> list:
    """(name, runs) per runtime and precision, named as every plot names them; guard-failed runs apart."""
    ok = _measured(df)
    if ok.empty:
        return []
    ok = ok[~guard_failed(ok)]
    names = ok["backend"].astype(str).map(title) + " " + ok["precision"].astype(str).str.upper()
    return [(n, ok[names == n]) for n in sorted(names.unique())]


def _live_hovers(part) -> list[str]:
    """A point's hover in words: its run, p99 latency and throughput, rounded (no 1.202e+04)."""
    return [f"{run_name(r)}<br>p99 latency {rounded(r['latency_ms_p99'], 'latency')} ms<br>"
            f"{rounded(r['throughput'], 'throughput')} samples/s" for r in part.to_dict("records")]


def live_figure(df=None) -> go.Figure:
    """The Sweep tab's live plot: p99 latency vs throughput, one trace per backend and precision."""
    traces = [go.Scatter(x=list(part["latency_ms_p99"]), y=list(part["throughput"]), mode="markers", name=name,
                         text=_live_hovers(part), hoverinfo="text", marker={"size": 10})
              for name, part in _live_series(df)]
    bad = _measured(df)
    bad = bad[guard_failed(bad)] if not bad.empty else bad
    if not bad.empty:  # as Explore and the report draw them: grey crosses, apart
        traces.append(guard_failed_trace(bad))
    traces = traces or [go.Scatter(x=[], y=[], mode="markers", name=LIVE_PLACEHOLDER, marker={"size": 10})]
    return go.Figure(data=traces, layout=go.Layout(
        title="Measured so far: p99 latency vs throughput", xaxis_title="p99 latency (ms)",
        yaxis_title="throughput (samples/s, closed loop in process)", height=380,
        margin={"t": 50, "b": 40, "l": 60, "r": 20},
        # From zero: a single point must not sit on an axis reaching below it (no negative latency).
        xaxis={"rangemode": "tozero"}, yaxis={"rangemode": "tozero"}))


def layer_diff_bars(diff, name_a: str, name_b: str, top: int = 12) -> go.Figure:
    """The Compare tab's grouped bars: time per layer type in each of two runs (a LayerDiff)."""
    t = diff.by_type.head(top)
    unit = "ms per sample" if diff.per_sample else "ms per inference"
    traces = [go.Bar(x=list(t["type"]), y=list(t[col]), name=name, text=[executed_words(p) for p in t[prec]],
                     hovertemplate="%{x}: %{y:.4f} " + unit + ", executed in %{text}<extra>" + name + "</extra>")
              for col, prec, name in (("time_a_ms", "precisions_a", name_a), ("time_b_ms", "precisions_b", name_b))]
    return go.Figure(data=traces, layout=go.Layout(
        title="Time per layer type in each run", barmode="group", xaxis_title="layer type",
        yaxis_title=f"time ({unit})", legend_title="run", height=420,
        margin={"t": 50, "b": 80, "l": 60, "r": 20}))


def layer_type_stack(profile, top: int) -> go.Figure:
    """The Layers tab's horizontal bars of the slowest layer types of a LayerProfile, one colour per
    set of precisions they executed in."""
    t = profile.by_type()
    t = t.assign(share_pct=t["share"] * 100).head(top).iloc[::-1]
    traces = []
    for prec in sorted(t["precisions"].unique()):
        part = t[t["precisions"] == prec]
        traces.append(go.Bar(y=list(part["type"]), x=list(part["time_ms"]), orientation="h", name=executed_words(prec),
                             customdata=list(zip(part["layers"], part["share_pct"])),
                             hovertemplate="%{y}: %{x:.4f} ms in %{customdata[0]} layers "
                                           "(%{customdata[1]:.1f}%)<extra></extra>"))
    return go.Figure(data=traces, layout=go.Layout(
        title=f"Time per layer type (top {min(top, len(t))})", xaxis_title="time per inference (ms)",
        yaxis_title="layer type", legend_title="executed in", barmode="stack",
        yaxis={"categoryorder": "total ascending"}, height=max(300, 30 * len(t) + 140),
        margin={"t": 50, "b": 40, "l": 170, "r": 20}))


# The Capacity tab's rate plot: its traces, always all of them (empty ones stay out of the legend):
# one figure layout whatever the search found.
RATE_TRACES = (
    ("kept p99 within the limit", {"mode": "markers", "marker": {"size": 11, "color": "#2ca02c"},
                                   "hovertemplate": "%{x:,.4g} requests/s<br>p99 %{y:.3g} ms<extra></extra>"}),
    ("p99 over the limit", {"mode": "markers", "marker": {"size": 11, "color": "#d62728"},
                            "hovertemplate": "%{x:,.4g} requests/s<br>p99 %{y:.3g} ms<extra></extra>"}),
    ("fell behind (queue kept growing)", {"mode": "markers",
                                          "marker": {"size": 12, "color": "#d62728", "symbol": "x"},
                                          "hovertemplate": "%{x:,.4g} requests/s: requests queued up<extra></extra>"}),
    ("highest rate within", {"mode": "markers", "hoverinfo": "skip",
                             "marker": {"size": 20, "symbol": "star", "color": "#ffbf00",
                                        "line": {"width": 1, "color": "black"}}}),
    ("p99 limit", {"mode": "lines", "hoverinfo": "skip", "line": {"dash": "dash", "color": "black", "width": 1.5}}),
)


def rate_points(probes: list[dict], p99_ms: float | None, best_rate: float | None = None):
    """(x, y) of every trace in RATE_TRACES, and whether the p99 axis needs a log scale."""
    measured = [p for p in probes if p.get("p99") is not None and p["p99"] == p["p99"]]
    top = max([p["p99"] for p in measured] + [p99_ms or 0]) * 1.25 or 1.0
    within = [p for p in measured if p99_ms is not None and within_p99(p["p99"], p99_ms, p.get("saturated"))]
    over = [p for p in measured if p not in within]
    behind = [p for p in probes if p not in measured]
    best = [p for p in within if p["rate"] == best_rate]
    rates = [p["rate"] for p in probes] or [1.0]
    points = [([p["rate"] for p in pts], [p["p99"] for p in pts]) for pts in (within, over)]
    points.append(([p["rate"] for p in behind], [top] * len(behind)))
    points.append(([best_rate], [best[0]["p99"]]) if best else ([], []))
    points.append(([0, max(rates) * 1.05], [p99_ms, p99_ms]) if p99_ms is not None else ([], []))
    # A loose limit far above the measured p99s would flatten them onto the axis: a log scale shows both.
    low = min([p["p99"] for p in measured if p["p99"] > 0] + [p99_ms or top])
    return points, top / low > 30


def rate_figure(probes: list[dict], p99_ms: float | None, best_rate: float | None = None) -> go.Figure:
    """p99 latency against arrival rate of the probed rates, with the limit as a dashed line."""
    points, log = rate_points(probes, p99_ms, best_rate)
    traces = [go.Scatter(x=x, y=y, name=name, showlegend=bool(x), **style)
              for (name, style), (x, y) in zip(RATE_TRACES, points)]
    p99_axis = {"type": "log" if log else "linear", "rangemode": "tozero",
                "title": {"text": "p99 latency (ms)" + (", log scale" if log else "")}}
    return go.Figure(data=traces, layout=go.Layout(
        title="Rates tried: p99 latency vs arrival rate", xaxis_title="arrival rate (requests/s)", height=360,
        margin={"t": 50, "b": 40, "l": 60, "r": 20}, xaxis={"rangemode": "tozero"}, yaxis=p99_axis))
