"""Sweep tab: a widget per sweep dimension, data for accuracy and INT8, how to search, the serving
scenario; Run in the background with a live plot and table; Cancel; reopen a previous study.

The sweep runs in a thread so the page stays responsive; every point the runner reports updates
the progress bar, the plot and the table. Before it starts, the points the study already holds are
counted ("resuming: N already measured"), so the bar and its label agree from the first moment,
and settings that oversubscribe the CPUs are warned about. Cancel stops the worker; every
finished point is already in the database, so nothing is lost and pressing Run again resumes.
Run stays disabled until the sweep's thread has really finished.

The live plot is redrawn from the study's runs (at most every REDRAW_S seconds while points arrive,
and once at the end) in a `PlotArea`, which the page draws with plotly's own renderer.
"""

from __future__ import annotations

import html
import threading
import time

import ipywidgets as w

from wb_core.ui.data_section import DEMO_DATA, NO_DATA, DataSection
from wb_core.ui.generation_panel import GenerationSection
from wb_core.ui.state import DashboardState, guard_failed
from wb_core.ui.sweep_sections import SMART, ScenarioSection, SearchSection
from wb_core.ui.widgets import (
    CSS,
    MessageArea,
    PlotArea,
    button,
    checked_number,
    choices,
    guarded,
    number_box,
    said,
    section,
    text,
    with_help,
)
from wb_core.ui.words import executed_words, plural, results_table

# The runs table: every setting (the axes table's, `with_role("compare")`), then these figures.
FIGURE_COLUMNS = ["latency_ms_p50", "latency_ms_p99", "throughput", "accuracy", "accuracy_drop", "accuracy_guard",
                  "cpu_util", "rss_mb", "busy", "status", "error"]
# Shown only when some run has a value there (a column nobody used is noise); so is every setting
# not `always_shown`.
OPTIONAL_COLUMNS = {"accuracy", "accuracy_drop"}
# Shown only when some run says so: measured on a busy machine, accuracy guard failed.
FLAG_COLUMNS = {"busy": (lambda v: v is True or v == 1, "busy", ""),
                "accuracy_guard": (lambda v: v == "failed", "accuracy failed", "")}
BUSY_WORDS = ("{n} measured while other programs used this machine's cores, so {its} figures may be low (the "
              "table marks {them}). Press “Measure busy points again” to measure {them} again, best when the "
              "machine is quieter.")

# Every axis with a place in the tab (`Axis.place`) gets a text box there, made from its declaration.
# Where the tab starts from other values than the sweep default (a first sweep worth running), and
# the examples it shows in an empty box, by SweepSpec field; each is given the CPUs this process may use.
STARTS = {"batch_sizes": lambda cpus: "1,8", "threads": lambda cpus: thread_ladder(len(cpus))}
PLACEHOLDERS = {"seq_lens": lambda cpus: "text models only, e.g. 32,128,384",
                "cores": lambda cpus: f"none, all, first1 … first{len(cpus)}, 0-1"}
# Where the tab kept its boxes before it kept them all under "axes" by SweepSpec field; a study saved
# then reopens with them (keys the same as the field need no line).
OLD_KEYS = {"batch": "batch_sizes", "pinning": "cpu_pinning", "inter_op": "inter_op_threads",
            "scenario_instances": "instances", "scenario_cores_per_instance": "cores_per_instance",
            "scenario_concurrency": "concurrency", "scenario_rates": "rates"}

REDRAW_S = 1.5  # the least time between two live plots while a sweep runs
WARN_CSS = """<style>
.wb-msg-warn { background: #fff8e1; border-left: 4px solid #e6a700; }
.wb-data-section .widget-radio-box { flex-direction: column; }
</style>"""


def model_name(path: str) -> str:
    """A model shown by its name: a demo's name, else its file or folder name (not the cache path)."""
    from pathlib import Path

    from wb_core.faces import demo_name_of

    demo = demo_name_of(path)
    if demo:
        return demo
    p = Path(path)
    return p.parent.name if p.name in ("saved_model.pb", "model.xml", "model.onnx") else p.name


def boxed_axes() -> list:
    """The axes the tab gives a text box (`Axis.place`), in the order a table shows them."""
    from wb_core.faces import sweep_axes

    return [a for a in sorted(sweep_axes(), key=lambda a: a.name_rank) if a.place]


