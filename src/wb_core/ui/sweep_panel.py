"""Sweep tab: a widget per sweep dimension, Run in the background, live plot and table, Cancel, reopen.

The sweep runs in a thread so the page stays responsive; every point the runner reports updates
the progress bar, the plot and the table. Cancel stops the worker; every finished point is
already in the database (the runner stores each one as it arrives), so nothing is lost and
pressing Run again resumes.
"""

from __future__ import annotations

import threading

import ipywidgets as w

from wb_core.ui.state import DashboardState
from wb_core.ui.widgets import CSS, MessageArea, button, choices, frame_html, guarded, section, text

TABLE_COLUMNS = ["backend", "precision", "batch_size", "threads", "streams", "cores", "concurrency",
                 "latency_ms_p50", "latency_ms_p99", "throughput", "cpu_util", "rss_mb", "status", "error"]


PLACEHOLDER = "runs"


def thread_ladder(n_cpus: int) -> str:
    """`1,2,4,...,n`: doubling thread counts up to the CPUs this process may use."""
    out, t = [], 1
    while t < n_cpus:
        out.append(t)
        t *= 2
    out.append(n_cpus)
    return ",".join(map(str, out))


def live_figure(df=None):
    """p99 latency vs throughput, one trace per backend and precision, built with its data.

    Data goes into the constructor: a FigureWidget changed before the browser shows it stays empty.
    """
    import plotly.graph_objects as go

    traces = []
    for name, part in _series(df):
        traces.append(go.Scatter(x=list(part["latency_ms_p99"]), y=list(part["throughput"]), mode="markers",
                                 name=name, text=_labels(part), hoverinfo="text+x+y", marker={"size": 10}))
    if not traces:
        traces = [go.Scatter(x=[], y=[], mode="markers", name=PLACEHOLDER, marker={"size": 10})]
    return go.FigureWidget(data=traces, layout=go.Layout(
        title="Measured so far: p99 latency vs throughput", xaxis_title="p99 latency (ms)",
        yaxis_title="throughput (samples/s)", height=380, margin={"t": 50, "b": 40, "l": 60, "r": 20}))


def _series(df):
    if df is None or df.empty:
        return []
    ok = df[(df["status"] == "ok") & df["throughput"].notna() & df["latency_ms_p99"].notna()]
    if ok.empty:
        return []
    names = ok["backend"].astype(str) + " " + ok["precision"].astype(str)
    return [(n, ok[names == n]) for n in sorted(names.unique())]


def _labels(part) -> list[str]:
    return [f"b{r.batch_size} t{r.threads if r.threads == r.threads and r.threads else 'auto'} cores={r.cores}"
            for r in part.itertuples()]


