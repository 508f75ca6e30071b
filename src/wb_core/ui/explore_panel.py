"""Explore tab: limits on p99 latency, accuracy drop and memory; the Pareto plot with the
recommended run highlighted; "Look at a run" (the Pareto-front runs listed first) shows a run in
words; the study's other plots.

A slider at its right end means "no limit". The recommendation is what the Export tab writes,
unless the user picks the run looked at with "Export this run" (looking alone only shows it).
Nothing is read or drawn until the tab is first opened (`shown()`), so the page starts fast.
Plots are drawn whole in `PlotArea`s (plotly's own renderer in the page, which sends no clicks
back; hovering a point still names its run).
"""

from __future__ import annotations

import html
import math
import re

import ipywidgets as w

from wb_core.ui.state import DashboardState, Pick, guard_failed
from wb_core.ui.widgets import CSS, MessageArea, PlotArea, button, caption, guarded, key_values, said, section, with_help
from wb_core.ui.words import label, rounded, run_name

OBJECTIVES = (("highest throughput", "throughput"), ("lowest p99 latency", "latency"),
              ("highest throughput per core", "throughput_per_core"))
OBJECTIVE_VALUES = tuple(v for _, v in OBJECTIVES)
DETAIL_SKIP = ("study", "latency_samples_ms", "stderr_tail", "ov_properties", "key")
# The short table of the run looked at: what a user compares runs by.
SUMMARY = ("throughput", "latency_ms_p50", "latency_ms_p99", "cpu_util", "rss_mb", "accuracy", "executed_precision",
           "accuracy_guard_note", "quant_recipe_reason")
NOT_LOOKING = "(pick a run)"
CHOSEN_REASON = "Chosen by the user with “Export this run” in the dashboard's Explore tab."
PARETO_CAPTION = ("Each dot is one run. Further left answers faster (p99 latency: 99 of 100 requests finish "
                  "within it; log scale), higher does more work per second. The black line joins the runs no "
                  "other run beats on both; the gold star is the recommendation and the dashed red line your "
                  "p99 limit. Hover over a dot to see which run it is; pick a run under “Look at a run” "
                  "to see it in words.")


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


def highlight(fig, run: dict | None, p99_limit: float | None):
    """The Pareto figure with a star on the recommended run and a dashed line at the p99 limit.

    The x axis is logarithmic: plotly's `add_vline` annotation would take the limit as a log10
    value (a 7 ms limit stretched the axis to 10^7 ms). The limit is drawn as a line trace in
    data units instead, and the axis range is set from the data and the limit.
    """
    import plotly.graph_objects as go

    xs = [x for t in fig.data for x in (t.x if t.x is not None else ())]
    ys = [y for t in fig.data for y in (t.y if t.y is not None else ())]
    if run is not None:
        fig.add_trace(go.Scatter(x=[run["latency_ms_p99"]], y=[run["throughput"]], mode="markers",
                                 name="recommended", hoverinfo="skip",
                                 marker={"symbol": "star", "size": 22, "color": "gold",
                                         "line": {"color": "black", "width": 1.5}}))
    if p99_limit is not None and ys:
        fig.add_trace(go.Scatter(x=[p99_limit, p99_limit], y=[min(ys), max(ys)], mode="lines",
                                 name=f"p99 limit ({rounded(p99_limit, 'latency_ms_p99')} ms)", hoverinfo="skip",
                                 line={"dash": "dash", "color": "#d62728", "width": 2}))
        xs.append(p99_limit)
    from wb_core.api import plots

    plots.log_axis(fig, xs, "ms")  # full tick labels with units: 0.2 ms, never a bare 2
    return fig


def run_summary_html(run: dict) -> str:
    """A run in a few rows of words: its name, throughput, latency, CPU, memory, accuracy."""
    rows = [("Run", run_name(run))]
    for col in SUMMARY:
        v = run.get(col)
        if _shown(v):
            rows.append((label(col), rounded(v, col)))
    return key_values(rows)


