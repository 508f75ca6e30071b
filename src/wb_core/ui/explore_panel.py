"""Explore tab: limits on p99 latency, accuracy drop and memory; the Pareto plot with the
recommended run highlighted; click a point to see its full configuration; the study's other plots.

A slider at its right end means "no limit". Every figure is built with its data and swapped in
whole (a FigureWidget changed before the browser has drawn it stays empty).
"""

from __future__ import annotations

import html
import math

import ipywidgets as w

from wb_core.ui.state import DashboardState
from wb_core.ui.widgets import CSS, MessageArea, guarded, key_values, section

OBJECTIVES = (("highest throughput", "throughput"), ("lowest p99 latency", "latency"),
              ("highest throughput per core", "throughput_per_core"))
DETAIL_SKIP = ("study", "latency_samples_ms", "stderr_tail", "ov_properties")


def limit_slider(description: str, unit: str) -> w.FloatSlider:
    return w.FloatSlider(value=1, min=0, max=1, step=0.01, description=description, readout_format=".3g",
                         continuous_update=False, style={"description_width": "170px"},
                         layout=w.Layout(width="560px"), tooltip=f"Right end = no limit ({unit}).")


def _span(values, pad: float = 1.05) -> tuple[float, float]:
    """Slider range covering `values`: from a bit under the smallest to a bit over the largest."""
    lo, hi = float(min(values)), float(max(values))
    lo = max(0.0, lo * 0.9)
    hi = hi * pad if hi > 0 else 1.0
    if hi <= lo:
        hi = lo + 1.0
    return lo, hi


def highlight(fig, run: dict, p99_limit: float | None):
    """The Pareto figure with a star on the recommended run and a dashed line at the p99 limit."""
    import plotly.graph_objects as go

    fig.add_trace(go.Scatter(x=[run["latency_ms_p99"]], y=[run["throughput"]], mode="markers",
                             name="recommended", hoverinfo="skip",
                             marker={"symbol": "star", "size": 22, "color": "gold",
                                     "line": {"color": "black", "width": 1.5}}))
    if p99_limit is not None:
        fig.add_vline(x=p99_limit, line_dash="dash", line_color="#d62728",
                      annotation_text=f"p99 ≤ {p99_limit:.3g} ms", annotation_position="top left")
    return fig


def run_details_html(run: dict) -> str:
    rows = [(k, v) for k, v in run.items() if k not in DETAIL_SKIP and not k.startswith("_") and _shown(v)]
    return key_values(rows)


def _shown(v) -> bool:
    if v is None:
        return False
    if isinstance(v, float) and math.isnan(v):
        return False
    return not (isinstance(v, (list, dict)) and len(v) > 20)


