"""Start tab: the guided first screen. Choose a model, press Tune, get the answer, download it.

The header names the product and its three steps. Step 1 is the Model panel. Step 2 runs
`wb_core.api.tune` (the same search, leaders' rounds, confirmation against the runtime's untouched
defaults and YAML export as `wb tune`) in a background thread: the phases light up as the tune
reports them, the bar follows the time budget with the time left, and Cancel stops it keeping
what was measured. Step 3 is the answer in words (`TuneResult.answer`, word for word what `wb tune`
prints), the figures with their intervals, the runs left out and why, and a download per format.
The downloads ask the same rule as every export (`DashboardState.unfit`), and the answer's study
and run become the dashboard's open study and pick, so the expert tabs open on them.
"""

from __future__ import annotations

import html
import threading
import time

import ipywidgets as w

from wb_core.ui.data_section import DEMO_DATA, NO_DATA, SERVER_PATH, TEXT, UPLOAD, DataSection
from wb_core.ui.model_panel import ModelPanel
from wb_core.ui.state import DashboardState, Pick
from wb_core.ui.widgets import CSS, MessageArea, button, guarded, key_values, said, section, text, with_help
from wb_core.ui.words import rounded, run_name

PRODUCT = "CPU Inference Workbench"
TAGLINE = ("Finds the threads, cores, batch size and precision that serve your model best on this CPU, proves "
           "it against the runtime's untouched defaults, and exports it for your server.")
STEPS = ("Choose a model", "Get the answer: press Tune", "Deploy: download the configuration")
# The tune's phases, and the first words of the progress sentence that starts each.
PHASES = (("Search", ("Searching",)), ("Leaders' rounds", ("Measuring the",)),
          ("Accuracy and the pick", ("Recommended",)), ("Confirmation against the defaults", ("Confirming",)),
          ("Export", ()))
DEFAULT_BUDGET = "3m"
TICK_S = 0.5  # how often the bar and the time left move while a tune runs
# Data sources a tune takes (metric and accuracy-drop limit are the Sweep tab's expert settings).
TUNE_SOURCES = (DEMO_DATA, NO_DATA, SERVER_PATH, UPLOAD, TEXT)
# Settings of the data box: an error about one is said under that box, not under Tune.
DATA_FIELDS = ("data", "text", "tokenizer", "calib_size", "metric", "max_accuracy_drop")

HEADER_CSS = """<style>
.wb-hero { background: linear-gradient(90deg, #1f4e79, #2f6fa8); color: white; border-radius: 6px;
           padding: 14px 18px; margin: 4px 0 10px 0; }
.wb-hero h1 { font-size: 22px; margin: 0 0 4px 0; color: white; }
.wb-hero p { margin: 0 0 8px 0; font-size: 14px; }
.wb-steps { display: flex; gap: 10px; }
.wb-step { background: rgba(255,255,255,0.15); border-radius: 4px; padding: 4px 10px; font-size: 13px; }
.wb-step b { margin-right: 4px; }
.wb-phases { list-style: none; padding-left: 0; margin: 4px 0; font-size: 13px; }
.wb-phases li { margin: 1px 0; }
.wb-phase-done { color: #2ca02c; } .wb-phase-now { color: #1f4e79; font-weight: bold; }
.wb-phase-todo { color: #999; }
.wb-answer { font-size: 14px; }
.wb-answer .wb-answer-run { font-size: 16px; }
</style>"""


def header_html() -> str:
    steps = "".join(f"<div class='wb-step'><b>{i}</b>{html.escape(s)}</div>" for i, s in enumerate(STEPS, 1))
    return (f"<div class='wb-hero'><h1>{PRODUCT}</h1><p>{html.escape(TAGLINE)}</p>"
            f"<div class='wb-steps'>{steps}</div></div>")


def phase_of(sentence: str, current: int) -> int:
    """The phase a progress sentence of the tune starts (or `current` when it starts none)."""
    for i, (_, starts) in enumerate(PHASES):
        if any(sentence.startswith(s) for s in starts):
            return max(i, current)
    return current


