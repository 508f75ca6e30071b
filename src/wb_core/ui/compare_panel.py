"""Compare tab: two or more runs side by side, the settings that differ highlighted, and how each
compares with the first (the baseline); or the best run of each of several studies (before and
after, two machines, INT8 and FP32). For two OpenVINO runs, "Compare layers" shows per layer type
where the second run gained or lost time (layer profiles are measured once and kept).
"""

from __future__ import annotations

import html
import threading

import ipywidgets as w

from wb_core.ui.layers_panel import ITERATIONS, run_choices
from wb_core.ui.state import DashboardState
from wb_core.ui.widgets import CSS, MessageArea, PlotArea, button, caption, guarded, section, with_help
from wb_core.ui.words import MODES as MEASUREMENT_MODES
from wb_core.ui.words import results_table, run_name

MODES = (("Runs of the open study", "runs"), ("The best run of each of these studies", "studies"))
OBJECTIVES = (("highest throughput", "throughput"), ("lowest p99 latency", "latency"),
              ("highest throughput per core", "throughput_per_core"))
METRICS_SHOWN = ("throughput", "throughput_x", "latency_ms_p50", "latency_ms_p99", "p99_x", "cpu_util", "rss_mb",
                 "accuracy", "executed_precision")
LAYER_COLUMNS = ["type", "layers_a", "layers_b", "time_a_ms", "time_b_ms", "speedup", "precisions_a",
                 "precisions_b"]


def _present(v) -> bool:
    try:
        return v is not None and v == v and v != ""
    except (TypeError, ValueError):
        return True


def shown_columns(frame, differing: set[str]) -> list[str]:
    """The run name, the settings that have a value in some run (or differ), then the metrics."""
    settings = [c for c in frame.attrs.get("settings", ()) if c in differing
                or (c not in ("study", "model", "cpu") and frame[c].map(_present).any())]
    metrics = [c for c in METRICS_SHOWN if frame[c].map(_present).any()]
    return ["run", *settings, *metrics]


def side_names(frame) -> tuple[str, str]:
    """How the layer comparison calls the first two runs: by precision when that differs, else by place."""
    a, b = (str(frame["precision"].iloc[i] or "fp32").upper() for i in (0, 1))
    if a != b:
        return f"the {a} run", f"the {b} run"
    return "the first run", "the second run"