class SweepPanel(w.VBox):
    """Runs sweeps of DashboardState.model_path into DashboardState.study."""

    def __init__(self, session: DashboardState):
        from wb_core.api import available_cpus, field_help, list_backends

        self.session = session
        self.messages = MessageArea()
        cpus = available_cpus()
        self.model_line = w.HTML()
        self.study = text("Study name", tooltip="Results are stored under this name; reusing it resumes.")
        self.backends = choices("Backends", list(list_backends()), ["openvino"], field_help("backends"))
        self.precisions = choices("Precisions", ["fp32", "bf16", "int8"], ["fp32"], field_help("precisions"))
        self.batch = text("Batch sizes", "1,8", field_help("batch_sizes"))
        self.threads = text("Threads", thread_ladder(len(cpus)), field_help("threads"))
        self.cores = text("Cores", "none", field_help("cores"), f"none, all, first1 … first{len(cpus)}, 0-1")
        self.streams = text("Streams (OpenVINO)", "auto", field_help("streams"))
        self.hints = text("Hint (OpenVINO)", "none", field_help("hints"))
        self.pinning = text("CPU pinning (OV)", "auto", field_help("cpu_pinning"))
        self.inter_op = text("Inter-op threads (TF)", "auto", field_help("inter_op_threads"))
        self.onednn = text("oneDNN (TF)", "auto", field_help("onednn"))
        self.concurrency = text("Concurrency", "auto", field_help("concurrency"))
        self.max_time = w.BoundedFloatText(value=2.0, min=0.2, max=600, step=0.5, description="Seconds per point",
                                           style={"description_width": "150px"})
        self.run = button("Run", "success", "play")
        self.cancel_button = button("Cancel", "danger", "stop")
        self.cancel_button.disabled = True
        self.progress = w.IntProgress(value=0, min=0, max=1, description="Progress", bar_style="info",
                                      layout=w.Layout(width="520px"))
        self.progress_text = w.Label("")
        self.studies = w.Dropdown(description="Previous study", style={"description_width": "150px"},
                                  layout=w.Layout(width="520px"))
        self.open_button = button("Open", icon="folder-open")
        self.plot_box = w.Box([live_figure()])
        self.table = w.HTML()
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._figure = self.plot_box.children[0]

        self.run.on_click(guarded(self.messages)(self._on_run))
        self.cancel_button.on_click(guarded(self.messages)(self._on_cancel))
        self.open_button.on_click(guarded(self.messages)(self._on_open))
        session.observe(self._on_model, "model_path")
        self._on_model()
        self.refresh_studies()
        advanced = w.Accordion(children=[w.VBox([self.streams, self.hints, self.pinning, self.inter_op,
                                                 self.onednn, self.concurrency])],
                               titles=("More settings",))
        super().__init__([
            w.HTML(CSS), section("Sweep"), self.model_line, self.study, self.backends, self.precisions,
            self.batch, self.threads, self.cores, self.max_time, advanced,
            w.HBox([self.run, self.cancel_button]), w.HBox([self.progress, self.progress_text]), self.messages,
            w.HBox([self.studies, self.open_button]), self.plot_box, section("Runs"), self.table])
        self.add_class("wb-sweep-panel")

    # ---- model and studies ----
    def _on_model(self, *_):
        from wb_core.api import default_study_name

        if self.session.model_path:
            self.model_line.value = f"Model: <b>{self.session.model_label or self.session.model_path}</b>"
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
        rec = self.session.study_record()
        if rec and rec.get("model_path"):
            self.session.model_label = rec["model_path"]
            self.session.model_path = rec["model_path"]
        self.study.value = name
        self.messages.show(f"Opened study '{name}'. Run resumes it; Explore and Export use it.", "ok")

    def show_study(self, name: str) -> None:
        """Make `name` the open study and draw what it holds."""
        self.session.study = name
        self._redraw(rebuild=True)
        self.session.refresh()

    # ---- running ----
    def spec_values(self) -> dict:
        """The sweep as keyword arguments of wb_core.api.profile (validated before a thread starts)."""
        from wb_core.api import SweepSpec

        values = dict(backends=self.backends.selected(), precisions=self.precisions.selected(),
                      batch_sizes=self.batch.value, threads=self.threads.value, cores=self.cores.value,
                      streams=self.streams.value, hints=self.hints.value, cpu_pinning=self.pinning.value,
                      inter_op_threads=self.inter_op.value, onednn=self.onednn.value,
                      concurrency=self.concurrency.value)
        SweepSpec(**values)  # raises ConfigError naming the field
        return values

    def _on_run(self, *_):
        from wb_core.api import MeasureSettings, SweepSpec

        if self._thread is not None and self._thread.is_alive():
            self.messages.show("A sweep is already running; cancel it first.", "info")
            return
        if not self.session.model_path:
            self.messages.show("Choose a model in the Model tab first (or open a previous study).", "error")
            return
        study = self.study.value.strip()
        if not study:
            self.messages.show("Give the study a name.", "error")
            return
        values = self.spec_values()
        t = float(self.max_time.value)
        settings = MeasureSettings(max_time_s=t, warmup_s=min(0.5, t / 2), window_s=min(0.5, t / 3))
        planned = len(SweepSpec(**values).expand())
        if study in [r["name"] for r in self.session.studies()]:
            self.show_study(study)
        else:
            self._start_empty(study)
        self.progress.max, self.progress.value, self.progress.bar_style = planned, 0, "info"
        self.progress_text.value = f"0 / {planned}"
        self._cancel = threading.Event()
        self.run.disabled, self.cancel_button.disabled = True, False
        self.messages.show(f"Profiling {planned} configuration(s) into study '{study}'…")
        self._thread = threading.Thread(target=self._sweep, args=(self.session.model_path, study, values, settings),
                                        daemon=True, name="wb-sweep")
        self._thread.start()

    def _start_empty(self, study: str) -> None:
        self.session.study = study
        self._redraw(rebuild=True)

    def _on_cancel(self, *_):
        self._cancel.set()
        self.cancel_button.disabled = True
        self.messages.show("Cancelling: the running worker is stopped; finished points stay stored.")

    def _sweep(self, model, study, values, settings):
        from wb_core.api import profile

        try:
            summary = profile(model, db=self.session.db, study=study, settings=settings, on_point=self._on_point,
                              cancel=self._cancel, return_frame=False, **values)
            self._finish(summary)
        except Exception as e:  # shown inline; the thread must not die silently
            self.messages.error(e)
            self.progress.bar_style = "danger"
        finally:
            self.run.disabled, self.cancel_button.disabled = False, True
            try:
                self._redraw(rebuild=False)
                self.refresh_studies()
                self.session.refresh()
            except Exception as e:
                self.messages.error(e)

    def _finish(self, summary) -> None:
        if summary.skipped_done:
            self.progress.value = min(self.progress.max, self.progress.value + summary.skipped_done)
        line = summary.line()
        if summary.cancelled:
            self.progress.bar_style = "warning"
            self.messages.show(f"Cancelled. {line} Press Run to measure the rest.", "info")
        elif summary.failed:
            self.progress.bar_style = "danger" if not summary.ok else "warning"
            first = "; ".join(summary.errors[:3])
            self.messages.show(f"{line} First failures: {first}", "error")
        else:
            self.progress.bar_style = "success"
            self.messages.show(f"{line} See the Explore tab for the recommendation.", "ok")

    def _on_point(self, point: dict) -> None:
        try:
            self.session.add_point(point)
            self.progress.value = min(self.progress.max, self.progress.value + 1)
            self.progress_text.value = f"{self.progress.value} / {self.progress.max}"
            self._redraw(rebuild=False)
        except Exception as e:  # never break the runner's loop over a drawing problem
            self.messages.error(e)

    # ---- drawing ----
    def _redraw(self, rebuild: bool) -> None:
        df = self.session.results()
        self.table.value = frame_html(df, TABLE_COLUMNS) if not df.empty else "<i>No runs yet.</i>"
        if rebuild:
            self._figure = live_figure(df)
            self.plot_box.children = [self._figure]
            return
        series = _series(df)
        fig = self._figure
        with fig.batch_update():
            by_name = {t.name: t for t in fig.data}
            for name, part in series:
                spare = by_name.get(PLACEHOLDER)
                if name not in by_name and spare is not None and not spare.x:
                    spare.name = name  # the empty first trace takes the first series
                    by_name[name] = by_name.pop(PLACEHOLDER)
                if name not in by_name:
                    fig.add_scatter(x=[], y=[], mode="markers", name=name, hoverinfo="text+x+y", marker={"size": 10})
                    by_name[name] = fig.data[-1]
                trace = by_name[name]
                trace.x, trace.y, trace.text = list(part["latency_ms_p99"]), list(part["throughput"]), _labels(part)