def box_text(a, values) -> str:
    """Values of axis `a` as its box writes them: unset as its sweep default says it (auto or none)."""
    unset = "none" if a.text_default == "none" else "auto"

    def one(v) -> str:
        if isinstance(v, bool):
            return "on" if v else "off"
        return unset if v is None or (v == 0 and unset == "auto") else str(v)

    return ",".join(one(v) for v in values)


def settings_from_spec(spec: dict) -> dict:
    """The Sweep tab's settings from a study's recorded sweep (a study made with `wb profile`)."""
    sweep = spec.get("sweep") or {}
    out = {}
    for field in ("backends", "precisions"):
        if sweep.get(field):
            out[field] = list(sweep[field])
    boxes = {}
    for a in boxed_axes():
        values = sweep.get(a.spec)
        if not a.text_default:
            values = [v for v in values or () if v]  # an empty box: unset (an image model's sequence lengths)
        if values:
            boxes[a.spec] = box_text(a, values)
    if boxes:
        out["axes"] = boxes
    if spec.get("search") in ("grid", "smart"):
        out["search"] = spec["search"]
    settings = spec.get("settings") or {}
    if settings.get("max_time_s"):
        out["max_time"] = float(settings["max_time_s"])
    return out


def thread_ladder(n_cpus: int) -> str:
    """`1,2,4,...,n`: doubling thread counts up to the CPUs this process may use."""
    out, t = [], 1
    while t < n_cpus:
        out.append(t)
        t *= 2
    out.append(n_cpus)
    return ",".join(map(str, out))


def live_figure(df=None):
    """The live plot: the core's (`plots.live_figure`)."""
    from wb_core.api import plots

    return plots.live_figure(df)


def runs_table(df) -> str:
    """The study's runs in words: worded headers, rounded numbers, `auto` for settings left to the runtime,
    and the reason in the Problem column of a failed or skipped run."""
    if df is None or df.empty:
        return "<i>No runs yet.</i>"
    view = df.copy()
    if "status" in view.columns:  # a run that lost too much accuracy is never "ok"
        view["status"] = view["status"].astype(object).where(~guard_failed(view).to_numpy(), "accuracy failed")
    for c, (flagged, yes, no) in FLAG_COLUMNS.items():
        if c in view.columns:
            marks = view[c].astype(object).map(lambda v, f=flagged: bool(f(v)))
            view[c] = marks.map(lambda m, y=yes, n=no: y if m else n) if marks.any() else None
    from wb_core.faces import sweep_axes, with_role

    axes = {a.name: a for a in sweep_axes()}
    settings = [c for c in with_role("compare") if c in view.columns]

    def used(c) -> bool:
        return bool(view[c].notna().any() and (view[c].astype(str) != "1").any())

    cols = [c for c in settings if axes[c].always_shown or used(c)]
    cols += [c for c in FIGURE_COLUMNS if c in view.columns and (c not in OPTIONAL_COLUMNS or used(c))
             and (c not in FLAG_COLUMNS or view[c].notna().any())]
    for c in settings:
        if axes[c].text_default == "auto":  # left to the runtime: said so, as the boxes write it
            zero = (view[c].astype(str) == "0") & (not axes[c].annotation.startswith("bool"))  # a switch's 0 is off
            view[c] = view[c].astype(object).where(view[c].notna() & ~zero, "auto")
    if "cores" in view.columns:
        view["cores"] = view["cores"].astype(object).where(
            view["cores"].notna() & ~view["cores"].astype(str).isin(["none", "None", ""]), "not pinned")
    if "error" in view.columns:
        view["error"] = view["error"].astype(object).where(view["error"].notna() & (view["error"] != ""), "")
    # Runtimes and precisions by their names (OpenVINO, INT8), not the codes the store keeps.
    from wb_core.faces import backend_title

    if "backend" in view.columns:
        view["backend"] = view["backend"].astype(str).map(backend_title)
    if "precision" in view.columns:
        view["precision"] = view["precision"].astype(str).map(executed_words)
    return results_table(view, cols)