class ComparePanel(w.VBox):
    """Compares runs of DashboardState.study, or the best runs of several studies of its database."""

    def __init__(self, session: DashboardState):

        self.session = session
        self.messages = MessageArea()
        style = {"description_width": "150px"}
        self.mode = w.RadioButtons(options=MODES, value="runs", description="Compare", style=style)
        self.runs_box = with_help(w.SelectMultiple(options=[], description="Runs", rows=6, style=style,
                                                   layout=w.Layout(width="620px")),
                                  "Pick two or more (hold Ctrl or ⌘ to pick several).")
        self.runs = self.runs_box.control
        self.baseline_box = with_help(w.Dropdown(options=[], description="First (baseline)", style=style,
                                                 layout=w.Layout(width="620px")),
                                      "The run the others are measured against: '2× the throughput' means twice "
                                      "this run's.")
        self.baseline = self.baseline_box.control
        self.studies_box = with_help(w.SelectMultiple(options=[], description="Studies", rows=5, style=style,
                                                      layout=w.Layout(width="620px")),
                                     "Pick two or more; the first in the list is the baseline. Each study's best "
                                     "run is chosen as the Explore tab would, without limits.")
        self.studies = self.studies_box.control
        self.objective = w.Dropdown(options=OBJECTIVES, value="throughput", description="Best means", style=style,
                                    layout=w.Layout(width="620px"))
        self.compare_button = button("Compare", "primary", "columns", "Show the chosen runs side by side")
        self.compare_button.add_class("wb-compare-button")
        self.table = w.HTML()
        self.table.add_class("wb-compare-table")
        self.ratios = w.HTML()
        self.ratios.add_class("wb-compare-ratios")
        self.layers_button = button("Compare layers", "", "search",
                                    "Profile the layers of the first two runs (or reuse their profiles) and compare")
        self.layers_button.layout.display = "none"
        self.layers_status = w.HTML()
        self.layers_result = w.VBox()
        self.layers_result.add_class("wb-compare-layers")
        self._frame = None  # the last comparison (compare_runs' frame)
        self._choices: list[tuple[str, str]] = []
        self._suggested = ""  # Explore's pick, put in the run list when nothing was picked here
        self._thread: threading.Thread | None = None
        on = guarded(self.messages)
        self.mode.observe(on(self._on_mode), "value")
        self.runs.observe(on(self._on_pick), "value")
        self.compare_button.on_click(on(self._on_compare))
        self.layers_button.on_click(on(self._on_layers))
        session.observe(on(self._on_study), "study")
        session.observe(on(self._on_study), "results_version")
        super().__init__([w.HTML(CSS), section("Compare"), w.HTML(
            "Runs side by side: the settings that differ are highlighted, and each run is measured against the "
            "first."), self.mode, self.runs_box, self.baseline_box, self.studies_box, self.objective,
            self.compare_button, self.messages, self.table, self.ratios, self.layers_button, self.layers_status,
            self.layers_result])
        self.add_class("wb-compare-panel")
        on(self._on_study)()
        on(self._on_mode)()

    # ---- choosing ----
    def _on_study(self, *_):
        keep = self.runs.value
        self._choices = run_choices(self.session.results())
        self.runs.options = self._choices
        self.runs.value = tuple(k for k in keep if k in {k for _, k in self._choices})
        keep_studies = self.studies.value
        names = [s["name"] for s in self.session.studies() if s.get("ok")]
        self.studies.options = names
        self.studies.value = tuple(s for s in keep_studies if s in names)
        self._on_pick()

    def shown(self) -> None:
        """The tab is on screen: with no run picked here yet, Explore's pick is put in the run list."""
        guarded(self.messages)(self._on_pick_changed)()

    def _on_pick_changed(self, *_):
        """With no run picked here yet, Explore's pick is the first run to compare against."""
        key = self.session.current_pick().key
        if not self.runs.value and key in {k for _, k in self._choices}:
            self._suggested = key
            self.runs.value = (key,)

    def _on_mode(self, *_):
        runs = self.mode.value == "runs"
        for box in (self.runs_box, self.baseline_box):
            box.layout.display = "" if runs else "none"
        for box in (self.studies_box, self.objective):
            box.layout.display = "none" if runs else ""

    def _on_pick(self, *_):
        names = dict((k, n) for n, k in self._choices)
        picked = [(names.get(k, k), k) for k in self.runs.value]
        keep = self.baseline.value
        self.baseline.options = picked
        if picked:
            # The suggested run (Explore's pick) is not kept as the baseline once the user picks runs:
            # the first run picked is, as without a suggestion.
            chosen = keep in self.runs.value and not (keep == self._suggested and len(picked) > 1)
            self.baseline.value = keep if chosen else picked[0][1]

    def chosen_keys(self) -> list[str]:
        """The picked runs, the baseline first."""
        keys = list(self.runs.value)
        if self.baseline.value in keys:
            keys.remove(self.baseline.value)
            keys.insert(0, self.baseline.value)
        return keys

    # ---- comparing ----
    def _on_compare(self, *_):
        from wb_core.api import ConfigError, compare_runs
        from wb_core.faces import best_runs

        self.messages.clear()
        self.layers_result.children = []
        self.layers_status.value = ""
        if self.mode.value == "runs":
            keys = self.chosen_keys()
            if len(keys) < 2:
                raise ConfigError("Pick at least two runs to compare.")
            frame, differing = compare_runs(self.session.results(), keys)
        else:
            if len(self.studies.value) < 2:
                raise ConfigError("Pick at least two studies to compare.")
            frame, differing = compare_runs(best_runs(self.session.db, list(self.studies.value),
                                                      self.objective.value))
        self.show(frame, differing)

    def show(self, frame, differing: set[str]) -> None:
        from wb_core.faces import layer_profiling_backends, ratio_sentences

        frame = frame.assign(run=[f"Run {i + 1}" for i in range(len(frame))])
        self._frame = frame
        cols = shown_columns(frame, differing)
        words = ", ".join(html.escape(_label(c)) for c in frame.attrs.get("settings", ()) if c in differing)
        names = "".join(f"<li><b>Run {i + 1}</b>: {html.escape(run_name(r))}"
                        f"{html.escape(f' (best of study {r.study})') if 'study' in differing else ''}"
                        f"{' (the baseline)' if i == 0 else ''}</li>" for i, (_, r) in enumerate(frame.iterrows()))
        from wb_core.faces import backend_title, executed_words

        shown = frame.copy()  # runtimes and precisions by their names, not the store's codes
        if "backend" in shown.columns:
            shown["backend"] = shown["backend"].astype(str).map(backend_title)
        for c in ("precision", "executed_precision"):
            if c in shown.columns:
                shown[c] = shown[c].map(lambda v: executed_words(v) if isinstance(v, str) else v)
        if "cores" in shown.columns:
            shown["cores"] = shown["cores"].map(lambda v: "not pinned" if str(v) in ("none", "None", "") else v)
        self.table.value = (f"<ul class='wb-compare-names'>{names}</ul>"
                            "<div style='overflow-x:auto'>" + results_table(shown, cols, highlight=differing) + "</div>"
                            + ("<div class='wb-caption'>Highlighted: the settings that differ "
                               f"({words}).</div>" if differing else
                               "<div class='wb-caption'>These runs have the same settings.</div>"))
        names = [f"Run {i + 1}" for i in range(len(frame))]
        lines = ratio_sentences(frame, names)
        self.ratios.value = ("<ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in lines) + "</ul>"
                             + f"<div class='wb-caption wb-modes'>Throughput and latency here were measured "
                               f"{html.escape(MEASUREMENT_MODES['closed'])}, each run with its own batch, threads and requests "
                               "in flight.</div>")
        both_ov = all(str(b) in layer_profiling_backends() for b in frame["backend"].iloc[:2])
        self.layers_button.layout.display = "" if both_ov else "none"
        self.layers_button.description = "Compare layers" + (" of runs 1 and 2" if len(frame) > 2 else "")
        if not both_ov:
            self.layers_status.value = ("<i>Layer times come from OpenVINO's performance counters: comparing layers "
                                        "needs the first two runs to be OpenVINO runs.</i>")

    # ---- layers ----
    def _on_layers(self, *_):
        if self._frame is None or (self._thread is not None and self._thread.is_alive()):
            return
        self.messages.clear()
        self.layers_button.disabled = self.compare_button.disabled = True
        self.layers_status.value = "Profiling layers (or reading the profiles kept from earlier)…"
        pairs = [(str(self._frame["study"].iloc[i]), str(self._frame["key"].iloc[i])) for i in (0, 1)]
        self._thread = threading.Thread(target=self._layers, args=(pairs, self._frame), daemon=True)
        self._thread.start()

    def _layers(self, pairs, frame) -> None:
        from wb_core.api import layer_diff, layer_profile

        try:
            profiles = []
            for i, (study, key) in enumerate(pairs):
                self.layers_status.value = f"Layers of run {i + 1} of 2 (a few seconds when not profiled before)…"
                profiles.append(layer_profile(study, key, self.session.db, iterations=ITERATIONS, reuse=True))
            diff = layer_diff(*profiles)
            self.show_layers(diff, frame)
            self.layers_status.value = ""
        except Exception as e:  # shown inline; the thread must not die silently
            self.layers_status.value = ""
            self.messages.error(e)
        finally:
            self.layers_button.disabled = self.compare_button.disabled = False

    def show_layers(self, diff, frame) -> None:
        from wb_core.api import plots

        name_a, name_b = side_names(frame)
        unit = "per sample (the batch sizes differ)" if diff.per_sample else "per inference"
        summary = diff.summary(name_b, name_a)
        self.layers_result.children = [
            section("Layers: run 1 against run 2"),
            w.HTML(f"<div class='wb-msg wb-msg-info wb-layer-summary'>{html.escape(summary)}</div>"),
            w.HTML(results_table(diff.by_type, LAYER_COLUMNS)),
            PlotArea(plots.layer_diff_bars(diff, name_a, name_b)),
            caption(f"Each pair of bars is the time one kind of layer took {unit} in each run, summed over its "
                    f"layers. A shorter second bar is where the second run gained; a bar with no partner is a layer "
                    f"type only one run has (an INT8 model adds conversions and reorders). 'Second is faster by' "
                    f"above 1 means the second run spent less time there."),
            caption(f"Why this can differ from the throughput ratio above: layer times are the {MEASUREMENT_MODES['layers']}, "
                    "one inference at a time; the throughput above is measured closed loop with each run's batch, "
                    "threads and requests in flight, so it also counts the time between layers and how well the "
                    "run keeps every core busy (an INT8 run can spend less time in its layers and still serve "
                    "fewer samples per second)."),
        ]


def _label(column: str) -> str:
    from wb_core.ui.words import label

    return label(column)