def phases_html(current: int, finished: bool = False) -> str:
    items = []
    for i, (name, _) in enumerate(PHASES):
        state = "done" if i < current or finished else "now" if i == current else "todo"
        mark = {"done": "✓", "now": "▶", "todo": "○"}[state]
        items.append(f"<li class='wb-phase-{state}'>{mark} {i + 1}. {html.escape(name)}</li>")
    return f"<ul class='wb-phases'>{''.join(items)}</ul>"


def clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}:{seconds % 60:02d}"


def interval_words(run: dict, column: str, unit: str) -> str:
    """A figure with its 95% interval when it was measured in rounds ("1,234 samples/s (95% interval 1,200
    to 1,260)"), else saying it rests on one round."""
    value = run.get(column)
    lo, hi = run.get(f"{column}_ci_low"), run.get(f"{column}_ci_high")
    shown = f"{rounded(value, column)} {unit}"
    if all(isinstance(v, (int, float)) and v == v for v in (lo, hi)):
        return f"{shown} (95% interval {rounded(max(lo, 0), column)} to {rounded(hi, column)})"
    return f"{shown} (one round: no interval)"


class StartPanel(w.VBox):
    """The first screen: the header, the model (step 1), Tune (step 2) and the answer with downloads (step 3).

    `goto(title)` (set by the dashboard) opens another tab; the answer's buttons use it.
    """

    def __init__(self, session: DashboardState):
        self.session = session
        self.goto = lambda title: None
        self.model = ModelPanel(session, title="1. Choose a model")
        self.budget = text("Time budget", DEFAULT_BUDGET, placeholder="3m, 90s or 300")
        self.budget.add_class("wb-tune-budget")
        self.data = DataSection(self._demo_name, sources=TUNE_SOURCES, expert=False)
        self.data.source.value = DEMO_DATA
        self.tune_button = button("Tune", "success", "magic", tooltip="Search, measure the leaders, confirm "
                                                                     "against the defaults and export.")
        self.tune_button.add_class("wb-tune")
        self.cancel_button = button("Cancel", "danger", "stop")
        self.cancel_button.disabled = True
        self.messages = MessageArea()
        self.messages.add_class("wb-tune-messages")
        self.budget_messages = MessageArea()  # what is wrong with the budget, said under its box
        self.budget_messages.add_class("wb-budget-messages")
        self.data_messages = MessageArea()  # what is wrong with the data, said under the data box
        self.data_messages.add_class("wb-data-messages")
        self.tune_failed = MessageArea()  # a tune that broke off (a worker that died), said by its progress
        self.tune_failed.add_class("wb-tune-failed")
        self.progress = w.FloatProgress(value=0, min=0, max=1, description="Progress", bar_style="info",
                                        layout=w.Layout(width="520px", display="none"))
        self.progress.add_class("wb-tune-progress")
        self.time_left = w.Label("")
        self.time_left.add_class("wb-tune-time")
        self.phases = w.HTML("")
        self.phases.add_class("wb-tune-phases")
        self.lines = w.HTML("")
        self.lines.add_class("wb-tune-log")
        self.answer = w.HTML("<i>The answer appears here once a tune has run.</i>")
        self.answer.add_class("wb-tune-answer")
        self.downloads = w.HTML("")
        self.downloads.add_class("wb-tune-downloads")
        self.see_runs = button("See every run", icon="line-chart", tooltip="The Explore tab, on this study.")
        self.compare = button("Compare runs", icon="columns")
        self.capacity = button("Plan capacity", icon="server")
        self.more = w.HBox([self.see_runs, self.compare, self.capacity], layout=w.Layout(display="none"))
        self.see_runs.on_click(lambda _b: self.goto("Explore"))
        self.compare.on_click(lambda _b: self.goto("Compare"))
        self.capacity.on_click(lambda _b: self.goto("Capacity"))
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._phase = 0
        self.result = None  # the last TuneResult
        self.tune_button.on_click(guarded(self.messages)(self._on_tune))
        self.cancel_button.on_click(guarded(self.messages)(self._on_cancel))
        for control in (self.budget, self.data.source, self.data.path, self.data.text_path):
            control.observe(self.messages.clear_error, "value")
        self.budget.observe(self.budget_messages.clear_error, "value")
        for control in (self.data.source, self.data.path, self.data.text_path, self.data.tokenizer_path,
                        self.data.upload):
            control.observe(self.data_messages.clear_error, "value")
        session.observe(self._on_model, "model_path")
        super().__init__([
            w.HTML(CSS + HEADER_CSS + header_html()), self.model,
            section("2. Get the answer"),
            w.HTML("<div class='wb-help-block'>Tune searches precision, batch size, threads and streams within the "
                   "time budget, measures the leaders again until they separate, checks the accuracy of faster "
                   "precisions and confirms the pick against what the runtime does untouched.</div>"),
            with_help(self.budget, "How long the whole tune may take, e.g. 3m (three minutes), 90s or 300 "
                                   "(seconds). Longer budgets measure more configurations and more rounds."),
            self.budget_messages, self.data, self.data_messages, w.HBox([self.tune_button, self.cancel_button]),
            self.messages, w.HBox([self.progress, self.time_left]), self.tune_failed, self.phases, self.lines,
            section("3. Deploy"), self.answer, self.downloads, self.more])
        self.add_class("wb-start-panel")

    def _demo_name(self) -> str | None:
        from wb_core.faces import DEMOS, demo_name_of

        model = self.model.chosen_name()
        return model if model in DEMOS else demo_name_of(model) if model else None

    def _on_model(self, *_):
        if self.data.source.value == DEMO_DATA:
            self.data._on_source()  # say again whether the demo's data fits the model now chosen

    # ---- tuning ----
    def _on_tune(self, *_):
        from wb_core.api import ConfigError
        from wb_core.faces import is_generation_model, parse_time

        if self._thread is not None and self._thread.is_alive():
            self.messages.show("A tune is running; wait for it, or cancel it.", "info")
            return
        self.budget_messages.clear()
        self.data_messages.clear()
        self.tune_failed.clear()
        try:
            parse_time(self.budget.value.strip() or DEFAULT_BUDGET)  # one sentence now, not after the model is read
        except ConfigError as e:
            self.budget_messages.error(e)
            return
        try:
            data = self.tune_data()
        except ConfigError as e:  # missing or unreadable data: said under the data box, before anything runs
            self.data_messages.error(e)
            return
        model, label, uploaded = self.model.chosen()
        if is_generation_model(model):  # measured per token by its own sweep, not tuned as model calls
            self.messages.show(f"{label} generates text: its speed is time to first token and per output token, "
                               "measured by the text-generation sweep in the Sweep tab.")
            self._thread = threading.Thread(target=self._to_generation_sweep, args=(model, label, uploaded),
                                            daemon=True, name="wb-generation-model")
            self._thread.start()
            return
        self._cancel = threading.Event()
        self._phase = 0
        self.result = None
        self.answer.value = "<i>Tuning…</i>"
        self.downloads.value = ""
        self.more.layout.display = "none"
        self.lines.value = ""
        self.phases.value = phases_html(0)
        self.progress.layout.display = ""
        self.progress.bar_style = "info"
        self.progress.value = 0
        self.tune_button.disabled, self.cancel_button.disabled = True, False
        self.messages.show(f"Tuning {label}: starting the workers takes a few seconds.")
        self._thread = threading.Thread(target=self._tune, args=(model, label, uploaded, data), daemon=True,
                                        name="wb-tune")
        self._thread.start()

    def _to_generation_sweep(self, model: str, label: str, uploaded) -> None:
        """Make the generation model the one in use, then open the Sweep tab, where its sweep is."""
        try:
            self.model.select_chosen(model, label, uploaded)
            self.goto("Sweep")
        except Exception as e:  # said inline; the thread must not die silently
            self.messages.error(e)

    def tune_data(self) -> dict:
        """data, text and tokenizer for tune() from the data choice (one sentence when it is unusable)."""
        source = self.data.source.value
        if source in (NO_DATA, DEMO_DATA):
            if source == DEMO_DATA and not self._demo_name():
                from wb_core.api import ConfigError

                raise ConfigError("The demo's own data fits only the demo models; choose “No data” or another "
                                  "data source for this model.")
            return {}  # a demo's own data is found by the tune itself
        values = self.data.values()
        return {k: values[k] for k in ("data", "text", "tokenizer") if values.get(k) is not None}

    def _on_cancel(self, *_):
        self._cancel.set()
        self.cancel_button.disabled = True
        self.messages.show("Cancelling: the running measurement stops; what was measured is kept and the answer "
                           "rests on it (a confirmation already under way finishes its rounds first).")

    def _tune(self, model: str, label: str, uploaded, data: dict) -> None:
        from wb_core.api import WorkbenchError, WorkerError, tune
        from wb_core.faces import parse_time

        budget = parse_time(self.budget.value.strip() or DEFAULT_BUDGET)
        started = time.monotonic()
        ticking = threading.Event()
        ticker = threading.Thread(target=self._tick, args=(started, budget, ticking), daemon=True, name="wb-tick")
        ticker.start()
        try:
            self.model.select_chosen(model, label, uploaded)
            from wb_core.faces import default_study_name

            self.session.measuring = f"{default_study_name(self.session.model_path)}-tune"
            result = tune(self.session.model_path, time_budget=budget, db=self.session.db,
                          export_dir=self._export_dir(model), on_progress=self._on_progress, cancel=self._cancel,
                          **data)
            self.session.measuring = ""
            ticking.set()
            ticker.join(2 * TICK_S)  # its last tick must not overwrite how long the tune took
            self._show(result)
        except WorkerError as e:  # a worker that died: the tune stopped where its progress shows
            self.tune_failed.error(e)
            self._failed()
        except WorkbenchError as e:  # one sentence, next to the control it is about
            field = getattr(e, "field", None)
            (self.budget_messages if field == "time_budget" else self.data_messages if field in DATA_FIELDS
             else self.messages).error(e)
            self._failed()
        except Exception as e:  # anything else broke the tune off: said by the progress; the button works again
            self.tune_failed.show(f"The tune stopped: {said(str(e)) or type(e).__name__}. What was measured "
                                  "before it is kept; press Tune to try again.", "error")
            self._failed()
        finally:
            ticking.set()
            self.session.measuring = ""
            self.tune_button.disabled, self.cancel_button.disabled = False, True

    def _failed(self) -> None:
        self.messages.clear()  # "Tuning…: starting the workers" no longer holds
        self.answer.value = "<i>No answer: see the message above.</i>"
        self.progress.bar_style = "danger"
        self.phases.value = phases_html(self._phase)

    def _export_dir(self, model: str):
        from wb_core.faces import default_study_name
        from wb_core.ui.export_panel import default_folder

        return default_folder() / f"{default_study_name(self.session.model_path or model)}-tune"

    def _tick(self, started: float, budget: float, stop: threading.Event) -> None:
        self.progress.max = budget
        while not stop.wait(TICK_S):
            spent = time.monotonic() - started
            self.progress.value = min(spent, budget)
            left = budget - spent
            self.time_left.value = (f"{clock(spent)} of {clock(budget)}, about {clock(left)} left" if left > 0 else
                                    f"{clock(spent)}: finishing the confirmation")

    def _on_progress(self, sentence: str) -> None:
        self._phase = phase_of(sentence, self._phase)
        self.phases.value = phases_html(self._phase)
        lines = self.lines.value.replace("<ul class='wb-tune-lines'>", "").replace("</ul>", "")
        line = self.in_words(said(sentence), self.session.measuring)
        self.lines.value = (f"<ul class='wb-tune-lines'>{lines}<li>{html.escape(line)}</li></ul>"
                          if len(sentence) < 400 else self.lines.value)

    def in_words(self, text: str, *studies: str) -> str:
        """`text` with each run's short label and key replaced by its name in words (runs of `studies`)."""
        import pandas as pd

        from wb_core.faces import stored_runs
        from wb_core.ui.words import worded

        frames = [stored_runs(s, self.session.db) for s in dict.fromkeys(s for s in studies if s)]
        frames = [f for f in frames if not f.empty]
        return worded(text, pd.concat(frames)) if frames else text

    # ---- the answer ----
    def _show(self, result) -> None:
        """The answer on screen, the study and pick it rests on made the dashboard's own, and the downloads."""
        self.result = result
        cancelled = self._cancel.is_set()
        self.phases.value = phases_html(len(PHASES) - 1 if cancelled else len(PHASES), finished=not cancelled)
        self.progress.value = self.progress.max
        self.progress.bar_style = "warning" if cancelled or result.recommended is None else "success"
        self.time_left.value = f"took {clock(result.elapsed_s)}"
        final = result.recommended
        if final is None:
            self.messages.show(result.answer, "error")
            self.answer.value = "<i>No answer: see the message above.</i>"
            return
        conf = result.confirmation or {}
        study = conf.get("study") if conf.get("recommended") is not None else result.study
        self.session.study = study  # the expert tabs open on the study the answer rests on
        run = self.session.run_of(str(final["key"])) or dict(final)
        pick = Pick(key=str(final["key"]), name=run_name(run), study=study, reason=self.answer_words(result),
                    chosen=True, note="The tune's answer.")
        self.session.pick = pick
        self.messages.show("Cancelled: the answer below rests on what was measured." if cancelled else
                           "Done: the answer is below.", "info" if cancelled else "ok")
        self.answer.value = self.answer_html(result, run, study)
        self.downloads.value = self.downloads_html(pick)
        self.more.layout.display = ""

    def answer_html(self, result, run: dict, study: str) -> str:
        from wb_core.faces import pickable

        conf = result.confirmation or {}
        rows = [("Configuration", run_name(run)),
                ("Throughput", interval_words(run, "throughput", "samples/s")),
                ("p99 latency", interval_words(run, "latency_ms_p99", "ms"))]
        if conf.get("verdict"):
            rows.append(("Against the runtime's defaults", said(conf["verdict"])))
        else:
            rows.append(("Against the runtime's defaults", "not confirmed (see the answer)"))
        _, left_out = pickable(self.session.results(), (self.session.study_record() or {}).get("hardware"))
        search_left = self._left_out_of_search(result.study)
        studies = (result.study, study, conf.get("study"))
        notes = [self.in_words(said(n), *studies) for n in (*left_out, *search_left, *result.notes) if n]
        left = ("<b>Left out, and why</b><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in dict.fromkeys(notes))
                + "</ul>") if notes else ""
        return (f"<div class='wb-msg wb-msg-ok wb-answer'><div class='wb-answer-run'>Run "
                f"<b class='wb-answer-name' data-key='{html.escape(str(run['key']))}' "
                f"data-study='{html.escape(study)}'>{html.escape(run_name(run))}</b></div>"
                f"<p class='wb-answer-words'>{html.escape(self.answer_words(result))}</p></div>"
                + key_values(rows) + left
                + f"<div class='wb-caption'>Every configuration the search measured is in study "
                  f"<b>{html.escape(result.study)}</b> (Sweep tab: Previous study).</div>")

    def answer_words(self, result) -> str:
        """The tune's answer as `wb tune` says it, with each run named in words (not by its short label)."""
        import pandas as pd

        from wb_core.faces import stored_runs
        from wb_core.ui.words import worded

        runs = [stored_runs(result.study, self.session.db)]
        if self.session.study != result.study:
            runs.append(self.session.results())
        return worded(said(result.answer), pd.concat([r for r in runs if not r.empty] or [pd.DataFrame()]))

    def _left_out_of_search(self, study: str) -> list[str]:
        from wb_core.faces import pickable, stored_runs, study_record

        if study == self.session.study:
            return []
        df = stored_runs(study, self.session.db)
        return pickable(df, (study_record(study, self.session.db) or {}).get("hardware"))[1]

    def downloads_html(self, pick: Pick) -> str:
        """A download per format of the answer's run, or the sentence why there is none."""
        from wb_core.api import deployment_for_study
        from wb_core.faces import export_formats
        from wb_core.ui.export_panel import format_download

        why = self.session.unfit(pick)
        if why:
            return f"<div class='wb-msg wb-msg-error wb-not-exportable'>{html.escape(why)}</div>"
        dep = deployment_for_study(self.session.db, self.session.study, run_key=pick.key)
        dep.measurement.reason = pick.reason
        caution = self.session.caution(pick)
        links = [format_download(dep, fmt, with_models=fmt != "yaml", titled=True) for fmt in export_formats()]
        return ((f"<div class='wb-msg wb-msg-warn'>⚠ {html.escape(caution)}</div>" if caution else "")
                + "<div class='wb-help-block'>The deployment file, and the same run for each server (with the "
                  "model files in the layout it expects):</div>" + "".join(links))