class SweepPanel(w.VBox):
    """Runs sweeps of DashboardState.model_path into DashboardState.study."""

    def __init__(self, session: DashboardState, plot_when_shown: bool = False):
        """`plot_when_shown`: draw the plot only once `shown()` is called (the dashboard builds this tab
        before it is on screen to reopen a study: plotly is imported when the tab is opened)."""
        from wb_core.api import available_cpus, list_backends
        from wb_core.faces import backend_title, field_help, sweep_axes
        from wb_core.faces import setting_label as label

        self.session = session
        self.messages = MessageArea()
        cpus = available_cpus()
        self.model_line = w.HTML()
        self.study = text("Study name", tooltip="Results are stored under this name; reusing it resumes.")
        self.backends = choices(label("backends"), list(list_backends()), list(list_backends())[:1], field_help("backends"),
                                words=backend_title)
        precision = next(a for a in sweep_axes() if a.name == "precision")  # its choices are the declared precisions
        self.precisions = choices(label("precisions"), list(precision.choices), [precision.default],
                                  field_help("precisions"), words=executed_words)
        boxed = boxed_axes()
        self._axes = {a.spec: a for a in boxed}
        # One text box per axis with a place here, labelled as messages name it (`setting_label`).
        self.axis_boxes = {a.spec: text(label(a.spec), STARTS[a.spec](cpus) if a.spec in STARTS else a.text_default,
                                        field_help(a.spec), PLACEHOLDERS[a.spec](cpus) if a.spec in PLACEHOLDERS else "")
                           for a in boxed}
        placed = {where: [with_help(self.axis_boxes[a.spec], a.guide or field_help(a.spec)) for a in boxed
                          if a.place == where] for where in ("main", "more", "scenario")}
        self.max_time = number_box("Seconds per point", 2.0)
        self.data = DataSection(self._demo_name)
        self.search = SearchSection()
        self.scenario = ScenarioSection(placed["scenario"])
        self.warnings = w.HTML("")
        self.warnings.add_class("wb-warnings")
        self.estimate = w.HTML("")
        self.estimate.add_class("wb-estimate")
        self.run = button("Run", "success", "play")
        self.cancel_button = button("Cancel", "danger", "stop")
        self.cancel_button.disabled = True
        self.remeasure = button("Measure busy points again", "warning", "refresh",
                                "Measure again the points measured while the machine was busy")
        self.remeasure.add_class("wb-remeasure")
        self.remeasure.layout.display = "none"
        self._remeasure_busy = False
        self.progress = w.IntProgress(value=0, min=0, max=1, description="Progress", bar_style="info",
                                      layout=w.Layout(width="520px"))
        self.progress_text = w.Label("")
        self.progress.add_class("wb-progress")
        self.progress_text.add_class("wb-progress-text")
        self.studies = w.Dropdown(description="Previous study", style={"description_width": "150px"},
                                  layout=w.Layout(width="520px"))
        self.open_button = button("Open", icon="folder-open")
        self._plot_wanted = not plot_when_shown
        self.plot = PlotArea(live_figure() if self._plot_wanted else None)
        self._drawn_at = 0.0
        self.table = w.HTML()
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._search = "grid"
        self._resuming = ""  # said beside the progress while a resumed sweep runs

        self.run.on_click(guarded(self.messages)(self._on_run))
        self.cancel_button.on_click(guarded(self.messages)(self._on_cancel))
        self.remeasure.on_click(guarded(self.messages)(self._on_remeasure))
        self.open_button.on_click(guarded(self.messages)(self._on_open))
        for control in self.axis_boxes.values():
            control.observe(guarded(self.messages)(self.update_warnings), "value")
        # A number out of range is said at once (never changed behind the user's back); an error about
        # a field goes away once any field changes.
        self.numbers = ((self.max_time, "Seconds per point", 0.2, 600, False),
                        (self.search.budget, "The budget", 1, 10_000, True),
                        (self.scenario.repeats, "Repeats", 1, 50, True),
                        (self.data.calib, "The calibration size", 1, 100_000, True))
        for control, *_ in self.numbers:
            control.observe(guarded(self.messages)(self.check_numbers), "value")
        for control in (self.study, self.search.p99, self.search.how, self.data.source, self.data.path, self.data.drop,
                        self.data.upload, *self.backends.boxes, *self.precisions.boxes, *self.axis_boxes.values()):
            control.observe(self.messages.clear_error, "value")
        self._opening = False  # a study being opened sets its own model
        self.generation = GenerationSection(session, self.study)  # in place of the above for a generation model
        self.model_sweep = w.VBox()
        session.observe(self._on_model, "model_path")
        self._on_model()
        self.refresh_studies()
        advanced = w.Accordion(children=[w.VBox(placed["more"])], titles=("More settings",))
        study_box = with_help(self.study, "Results are kept under this name; running it again measures only what "
                                          "is missing.")
        self.model_sweep = w.VBox([
            with_help(self.backends, "The runtimes to measure the model with; tick more than one to compare them."),
            with_help(self.precisions, "FP32 is the model as it is; BF16 runs at half width where the CPU has it; "
                                       "INT8 is quantized here (give data below to check its accuracy)."),
            *placed["main"],
            with_help(self.max_time, "How long each configuration is measured; short is quick, long is steadier."),
            advanced, section("Data for accuracy and INT8"), self.data, section("How to search"), self.search,
            self.scenario, self.warnings, self.estimate,
            w.HBox([self.run, self.cancel_button, self.remeasure]), w.HBox([self.progress, self.progress_text]),
            self.messages])
        self._show_generation()
        super().__init__([
            w.HTML(CSS + WARN_CSS), section("Sweep"), self.model_line, study_box, self.model_sweep, self.generation,
            w.HBox([self.studies, self.open_button]), self.plot, section("Runs"), self.table])
        self.add_class("wb-sweep-panel")
        self.update_warnings()
        for control in (self.study, self.max_time, self.scenario.repeats, self.search.how, self.search.budget,
                        *self.backends.boxes, *self.precisions.boxes, *self.axis_boxes.values()):
            control.observe(self.update_estimate, "value")
        self.update_estimate()

    # ---- model and studies ----
    def _demo_name(self) -> str | None:
        from wb_core.faces import demo_name_of

        return demo_name_of(self.session.model_path) if self.session.model_path else None

    def _show_generation(self) -> None:
        """A text-generation model gets the generation sweep; any other model the model sweep."""
        from wb_core.faces import is_generation_model

        generation = is_generation_model(self.session.model_path)
        self.generation.display(generation)
        self.model_sweep.layout.display = "none" if generation else None

    def _on_model(self, *_):
        from wb_core.faces import default_study_name

        self._show_generation()

        if not self._opening and self.session.study and not self.session.measuring:
            # Another model: the old study's message, plot and table go with it.
            self.session.study = ""
            self.messages.clear()
            self._resuming = ""
            self.progress.bar_style = "info"
            self._set_progress(0, 1)
            self.progress_text.value = ""
            self._redraw()
        if not self._opening and self.data.source.value == DEMO_DATA and not self._demo_name():
            self.data.source.value = NO_DATA  # the demo's data fits only the demo: not carried to another model
        if self.session.model_path:
            self.model_line.value = (f"Model: <b>{html.escape(self.session.model_label or self.session.model_path)}"
                                     f"</b>")
            self.study.value = default_study_name(self.session.model_path)
        else:
            self.model_line.value = "Model: <i>none chosen yet: pick one in the Model tab, or open a previous study.</i>"

    def refresh_studies(self) -> None:
        rows = self.session.studies()
        self.studies.options = [(f"{r['name']} ({r['ok'] or 0} ok, {r['runs'] or 0} runs)", r["name"]) for r in rows]
        if self.session.study in [r["name"] for r in rows]:
            self.studies.value = self.session.study

    def _on_open(self, *_):
        name = self.studies.value
        if not name:
            self.messages.show("The database holds no studies yet.", "info")
            return
        self.show_study(name)
        rec = self.session.study_record() or {}
        spec = rec.get("spec") or {}
        saved = spec.get("dashboard") or {}
        if rec.get("model_path"):
            self._opening = True  # the study's own model: the study stays open
            try:
                self.session.model_label = saved.get("model_label") or model_name(rec["model_path"])
                self.session.model_path = rec["model_path"]
            finally:
                self._opening = False
        # What other tabs keep with the study (when it was opened, Explore's limits) is not this tab's.
        own = {k: v for k, v in saved.items() if k not in ("opened_at", "explore")}
        self.restore(own or settings_from_spec(spec))
        self.study.value = name
        import time

        self.session.save_settings({"opened_at": time.time()}, name)  # the page opens it next time
        self.messages.show(f"Opened study '{name}' with the settings it was run with. Run measures whatever of "
                           f"them is missing; Explore and Export show its results.", "ok")

    # ---- the settings a study keeps ----
    def settings(self) -> dict:
        """What this tab is set to, as plain values (kept with the study; `restore` puts them back)."""
        data = self.data
        return {"model_label": self.session.model_label, "backends": self.backends.selected(),
                "precisions": self.precisions.selected(),
                "max_time": float(self.max_time.value),
                "data_source": data.source.value, "data_path": data.path.value,
                "uploaded": str(data.uploaded) if data.uploaded else "", "text_path": data.text_path.value,
                "tokenizer_path": data.tokenizer_path.value, "metric": data.metric.value,
                "calib": int(data.calib.value), "drop": data.drop.value,
                "search": self.search.how.value, "budget": int(self.search.budget.value),
                "search_p99": self.search.p99.value,
                "repeats": int(self.scenario.repeats.value),
                "axes": {spec: box.value for spec, box in self.axis_boxes.items()}}

    def restore(self, saved: dict) -> None:
        """Put back settings from `settings()` (or from a study's sweep); keys missing are left as they are."""
        from pathlib import Path

        for row, key in ((self.backends, "backends"), (self.precisions, "precisions")):
            if key in saved:
                for box in row.boxes:
                    box.value = box.option in saved[key]
        older = {OLD_KEYS.get(key, key): value for key, value in saved.items() if OLD_KEYS.get(key, key) in self.axis_boxes}
        for spec, value in {**older, **(saved.get("axes") or {})}.items():
            if spec in self.axis_boxes:
                self.axis_boxes[spec].value = str(value)
        plain = {"max_time": self.max_time, "budget": self.search.budget, "repeats": self.scenario.repeats,
                 "search_p99": self.search.p99, "search": self.search.how}
        for key, control in plain.items():
            if key in saved:
                control.value = saved[key]
        data = self.data
        if saved.get("uploaded") and Path(saved["uploaded"]).is_file():
            data.uploaded = Path(saved["uploaded"])
        for key, control in (("data_path", data.path), ("text_path", data.text_path),
                             ("tokenizer_path", data.tokenizer_path), ("metric", data.metric),
                             ("calib", data.calib), ("drop", data.drop), ("data_source", data.source)):
            if key in saved:
                control.value = saved[key]

    def show_study(self, name: str) -> None:
        """Make `name` the open study and draw what it holds."""
        self.session.study = name
        self._redraw()
        self.session.refresh()
        self.show_busy()

    # ---- settings ----
    def check_numbers(self, *_) -> None:
        """Every number box within its range, else a message naming the box and the range."""
        for control, name, low, high, integer in self.numbers:
            checked_number(control.value, name, low, high, integer)
        self.messages.clear_error()

    def spec_values(self) -> dict:
        """The sweep grid as keyword arguments of wb_core.api.profile (validated before a thread starts)."""
        from wb_core.api import SweepSpec

        values = dict(backends=self.backends.selected(), precisions=self.precisions.selected(),
                      repeats=self.scenario.repeat_count())
        for spec, box in self.axis_boxes.items():
            if self._axes[spec].text_default:
                values[spec] = box.value
            elif box.value.strip():  # an empty box without a default leaves the sweep's own (no sequence lengths)
                values[spec] = box.value.strip()
        SweepSpec(**values)  # raises ConfigError naming the field
        return values

    def run_values(self) -> dict:
        """Everything else profile() takes from this tab: data, metric, calibration, drop limit, search."""
        return {**self.data.values(), **self.search.values()}

    def update_estimate(self, *_) -> str:
        """Before Run: how many points the sweep will measure and about how long that takes
        (`wb_core.api.preview_sweep`); nothing when a value does not parse (Run says why)."""
        from wb_core.api import SweepSpec, WorkbenchError, preview_sweep

        try:
            extra = self.search.values()
            plan = preview_sweep(SweepSpec(**self.spec_values()), self.session.db, self.study.value.strip() or None,
                                 search=extra["search"], budget=extra.get("budget"))
            t = float(self.max_time.value)
            words = plan.in_words(t, min(0.5, t / 2))
        except (WorkbenchError, ValueError, TypeError):
            words = ""
        self.estimate.value = (f"<div class='wb-help-block wb-estimate-words'>{html.escape(words[0].upper() + words[1:])}"
                               "</div>") if words else ""
        return words

    def update_warnings(self, *_) -> list[str]:
        """Say, before anything runs, which settings ask for more threads or cores than this process may use."""
        from wb_core.api import ConfigError, SweepSpec
        from wb_core.faces import oversubscription_warnings

        try:
            parsed = {}
            for spec, box in self.axis_boxes.items():  # the boxes that parse; the others are said at Run
                try:
                    parsed[spec] = self._axes[spec].values(box.value) if box.value.strip() else None
                except ConfigError:
                    continue
            spec = SweepSpec(**{k: v for k, v in parsed.items() if v is not None}, allow_oversubscribe=True)
            found = oversubscription_warnings(spec)
        except ConfigError:
            found = []  # a value that does not parse is said when Run is pressed
        self.warnings.value = "".join(f'<div class="wb-msg wb-msg-warn">⚠ {html.escape(t)}</div>' for t in found)
        return found

    # ---- running ----
    def _on_run(self, *_):
        from wb_core.api import MeasureSettings, SweepSpec, preview_sweep

        self._plot_wanted = True  # pressed on screen: the points are drawn as they come

        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=2)  # a thread in its last statement is given a moment
            if self._thread.is_alive():
                self.messages.show("A sweep is still running or finishing; wait for it, or cancel it.", "info")
                return
        if not self.session.model_path:
            self.messages.show("Choose a model in the Model tab first (or open a previous study).", "error")
            return
        study = self.study.value.strip()
        if not study:
            self.messages.show("Give the study a name.", "error")
            return
        self.check_numbers()
        values = self.spec_values()
        extra = self.run_values()
        self.update_warnings()
        t = float(self.max_time.value)
        settings = MeasureSettings(max_time_s=t, warmup_s=min(0.5, t / 2), window_s=min(0.5, t / 3))
        plan = preview_sweep(SweepSpec(**values), self.session.db, study, search=extra["search"],
                             budget=extra["budget"])
        self._search = extra["search"]
        if study in [r["name"] for r in self.session.studies()]:
            self.show_study(study)
        else:
            self.session.study = study
            self._redraw()
        self.progress.bar_style = "info"
        self._resuming = ""
        remeasure, self._remeasure_busy = self._remeasure_busy, False
        extra = {**extra, "remeasure_busy": remeasure}
        self._set_progress(plan.done, plan.total)
        if plan.total and plan.remaining == 0 and extra["search"] != SMART and not remeasure:
            self.progress.bar_style = "success"
            self.messages.show(f"All {plural(plan.total, 'measurement')} of this sweep are already stored in study "
                               f"'{study}'. Change a setting to measure more.", "ok")
            return
        resuming = f" (resuming: {plan.done} already measured)" if plan.done else ""
        self._resuming = resuming
        self._set_progress(plan.done)
        self._cancel = threading.Event()
        self.run.disabled, self.cancel_button.disabled = True, False
        self.cancel_button.description = "Cancel"
        what = "at most " if extra["search"] == SMART else ""
        self.messages.show(f"Profiling into study '{study}': {what}{plural(plan.remaining, 'measurement')} to go{resuming}. "
                           f"Starting the workers takes a few seconds.")
        self._thread = threading.Thread(target=self._sweep, args=(self.session.model_path, study, values, extra,
                                                                  settings), daemon=True, name="wb-sweep")
        self.session.measuring = study  # exports and reports wait for the sweep to finish
        self._thread.start()

    def busy_count(self) -> int:
        """How many of the open study's runs were measured on a busy machine."""
        df = self.session.results()
        if df.empty or "busy" not in df.columns:
            return 0
        return int((df["busy"].astype(object).map(lambda v: v is True or v == 1) & (df["status"] == "ok")).sum())

    def show_busy(self) -> str:
        """The busy-machine note in words (no commands), with the button to measure those points again."""
        n = self.busy_count()
        self.remeasure.layout.display = "" if n else "none"
        if not n:
            return ""
        return BUSY_WORDS.format(n=f"{n} point{'s were' if n != 1 else ' was'}", its="their" if n != 1 else "its",
                                 them="them" if n != 1 else "it")

    def _on_remeasure(self, *_):
        """Run the sweep again, measuring again the points stored as measured on a busy machine."""
        self._remeasure_busy = True
        self._on_run()

    def _set_progress(self, value: int, total: int | None = None) -> None:
        """Move the bar and its label together."""
        if total is not None:
            self.progress.max = max(1, total)
            self.progress.min = 0
        self.progress.value = max(0, min(self.progress.max, value))
        self.progress_text.value = f"{self.progress.value} / {self.progress.max}{self._resuming}"

    def _on_cancel(self, *_):
        self._cancel.set()
        self.cancel_button.disabled = True
        self.cancel_button.description = "Cancelling…"
        self.messages.show("Cancelling: the running worker is stopped; finished points stay stored.")

    def _sweep(self, model, study, values, extra, settings):
        from wb_core.api import profile

        kept = self.settings()
        try:
            summary = profile(model, db=self.session.db, study=study, settings=settings, on_point=self._on_point,
                              cancel=self._cancel, return_frame=False, **values, **extra)
            self._finish(summary)
        except Exception as e:  # shown inline; the thread must not die silently
            self.messages.error(e)
            self.progress.bar_style = "danger"
            self._resuming = ""
            self._set_progress(self.progress.value)
        finally:
            try:
                # The study reopens with them, and is the one the page opens next (the last one used).
                self.session.save_settings({**kept, "opened_at": time.time()})
                self.session.refresh()
                self._redraw()
                self.refresh_studies()
                self.update_estimate()  # what is left to measure now
            except Exception as e:
                self.messages.error(e)
            finally:  # the thread's very last work: Run comes back only now
                self.session.measuring = ""
                self.cancel_button.description = "Cancel"
                self.run.disabled, self.cancel_button.disabled = False, True

    def _finish(self, summary) -> None:
        self._resuming = ""
        line = summary.line()
        if not summary.cancelled:
            if self._search == SMART:
                self._set_progress(self.progress.value, self.progress.value)  # the search may stop early
            else:
                self._set_progress(self.progress.max)
        else:
            self._set_progress(self.progress.value)
        # The runner's notes, less its busy-machine note (it names command-line flags): said below in words.
        notes = " ".join(said(n) for n in getattr(summary, "notes", [])[:3] if "busy machine" not in n)
        busy = self.show_busy()
        notes = f"{notes} {busy}".strip()
        if summary.cancelled:
            self.progress.bar_style = "warning"
            self.messages.show(f"Cancelled. {line} Press Run to measure the rest.", "info")
        elif summary.failed:
            self.progress.bar_style = "danger" if not summary.ok else "warning"
            first = "; ".join(summary.errors[:3])
            self.messages.show(f"{line} First failures: {first}", "error")
        else:
            self.progress.bar_style = "success"
            df = self.session.results()
            failed = int(guard_failed(df).sum()) if not df.empty else 0
            guard = (f" {failed} run{'s' if failed != 1 else ''} failed the accuracy guard and "
                     f"{'are' if failed != 1 else 'is'} left out of every recommendation." if failed else "")
            self.messages.show(f"{line}{guard} {notes + ' ' if notes else ''}See the Explore tab for the "
                               f"recommendation.", "info" if failed else "ok")

    def _on_point(self, point: dict) -> None:
        try:
            self.session.add_point(point)
            self._set_progress(self.progress.value + 1)
            self._redraw(force=False)
        except Exception as e:  # never break the runner's loop over a drawing problem
            self.messages.error(e)

    # ---- drawing ----
    def _redraw(self, force: bool = True) -> None:
        """Table and plot from the open study's runs; the plot at most every REDRAW_S seconds while a
        sweep runs (`force` draws now)."""
        df = self.session.results()
        self.table.value = runs_table(df)
        now = time.monotonic()
        if not force and now - self._drawn_at < REDRAW_S:
            return  # the next point, or the sweep's end, draws it
        self._drawn_at = now
        if self._plot_wanted:
            self.plot.show(live_figure(df))

    def shown(self) -> None:
        """The tab is on screen: its plot is drawn if it was left for now."""
        if not self._plot_wanted:
            self._plot_wanted = True
            self._redraw()