def run_details_html(run: dict) -> str:
    """Every recorded setting and measurement of a run, worded and rounded (no raw dump)."""
    rows = [(label(k), _worded(v, k)) for k, v in run.items()
            if k not in DETAIL_SKIP and not k.startswith("_") and _shown(v)]
    return key_values(rows)


def _worded(v, column: str) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_worded(x, str(k))}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(_worded(x, column) for x in v)
    if hasattr(v, "item") and not isinstance(v, str):  # numpy scalars
        v = v.item()
    return rounded(v, column)


def _shown(v) -> bool:
    if v is None or (isinstance(v, str) and not v):
        return False
    if isinstance(v, float) and math.isnan(v):
        return False
    return not (isinstance(v, (list, dict)) and len(v) > 20)


def _without_keys(text: str) -> str:
    """A message with run keys (hex ids) taken out: the run's name already says which."""
    return re.sub(r"\s*\(key [0-9a-f]{6,}\)", "", text)


class ExplorePanel(w.VBox):
    """Recommends a run of DashboardState.study under the user's limits; sets DashboardState.selected_key
    (the recommendation, or the run looked at, chosen with "Export this run")."""

    def __init__(self, session: DashboardState):
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
        self.pareto_plot = PlotArea()
        self.pareto_plot.add_class("wb-pareto-plot")
        self.pareto_caption = caption(PARETO_CAPTION)
        self.look = w.Dropdown(options=[(NOT_LOOKING, "")], value="", description="Look at a run",
                               style={"description_width": "170px"}, layout=w.Layout(width="820px"))
        self.look.add_class("wb-look")
        self.look.observe(guarded(self.messages)(self._on_look), "value")
        self.look_box = with_help(self.look, "Every successful run, the ones on the Pareto front (no other run is "
                                             "both faster and does more per second) first.")
        self.details = w.HTML("<i>Pick a run above to see it here.</i>")
        self.details.add_class("wb-run-details")
        self.full_details = w.HTML()
        self.full_details.add_class("wb-run-full")
        self.details_toggle = w.Accordion(children=[self.full_details], titles=("details: every setting and "
                                                                               "measurement of this run",))
        self.details_toggle.selected_index = None
        self.details_toggle.layout.display = "none"
        self.export_this = button("Export this run", "primary", "share",
                                  tooltip="Make this run the one the Export tab writes.")
        self.export_this.layout.display = "none"
        self.export_this.on_click(guarded(self.messages)(self._on_export_this))
        self.chosen_text = w.HTML()
        self.other_plots = w.Tab()
        # Drawn when opened: plotly takes a moment to draw each figure.
        self.more = w.Accordion(children=[w.VBox([self.other_plots])], titles=("More plots: batch size, threads, "
                                                                              "cores, accuracy",))
        self.more.selected_index = None
        self.more.observe(guarded(self.messages)(self._on_more), "selected_index")
        self._others_drawn = False
        self.other_caption = caption("The best run for each value of one setting (batch size, threads, cores), "
                                     "one line per runtime and precision: where a line flattens, more of that "
                                     "setting stops paying.")
        self._df = None
        self._hardware = None
        self._looked: dict | None = None
        self._user_key = ""  # a run the user chose with "Export this run" (kept until the limits change)
        self._fitted_study = None  # the study the sliders were fitted to: its limits are kept as it grows
        self._why = "Explore's limits changed."  # why the next recommendation may differ (said in the note)
        self._shown = False
        self._stale = True
        for s in (self.p99, self.memory, self.accuracy, self.objective):
            s.observe(guarded(self.messages)(self._on_limits_changed), "value")
        session.observe(guarded(self.messages)(self._on_results), "results_version")
        session.observe(guarded(self.messages)(self._on_study), "study")
        super().__init__([w.HTML(CSS), section("Explore"), w.HTML(
            "Drag a limit to the left to tighten it; at the right end it is off."),
            with_help(self.objective, "What “best” means: the most samples per second, the fastest answer, "
                                      "or the most work per CPU core."),
            with_help(self.p99, "The slowest 1 in 100 requests must finish within this many milliseconds."),
            with_help(self.memory, "The most memory the run may use at its peak."),
            with_help(self.accuracy, "How much accuracy a lower precision (INT8, BF16) may lose against FP32, "
                                     "as a fraction (0.01 = one point in a hundred)."),
            self.limits_text, self.messages,
            section("Recommendation"), self.recommendation, self.pareto_plot, self.pareto_caption,
            section("Look at a run"), self.look_box, self.details, self.details_toggle,
            w.HBox([self.export_this]), self.chosen_text,
            section("More plots"), self.more, self.other_caption])
        self.add_class("wb-explore-panel")
        self._updating = False

    def shown(self) -> None:
        """The tab is on screen: read and draw what changed since (the first time: everything)."""
        self._shown = True
        if self._stale:
            guarded(self.messages)(self._on_results)()

    # ---- data ----
    def _on_study(self, *_):
        """Another study: nothing of the old one stays (the run looked at, its button, its words)."""
        self._user_key = ""
        self._fitted_study = None
        self.forget_look()
        self._on_results()

    def forget_look(self) -> None:
        self._looked = None
        self.look.options = [(NOT_LOOKING, "")]
        self.look.value = ""
        self.details.value = "<i>Pick a run above to see it here.</i>"
        self.full_details.value = ""
        self.details_toggle.layout.display = "none"
        self.export_this.layout.display = "none"
        self.export_this.disabled = True
        self.chosen_text.value = ""

    def _on_results(self, *_):
        if not self._shown:
            self._stale = True
            return
        self._stale = False
        from wb_core.faces import successful, with_efficiency

        df = self.session.results()
        self.messages.clear()
        if df.empty:
            self._df = None
            self.recommendation.value = "<i>No results yet: run a sweep, or open a previous study in the Sweep tab.</i>"
            self.pareto_plot.clear()
            self._fill_look()
            self.other_plots.children = []
            self._others_drawn = False
            return
        rec = self.session.study_record() or {}
        self._hardware = rec.get("hardware")
        self._df = with_efficiency(df, self._hardware)
        ok = successful(self._df)
        # The same study grown (new runs): the user's limits stay; another study: the limits kept
        # with it come back (open when it kept none).
        keep = self.constraints() if self._fitted_study == self.session.study else self.saved_limits()
        self._updating = True  # set ranges without recomputing for each slider change
        try:
            self._fit(self.p99, ok.get("latency_ms_p99"), keep=keep and keep.max_p99_ms)
            self._fit(self.memory, ok.get("rss_mb"), keep=keep and keep.max_memory_mb)
            drops = ok["accuracy_drop"].dropna() if "accuracy_drop" in ok.columns else []
            self._fit(self.accuracy, drops if len(drops) else None, floor_max=0.01,
                      keep=keep and keep.max_accuracy_drop)
        finally:
            self._updating = False
        self._fitted_study = self.session.study
        self._why = "new runs were measured."
        chosen = self.session.pick  # a run chosen elsewhere (the tune's answer) stays chosen here
        if chosen.chosen and chosen.study == self.session.study and chosen.key in set(self._df["key"].astype(str)):
            self._user_key = chosen.key
        if self._user_key and self._user_key not in set(self._df["key"]):
            self._user_key = ""
        self._fill_look()
        self._others_drawn = False
        if self.more.selected_index is not None:
            self._draw_other_plots()
        self._on_limits()

    def _fit(self, slider: w.FloatSlider, values, floor_max: float | None = None, keep: float | None = None) -> None:
        """Range the slider over `values`; `keep` is a limit the user set, kept (the range grows to hold it)."""
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
        if keep is not None:
            lo, hi = min(lo, keep), max(hi, keep * 1.05)
        slider.disabled = False
        # Order matters: a new max below the old min would be refused.
        slider.max = max(hi, slider.min)
        slider.min = lo
        slider.max = hi
        slider.step = (hi - lo) / 200
        slider.value = hi if keep is None else keep

    def saved_limits(self):
        """The limits and objective kept with the open study (None when it kept none); sets the objective."""
        from wb_core.api import Constraints

        saved = self.session.saved_settings().get("explore")
        if not saved:
            return None
        if saved.get("objective") in OBJECTIVE_VALUES:
            updating, self._updating = self._updating, True  # not a change of the user's: nothing recomputed yet
            try:
                self.objective.value = saved["objective"]
            finally:
                self._updating = updating
        return Constraints(max_p99_ms=saved.get("max_p99_ms"), max_memory_mb=saved.get("max_memory_mb"),
                           max_accuracy_drop=saved.get("max_accuracy_drop"))

    def save_limits(self) -> None:
        """Keep the limits and objective with the open study: reopening it brings them back."""
        cons = self.constraints()
        self.session.save_settings({"explore": {"max_p99_ms": cons.max_p99_ms, "max_memory_mb": cons.max_memory_mb,
                                                "max_accuracy_drop": cons.max_accuracy_drop,
                                                "objective": self.objective.value}})

    def constraints(self):
        """The limits the sliders set (a slider at its right end sets none)."""
        from wb_core.api import Constraints

        def limit(s):
            return None if s.disabled or s.value >= s.max - s.step / 2 else float(s.value)

        return Constraints(max_p99_ms=limit(self.p99), max_memory_mb=limit(self.memory),
                           max_accuracy_drop=limit(self.accuracy))

    # ---- recommendation ----
    def _on_limits_changed(self, *_):
        if self._updating:
            return
        self._user_key = ""  # new limits: the recommendation under them is what Export writes again
        self._why = "Explore's limits or objective changed."
        self._on_limits()
        self.save_limits()

    def _on_limits(self, *_):
        if self._updating or self._df is None:
            return
        from wb_core.api import NoRunMeetsConstraints, WorkbenchError, precision_losses
        from wb_core.faces import worded

        cons = self.constraints()
        self.limits_text.value = f"Limits: {html.escape(cons.describe())}"
        try:
            pick = self.session.recommend(cons, self.objective.value)
        except NoRunMeetsConstraints as e:
            self.recommendation.value = (f"<div class='wb-msg wb-msg-error wb-no-run'><b>No run meets these limits.</b> "
                                         f"{html.escape(worded(_without_keys(str(e)), self._df))}</div>")
            self._draw_pareto(None, cons)
            return
        except WorkbenchError as e:
            self.recommendation.value = f"<div class='wb-msg wb-msg-error'>{html.escape(worded(str(e), self._df))}</div>"
            self._draw_pareto(None, cons)
            return
        best = self._df[self._df["key"].astype(str) == pick.key].iloc[0].to_dict()
        if not self._user_key:
            self.session.set_pick(pick, self._why)
        shown = self.session.pick
        changed = (f"<div class='wb-msg wb-msg-info wb-pick-changed'>{html.escape(shown.note)}</div>"
                   if shown.note and not self._user_key else "")
        left_out = (f"<div class='wb-msg wb-msg-info wb-left-out'>{html.escape(pick.left_out)}</div>"
                    if pick.left_out else "")
        self.recommendation.value = (
            f"<div class='wb-msg wb-msg-ok'>Recommended: <b class='wb-best' data-key='{html.escape(pick.key)}'>"
            f"{html.escape(pick.name)}</b><br>{html.escape(pick.reason)}</div>" + changed + left_out
            + ("Next best:<ul>" + "".join(f"<li>{html.escape(r)}</li>" for r in pick.runners_up) + "</ul>"
               if pick.runners_up else "")
            + "".join(f"<div class='wb-msg wb-msg-info wb-precision-loss'>{html.escape(worded(said(n), None))}</div>"
                      for n in precision_losses(self.session.study, self.session.db)))
        self._draw_pareto(best, cons)

    # ---- plots ----
    def _draw_pareto(self, best: dict | None, cons) -> None:
        from wb_core.api import plots

        fig = plots.latency_throughput(self._df)
        highlight(fig, best, cons.max_p99_ms)
        fig.update_layout(height=420, margin={"t": 60, "b": 40, "l": 60, "r": 20})
        self.pareto_plot.show(fig)

    def look_options(self) -> list[tuple[str, str]]:
        """(name, key) of every successful run: the Pareto front first (fastest first), then the rest by name."""
        from wb_core.faces import pareto_mask, successful

        ok = successful(self._df) if self._df is not None else None
        if ok is None or ok.empty:
            return []
        failed = guard_failed(ok)
        bad, ok = ok[failed], ok[~failed]
        on_front = pareto_mask(ok) if not ok.empty else ok.index == ok.index
        front = ok[on_front].sort_values("latency_ms_p99")
        rest = ok[~on_front]
        named = [(f"{run_name(r)} (Pareto front)", str(r["key"])) for _, r in front.iterrows()]
        failed_named = sorted((f"{run_name(r)} (accuracy failed)", str(r["key"])) for _, r in bad.iterrows())
        return (named + sorted(((run_name(r), str(r["key"])) for _, r in rest.iterrows()), key=lambda o: o[0])
                + failed_named)

    def _fill_look(self) -> None:
        keep = self.look.value
        options = [(NOT_LOOKING, ""), *self.look_options()]
        self.look.options = options
        self.look.value = keep if keep in {k for _, k in options} else ""

    def _on_look(self, change) -> None:
        key = change["new"]
        if not key or self._df is None:
            self._looked = None
            self.export_this.layout.display = "none"
            self.chosen_text.value = ""
            return
        rows = self._df[self._df["key"].astype(str) == key]
        if not rows.empty:
            self.show_run(rows.iloc[0].to_dict())

    def show_run(self, run: dict) -> None:
        """Show a run in words (its full record behind "details"); Export is not changed by this."""
        self._looked = run
        self.details.value = run_summary_html(run)
        self.full_details.value = run_details_html(run)
        self.details_toggle.layout.display = ""
        self.export_this.layout.display = ""
        why = self.session.unfit(Pick(key=str(run["key"]), name=run_name(run), study=self.session.study))
        if why:  # never exported: the button stays off and says why
            self.export_this.disabled = True
            failed = run.get("accuracy_guard") == "failed"
            self.chosen_text.value = (f"<div class='wb-msg wb-msg-error wb-not-exportable"
                                      f"{' wb-accuracy-failed' if failed else ''}'>"
                                      f"{'Accuracy failed: ' if failed else ''}{html.escape(why)}</div>")
            return
        self.export_this.disabled = str(run["key"]) == self.session.current_pick().key
        self.chosen_text.value = ("<i>This run is the one the Export tab writes.</i>" if self.export_this.disabled
                                  else "<i>Export writes the recommended run; press “Export this run” to write "
                                       "this one instead.</i>")

    def _on_export_this(self, *_):
        """The run looked at becomes the one Export writes (until the limits change)."""
        if self._looked is None:
            return
        key = str(self._looked["key"])
        run = self.session.run_of(key)  # read again from the open study: never a run of the study before
        pick = Pick(key=key, name=run_name(run or self._looked), study=self.session.study, reason=CHOSEN_REASON,
                    constraints=self.constraints(), objective=self.objective.value, chosen=True)
        why = self.session.unfit(pick)
        if why:
            self.export_this.disabled = True
            self.chosen_text.value = f"<div class='wb-msg wb-msg-error wb-not-exportable'>{html.escape(why)}</div>"
            return
        self._user_key = key
        self.session.set_pick(pick, "you chose it with “Export this run”.")
        self.export_this.disabled = True
        self.chosen_text.value = (f"<div class='wb-msg wb-msg-ok wb-chosen'>The Export tab now writes "
                                  f"{html.escape(run_name(self._looked))}.</div>")

    def _on_more(self, *_):
        if self.more.selected_index is not None and not self._others_drawn and self._df is not None:
            self._draw_other_plots()

    def _draw_other_plots(self) -> None:
        from wb_core.api import plots

        figs = plots.study_figures(self._df)
        figs.pop("latency_throughput", None)
        titles = {"batch": "Batch size", "threads": "Threads", "cores": "Cores", "accuracy": "Accuracy"}
        self.other_plots.children = [PlotArea(f) for f in figs.values()]
        self.other_plots.titles = tuple(titles.get(k, k.replace("_", " ").capitalize()) for k in figs)
        self._others_drawn = True