class ExplorePanel(w.VBox):
    """Recommends a run of DashboardState.study under the user's limits; sets DashboardState.selected_key."""

    def __init__(self, session: DashboardState):
        from wb_core.api import plots, recommend  # noqa: F401  (fail here, not in a callback, if one is missing)

        self.session = session
        self.messages = MessageArea()
        self.p99 = limit_slider("Max p99 latency (ms)", "ms")
        self.memory = limit_slider("Max memory (MB)", "MB")
        self.accuracy = limit_slider("Max accuracy drop", "fraction")
        self.objective = w.Dropdown(options=OBJECTIVES, value="throughput", description="Objective",
                                    style={"description_width": "170px"}, layout=w.Layout(width="560px"))
        self.limits_text = w.HTML()
        self.recommendation = w.HTML()
        self.recommendation.add_class("wb-recommendation")
        self.pareto_box = w.Box()
        self.details = w.HTML("<i>Click a point of the plot to see its full configuration.</i>")
        self.details.add_class("wb-run-details")
        self.other_plots = w.Tab()
        self._df = None
        self._hardware = None
        for s in (self.p99, self.memory, self.accuracy, self.objective):
            s.observe(guarded(self.messages)(self._on_limits), "value")
        session.observe(guarded(self.messages)(self._on_results), "results_version")
        super().__init__([w.HTML(CSS), section("Explore"), w.HTML(
            "Drag a limit to the left to tighten it; at the right end it is off."),
            self.objective, self.p99, self.memory, self.accuracy, self.limits_text, self.messages,
            section("Recommendation"), self.recommendation, self.pareto_box, section("Selected run"), self.details,
            section("More plots"), self.other_plots])
        self.add_class("wb-explore-panel")
        self._updating = False
        guarded(self.messages)(self._on_results)()

    # ---- data ----
    def _on_results(self, *_):
        from wb_core.api import successful, with_efficiency

        df = self.session.results()
        self.messages.clear()
        if df.empty:
            self._df = None
            self.recommendation.value = "<i>No results yet: run a sweep, or open a previous study in the Sweep tab.</i>"
            self.pareto_box.children = []
            self.other_plots.children = []
            return
        rec = self.session.study_record() or {}
        self._hardware = rec.get("hardware")
        self._df = with_efficiency(df, self._hardware)
        ok = successful(self._df)
        self._updating = True  # set ranges without recomputing for each slider change
        try:
            self._fit(self.p99, ok.get("latency_ms_p99"))
            self._fit(self.memory, ok.get("rss_mb"))
            drops = ok["accuracy_drop"].dropna() if "accuracy_drop" in ok.columns else []
            self._fit(self.accuracy, drops if len(drops) else None, floor_max=0.01)
        finally:
            self._updating = False
        self._draw_other_plots()
        self._on_limits()

    def _fit(self, slider: w.FloatSlider, values, floor_max: float | None = None) -> None:
        vals = [] if values is None else [float(v) for v in values if v == v and v is not None]
        if not vals:
            slider.disabled = True
            slider.min, slider.max, slider.value = 0, 1, 1
            slider.layout.display = "none"  # e.g. accuracy, when the study measured none
            return
        slider.layout.display = ""
        lo, hi = _span(vals)
        if floor_max:  # accuracy drop: from none, at least up to floor_max
            lo, hi = 0.0, max(max(vals) * 1.05, floor_max)
        slider.disabled = False
        # Order matters: a new max below the old min would be refused.
        slider.max = max(hi, slider.min)
        slider.min = lo
        slider.max = hi
        slider.step = (hi - lo) / 200
        slider.value = hi

    def constraints(self):
        """The limits the sliders set (a slider at its right end sets none)."""
        from wb_core.api import Constraints

        def limit(s):
            return None if s.disabled or s.value >= s.max - s.step / 2 else float(s.value)

        return Constraints(max_p99_ms=limit(self.p99), max_memory_mb=limit(self.memory),
                           max_accuracy_drop=limit(self.accuracy))

    # ---- recommendation ----
    def _on_limits(self, *_):
        if self._updating or self._df is None:
            return
        from wb_core.api import NoRunMeetsConstraints, WorkbenchError, recommend

        cons = self.constraints()
        self.limits_text.value = f"Limits: {html.escape(cons.describe())}"
        try:
            rec = recommend(self._df, cons, self.objective.value, hardware=self._hardware)
        except NoRunMeetsConstraints as e:
            self.recommendation.value = (f"<div class='wb-msg wb-msg-error wb-no-run'><b>No run meets these limits.</b> "
                                         f"{html.escape(str(e))}</div>")
            self._draw_pareto(None, cons)
            return
        except WorkbenchError as e:
            self.recommendation.value = f"<div class='wb-msg wb-msg-error'>{html.escape(str(e))}</div>"
            self._draw_pareto(None, cons)
            return
        best = rec.best
        runners = "".join(f"<li>{html.escape(_label(r))}: p99 {r['latency_ms_p99']:.3g} ms, "
                          f"{r['throughput']:,.1f} samples/s</li>" for r in rec.runners_up)
        self.recommendation.value = (
            f"<div class='wb-msg wb-msg-ok'><b class='wb-best'>{html.escape(_label(best))}</b> "
            f"(run <code class='wb-best-key'>{html.escape(str(best['key']))}</code>)<br>{html.escape(rec.reason)}</div>"
            + (f"Next best:<ul>{runners}</ul>" if runners else ""))
        self.session.selected_reason = rec.reason
        self.session.selected_key = str(best["key"])
        self._draw_pareto(best, cons)

    # ---- plots ----
    def _draw_pareto(self, best: dict | None, cons) -> None:
        import plotly.graph_objects as go

        from wb_core.api import plots

        fig = plots.latency_throughput(self._df)
        if best is not None:
            highlight(fig, best, cons.max_p99_ms)
        fig.update_layout(height=420, margin={"t": 60, "b": 40, "l": 60, "r": 20})
        widget = go.FigureWidget(fig)
        for trace in widget.data:
            if trace.name != "recommended":
                trace.on_click(self._on_click)
        self.pareto_box.children = [widget]

    def _on_click(self, trace, points, selector):
        if not points.point_inds:
            return
        try:
            x, y = points.xs[0], points.ys[0]
            self.show_run(self._nearest(x, y))
        except Exception as e:
            self.messages.error(e)

    def _nearest(self, x: float, y: float) -> dict:
        ok = self._df[self._df["status"] == "ok"]
        dist = ((ok["latency_ms_p99"].astype(float) - x).abs() / max(x, 1e-9)
                + (ok["throughput"].astype(float) - y).abs() / max(y, 1e-9))
        return ok.loc[dist.idxmin()].to_dict()

    def show_run(self, run: dict) -> None:
        """Show a run's full configuration and make it the one Export writes."""
        self.details.value = (f"<b>{html.escape(_label(run))}</b> (selected for export)" + run_details_html(run))
        self.session.selected_reason = ""
        self.session.selected_key = str(run["key"])

    def _draw_other_plots(self) -> None:
        import plotly.graph_objects as go

        from wb_core.api import plots

        figs = plots.study_figures(self._df)
        figs.pop("latency_throughput", None)
        titles = {"batch": "Batch size", "threads": "Threads", "cores": "Cores", "accuracy": "Accuracy"}
        self.other_plots.children = [go.FigureWidget(f) for f in figs.values()]
        self.other_plots.titles = tuple(titles.get(k, k) for k in figs)


def _label(run) -> str:
    from wb_core.api import run_label

    return run_label(run)
