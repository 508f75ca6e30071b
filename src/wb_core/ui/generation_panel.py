"""The Sweep tab's text-generation section: a generation sweep of the chosen GenAI folder in the
background (Cancel stops its running worker; the points finished stay stored), the tokens/s vs
p99 TPOT plot, and the recommended configuration in words.

Shown in place of the model sweep when the chosen model is a text-generation folder (the demo
`text-generator` among them); the settings are the generation axes as the axes table declares them.
"""

from __future__ import annotations

import threading

import ipywidgets as w

from wb_core.ui.widgets import MessageArea, PlotArea, button, guarded, section, text, with_help

# The generation axes this section offers (the rest keep their declared defaults).
OFFERED = ("threads", "concurrency", "weight_format", "prompt_len", "output_len")
REQUESTS = 4  # requests measured per point: a quick sweep from the page


class GenerationSection(w.VBox):
    """Runs `api.generate_profile` on DashboardState.model_path into `study_box.value`."""

    def __init__(self, session, study_box: w.Text):
        from wb_core.faces import generation_axes

        self.session = session
        self.study_box = study_box
        self.messages = MessageArea()
        axes = {a.name: a for a in generation_axes()}
        self.boxes = {axes[n].spec: text(axes[n].label, axes[n].text_default, axes[n].help) for n in OFFERED}
        self.run = button("Run generation sweep", "success", "play")
        self.run.add_class("wb-generation-run")
        self.cancel_button = button("Cancel", "danger", "stop")
        self.cancel_button.add_class("wb-generation-cancel")
        self.cancel_button.disabled = True
        self._cancel = threading.Event()
        self.plot = PlotArea()
        self.answer = w.HTML("")
        self.answer.add_class("wb-generation-answer")
        self._thread: threading.Thread | None = None
        self.run.on_click(guarded(self.messages)(self._on_run))
        self.cancel_button.on_click(guarded(self.messages)(self._on_cancel))
        for box in self.boxes.values():
            box.observe(self.messages.clear_error, "value")
        # Shown only for a text-generation model; hidden, it holds no widgets, so that the page (and a
        # person reading it) sees one box per setting label, the model sweep's.
        self._content = [section("Text generation"),
                         w.HTML("A text-generation model is measured by time to first token (TTFT), time per "
                                "output token (TPOT) and output tokens/s."),
                         *[with_help(box, axes[n].help) for n, box in zip(OFFERED, self.boxes.values())],
                         w.HBox([self.run, self.cancel_button]), self.messages, self.plot, self.answer]
        super().__init__([])
        self.add_class("wb-generation")
        self.display(False)

    def display(self, on: bool) -> None:
        """Show the section (a text-generation model is in use) or hide it, widgets and all."""
        self.children = self._content if on else []
        self.layout.display = None if on else "none"

    def values(self) -> dict:
        return {spec: box.value.strip() for spec, box in self.boxes.items()}

    def _on_run(self, *_):
        if self._thread is not None and self._thread.is_alive():
            self.messages.show("A generation sweep is still running; wait for it, or cancel it.", "info")
            return
        study = self.study_box.value.strip()
        if not study:
            self.messages.show("Give the study a name.", "error")
            return
        self._cancel = threading.Event()
        self.run.disabled, self.cancel_button.disabled = True, False
        self.cancel_button.description = "Cancel"
        self.messages.show(f"Profiling text generation into study '{study}'. Building compressed variants and "
                           f"starting the workers takes a while.")
        self.session.measuring = study
        self._thread = threading.Thread(target=self._sweep, args=(self.session.model_path, study, self.values()),
                                        daemon=True, name="wb-generation")
        self._thread.start()

    def _on_cancel(self, *_):
        self._cancel.set()
        self.cancel_button.disabled = True
        self.cancel_button.description = "Cancelling…"
        self.messages.show("Cancelling: the running worker is stopped; finished points stay stored.")

    def _sweep(self, model, study, values) -> None:
        from wb_core.api import generate_profile

        try:
            summary = generate_profile(model, db=self.session.db, study=study, requests=REQUESTS,
                                       cancel=self._cancel, return_frame=False, **values)
            self.show(study)
            if summary.cancelled:
                self.messages.show(f"Cancelled. {summary.line()} Press Run to measure the rest.", "info")
            else:
                self.messages.show(summary.line(), "error" if summary.failed and not summary.ok else "ok")
        except Exception as e:  # shown inline; the thread must not die silently
            self.messages.error(e)
        finally:
            try:
                self.session.refresh()
            finally:  # the thread's very last work: Run comes back only now
                self.session.measuring = ""
                self.cancel_button.description = "Cancel"
                self.run.disabled, self.cancel_button.disabled = False, True

    def show(self, study: str) -> None:
        """The study's plot and its recommendation in words."""
        from wb_core.api import NoRunMeetsConstraints, plots, recommend_generation, results

        df = results(study, self.session.db, "stored")
        if df.empty:
            self.answer.value = ""
            return
        self.plot.show(plots.generation_pareto(df))
        try:
            rec = recommend_generation(study, self.session.db)
        except NoRunMeetsConstraints as e:
            self.answer.value = f"<p>No recommendation: {_e(str(e))}</p>"
            return
        notes = "".join(f"<p>{_e(n)}</p>" for n in rec["notes"])
        self.answer.value = f"<p><b>Recommended:</b> {_e(rec['text'])}</p>{notes}"


def _e(s: str) -> str:
    import html

    return html.escape(s)
