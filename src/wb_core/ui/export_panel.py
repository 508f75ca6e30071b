"""Export tab: pick a format, preview the files, download them, or write them to a folder; download
the study's HTML report; serve the run with a real Triton server and measure it (the serve check).

The run exported is the one the Explore tab chose (the recommendation under the user's limits, or
a run the user picked with "Export this run"); with none chosen, the study's recommended run
without limits. The tab says which run (by name) and why. Nothing is rendered until the tab is
first opened (`shown()`). Downloads and folders
hold the model files in the format's layout (the export package builds them: `zip_bundle`,
`export(..., bundle=True)`); the serve check is `wb_core.api.serve_check`.
"""

from __future__ import annotations

import base64
import html
import io
import threading
import zipfile

import ipywidgets as w

from wb_core.ui.state import DashboardState
from wb_core.ui.widgets import CSS, MessageArea, button, guarded, said, section, text, with_help
from wb_core.ui.words import plural, run_name


def format_title(key: str, description: str) -> str:
    """A format as people know it (its declared title), else its exporter's description."""
    from wb_core.faces import export_formats

    return export_formats(titles=True).get(key) or description.split(":")[0]


def download_link(filename: str, data: bytes, label: str, mime: str = "application/octet-stream") -> str:
    """An HTML link that saves `data` as `filename` in the browser (no server round trip)."""
    b64 = base64.b64encode(data).decode()
    return (f'<a class="wb-download jupyter-button mod-primary" download="{html.escape(filename)}" '
            f'href="data:{mime};base64,{b64}" '
            f'style="padding:6px 12px;text-decoration:none;display:inline-block">⬇ {html.escape(label)}</a>')


# Model files above this size stay out of the browser download (a data: link); write them to a folder.
DOWNLOAD_MODEL_LIMIT = 64 << 20


def bundle(files: dict[str, str], zip_name: str) -> tuple[str, bytes]:
    """One file as itself; several as a zip."""
    if len(files) == 1:
        (name, body), = files.items()
        return name.split("/")[-1], body.encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, body in files.items():
            zf.writestr(name, body)
    return zip_name, buf.getvalue()


class ExportPanel(w.VBox):
    """Renders DashboardState.selected_key of DashboardState.study in the chosen format."""

    def __init__(self, session: DashboardState):
        from wb_core.faces import export_formats

        self.session = session
        self.messages = MessageArea()
        self.format = w.Dropdown(options=[(format_title(k, d), k) for k, d in export_formats().items()], value="yaml",
                                 description="Format", style={"description_width": "150px"},
                                 layout=w.Layout(width="620px"))
        self.run_line = w.HTML()
        self.run_line.add_class("wb-export-run")
        self.preview = w.HTML()
        self.preview.add_class("wb-preview")  # the files as they are (their own field names)
        self.download = w.HTML()
        self.folder = text("Folder on the server", str(default_folder()), "Files are written here (created if missing).")
        self.blocked_text = w.HTML()
        self.blocked_text.add_class("wb-export-blocked")
        self.with_models = w.Checkbox(value=True, description="Include the model files (the format's repository "
                                                              "layout, ready to copy to a server)", indent=False,
                                      layout=w.Layout(width="auto"))
        self.write = button("Write files", icon="save")
        self.report_button = button("Build the report", icon="file-text-o",
                                    tooltip="One HTML page with the study's results, plots and recommendation.")
        self.report_messages = MessageArea()
        self.report_download = w.HTML()
        self._reporting: threading.Thread | None = None
        self.serve = button("Serve and measure", icon="server")
        self.serve_messages = MessageArea()
        self.serve_result = w.HTML()
        self._serving: threading.Thread | None = None
        self._files: dict[str, str] = {}
        self._dep = None
        self._shown = False
        self._stale = True
        self.format.observe(guarded(self.messages)(self.render), "value")
        self.with_models.observe(guarded(self.messages)(self.render), "value")
        self.serve.on_click(guarded(self.serve_messages)(self._on_serve))
        self.report_button.on_click(guarded(self.report_messages)(self._on_report))
        session.observe(guarded(self.messages)(self._on_study), "study")
        session.observe(guarded(self.messages)(self.render), ["pick", "results_version", "measuring"])
        session.observe(self._forget_report, ["results_version", "pick", "measuring"])
        self.write.on_click(guarded(self.messages)(self._on_write))
        serve_help = w.HTML("<div class='wb-help-block'>Starts a real Triton server on this machine with this "
                            "run's instances, pinning and batching (its Python backend running OpenVINO), "
                            "sends it requests at the run's concurrency or rate, and stores what it served "
                            "against what the measurement predicted.</div>")
        super().__init__([w.HTML(CSS), section("Export"), self.run_line, self.blocked_text,
                          with_help(self.format, "The serving system you deploy to; the preview below shows "
                                                 "the files it gets."),
                          _flush(with_help(self.with_models, "Adds the model in the layout the server expects; "
                                                             "without it you get only the configuration files.")),
                          self.messages, self.download, section("Preview"), self.preview,
                          section("Write to a folder"),
                          w.HBox([with_help(self.folder, "A folder on the machine running the dashboard."),
                                  self.write]),
                          section("Report"),
                          w.HTML("<div class='wb-help-block'>The whole study on one HTML page (results table, "
                                 "plots, recommendation), to keep or send to someone.</div>"),
                          self.report_button, self.report_messages, self.report_download,
                          section("Serve check"), serve_help, self.serve,
                          self.serve_messages, self.serve_result])
        self.add_class("wb-export-panel")

    def shown(self) -> None:
        """The tab is on screen: render what changed since (the first time: everything)."""
        self._shown = True
        if self._stale:
            guarded(self.messages)(self.render)()

    def _on_study(self, *_):
        """Another study: nothing of the old one stays (messages, files, links, the report, serve checks)."""
        for area in (self.messages, self.report_messages, self.serve_messages):
            area.clear()
        self.report_download.value = self.download.value = self.preview.value = self.serve_result.value = ""
        self._files, self._dep = {}, None
        self.render()

    def blocked(self) -> str:
        """Why nothing may be exported, reported or served now, in one sentence ("" when all is well)."""
        return self.session.unfit()

    def _set_blocked(self, why: str) -> None:
        caution = "" if why else self.session.caution()
        self.blocked_text.value = (f"<div class='wb-msg wb-msg-error wb-not-exportable'>{html.escape(why)}</div>"
                                   if why else f"<div class='wb-msg wb-msg-warn wb-export-caution'>⚠ "
                                               f"{html.escape(caution)}</div>" if caution else "")
        for control in (self.write, self.report_button, self.serve):
            control.disabled = bool(why) or (control is self.report_button and self._reporting is not None
                                             and self._reporting.is_alive()) or (
                control is self.serve and self._serving is not None and self._serving.is_alive())
            control.tooltip = why

    def deployment(self):
        """The deployment of the dashboard's pick (Explore's recommendation or chosen run), its reason in words."""
        from wb_core.api import deployment_for_study

        s = self.session
        pick = s.current_pick()
        dep = deployment_for_study(s.db, s.study, run_key=pick.key or None)
        if pick.key and pick.reason:
            dep.measurement.reason = pick.reason
        return dep

    def render(self, *_):
        if not self._shown:
            self._stale = True
            return
        self._stale = False
        from wb_core.api import render

        self.messages.clear()
        self._files, self._dep = {}, None
        self.preview.value = self.download.value = ""
        if not self.session.study or self.session.results().empty:
            self.run_line.value = ("<i>Nothing to export yet: press Tune on the Start tab, run a sweep, or open a "
                                   "study.</i>")
            self._set_blocked("")
            for control in (self.write, self.report_button, self.serve):
                control.disabled = True
            return
        why = self.blocked()
        self._set_blocked(why)
        if why:
            pick = self.session.current_pick()
            self.run_line.value = (f"<div class='wb-msg wb-msg-info'>The pick of study "
                                   f"<b>{html.escape(self.session.study)}</b> is "
                                   f"<b class='wb-export-name' data-key='{html.escape(pick.key)}'>"
                                   f"{html.escape(pick.name)}</b>; nothing can be downloaded, written, reported "
                                   f"or served for it:</div>")
            return
        self._dep = self.deployment()
        self.run_line.value = self.run_line_html()
        result = render(self._dep, self.format.value)
        self._files = dict(result.files)
        parts = [f"<b>{html.escape(name)}</b><div class='wb-pre'>{html.escape(body)}</div>"
                 for name, body in self._files.items()]
        if result.notes:
            parts.append("<b>Notes</b><ul>" + "".join(f"<li>{html.escape(said(n))}</li>" for n in result.notes) + "</ul>")
        self.preview.value = "".join(parts)
        self.download.value = self._download_link()
        self.serve_result.value = serve_checks_html(self.session.db, self.session.study, self._dep.measurement.run_key)

    def run_line_html(self) -> str:
        """Which run is exported, by its name, and why: recommended under the limits or chosen by the user."""
        s, dep = self.session, self._dep
        pick = s.current_pick()
        reason = pick.reason or ""
        if pick.chosen:
            why = "you chose it with “Export this run” in the Explore tab."
        elif s.pick.key:
            why = f"recommended under Explore's limits ({pick.limits()}). {reason}"
        else:
            why = f"recommended with no limits (set limits in the Explore tab). {reason}"
        run = self._run_record(dep.measurement.run_key)
        name = run_name(run) if run is not None else dep.serving_name
        changed = (f"<div class='wb-msg wb-msg-info wb-pick-changed'>{html.escape(pick.note)}</div>"
                   if pick.note and pick.key == s.pick.key else "")
        return (f"<div class='wb-msg wb-msg-info'>Exporting <b class='wb-export-name' "
                f"data-key='{html.escape(dep.measurement.run_key)}'>{html.escape(name)}</b> of study "
                f"<b>{html.escape(s.study)}</b>: <span class='wb-export-why'>{html.escape(why.strip())}</span></div>"
                + changed)

    def _run_record(self, key: str) -> dict | None:
        df = self.session.results()
        if df.empty or "key" not in df.columns:
            return None
        rows = df[df["key"] == key]
        return rows.iloc[0].to_dict() if len(rows) else None

    def _forget_report(self, *_):
        if self.report_download.value:
            self.report_messages.clear()
        self.report_download.value = ""

    def _on_report(self, *_):
        s = self.session
        if not s.study or s.results().empty:
            self.report_messages.show("Nothing to report yet: run a sweep or open a study first.", "error")
            return
        why = self.blocked()
        if why:
            self.report_messages.show(why, "error")
            return
        if self._reporting is not None and self._reporting.is_alive():
            self.report_messages.show("The report is being built; wait for it to finish.", "error")
            return
        self.report_button.disabled = True
        self.report_download.value = ""
        self.report_messages.show(f"Building the report of study {s.study}: reading its results and drawing "
                                  f"the plots…")
        self._reporting = threading.Thread(target=self._build_report, args=(s.db, s.study, s.current_pick()),
                                           daemon=True, name="wb-report")
        self._reporting.start()

    def _build_report(self, db: str, study: str, pick) -> None:
        """The report under Explore's limits, naming the run Export writes (the dashboard's pick)."""
        from wb_core.faces import build_report

        try:
            text = build_report(db, study, constraints=pick.constraints, objective=pick.objective,
                                pick=pick.key or None, pick_reason=pick.reason or None)
            data = text.encode("utf-8")
            if self.session.study != study or self.session.current_pick().key != pick.key or (
                    self.session.unfit()):
                self.report_messages.show("The study or its pick changed while the report was built: press "
                                          "“Build the report” again.", "info")
                return
            name = f"{_file_stem(study)}-report.html"
            self.report_download.value = download_link(name, data, f"Download {name}", "text/html")
            self.report_messages.show(f"Report ready ({len(data) / 2**20:.1f} MB): download it below.", "ok")
        except Exception as e:  # shown inline (one sentence)
            self.report_messages.error(e)
        finally:
            self.report_button.disabled = False

    def _download_link(self) -> str:
        return format_download(self._dep, self.format.value, self.with_models.value, self._files)

    def _on_write(self, *_):
        from wb_core.api import export

        why = self.blocked()
        if why or self._dep is None:
            self.messages.show(why or "Nothing to write yet: run a sweep or open a study first.", "error")
            return
        folder = self.folder.value.strip()
        if not folder:
            self.messages.show("Type the folder to write into.", "error")
            return
        from pathlib import Path

        where = Path(folder).expanduser().resolve()
        results = export(self._dep, self.format.value, where, bundle=self.with_models.value)
        res = results[self.format.value]
        models = f" and {plural(len(res.model_files), 'model file')}" if res.model_files else ""
        self.messages.show(f"Wrote {', '.join(self._files)}{models} into {where}.", "ok")

    def _on_serve(self, *_):
        why = self.blocked()
        if why:
            self.serve_messages.show(why, "error")
            return
        if self._dep is None:
            self.serve_messages.show("Nothing to serve yet: run a sweep or open a study first.", "error")
            return
        if self._serving is not None and self._serving.is_alive():
            self.serve_messages.show("A serve check is running; wait for it to finish.", "error")
            return
        key = self._dep.measurement.run_key
        self.serve.disabled = True
        run = self._run_record(key)
        self.serve_messages.show(f"Serving {run_name(run) if run is not None else key} with Triton and "
                                 f"measuring it…")
        self._serving = threading.Thread(target=self._serve_check, args=(key,), daemon=True, name="wb-serve-check")
        self._serving.start()

    def _serve_check(self, key: str) -> None:
        from wb_core.api import serve_check

        s = self.session
        try:
            res = serve_check(s.study, key, s.db)
            t = res.ratio.get("throughput")
            self.serve_messages.show(f"Served at {t:.0%} of the predicted throughput." if t is not None
                                     else "Served; see the table.", "ok")
        except Exception as e:  # shown inline (one sentence); the check is stored as failed
            self.serve_messages.error(e)
        finally:
            self.serve.disabled = False
            self.serve_result.value = serve_checks_html(s.db, s.study, key)


def format_download(dep, fmt: str, with_models: bool = True, files: dict[str, str] | None = None,
                    titled: bool = False) -> str:
    """A download link of `dep` in format `fmt`: one file as itself, several (or with the model files) as a zip;
    model files too large for a browser download are left out, saying so."""
    from wb_core.api import render
    from wb_core.faces import model_files, zip_bundle

    files = files if files is not None else dict(render(dep, fmt).files)
    def label(name: str) -> str:
        return format_title(fmt, fmt) if titled else f"Download {name}"

    if fmt == "yaml" or not with_models:
        name, data = bundle(files, f"{dep.serving_name}-{fmt}.zip")
        return download_link(name, data, label(name))
    size = sum(src.stat().st_size for _, src in model_files(dep, fmt, []))
    if size > DOWNLOAD_MODEL_LIMIT:
        name, data = bundle(files, f"{dep.serving_name}-{fmt}.zip")
        return (download_link(name, data, f"{label(name)} (without the model files)")
                + f"<div><i>The model files ({size / 2**20:,.0f} MB) are too large for a browser download: "
                  "give a <b>Folder on the server</b> in the Export tab, keep <b>Include the model files</b> "
                  "ticked and press <b>Write files</b>.</i></div>")
    name, data, notes = zip_bundle(dep, fmt, with_models=True)
    return download_link(name, data, label(name)) + "".join(
        f"<div><i>{html.escape(said(n))}</i></div>" for n in notes)


def default_folder():
    """Where files are written unless the user says otherwise: a folder in their home, never the app's own."""
    from pathlib import Path

    return Path.home() / "wb-deployments"


def serve_checks_html(db, study: str, run_key: str) -> str:
    """The stored serve checks of one run, newest first: predicted vs served, or why it failed."""
    from wb_core.faces import load_serve_checks

    try:
        checks = [c for c in load_serve_checks(db, study) if c.get("run_key") == run_key]
    except Exception:  # no database yet, or one the dashboard cannot read: nothing to show
        return ""
    if not checks:
        return "<i>No serve check of this run yet.</i>"
    rows = []
    for c in checks[:5]:
        if c.get("status") != "ok":
            rows.append(f"<tr><td>{html.escape(str(c.get('created_at') or ''))}</td>"
                        f"<td colspan='3'>failed: {html.escape(str(c.get('error')))}</td></tr>")
            continue
        p, v, r = c.get("predicted") or {}, c.get("served") or {}, c.get("ratio") or {}
        cells = []
        for key in ("throughput", "latency_ms_p50", "latency_ms_p99"):
            ratio = r.get(key)
            cells.append(f"{_num(p.get(key))} → {_num(v.get(key))}"
                         + (f" ({ratio:.2f}x)" if ratio is not None else ""))
        rows.append(f"<tr><td>{html.escape(str(c.get('created_at') or ''))}</td>"
                    + "".join(f"<td>{html.escape(x)}</td>" for x in cells) + "</tr>")
    return ("<table class='wb-table'><tr><th>Checked</th><th>Throughput (samples/s): predicted → served</th>"
            "<th>p50 latency (ms)</th><th>p99 latency (ms)</th></tr>" + "".join(rows) + "</table>"
            "<div class='wb-caption wb-modes'>Predicted: the run's measurement, closed loop in this process. "
            "Served: the same settings served through a real Triton server, so network and server overhead are "
            "included; the ratio says how much of the prediction the server delivered.</div>")


def _num(v) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _file_stem(name: str) -> str:
    """A study name as a safe file name."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "study"


def _flush(box):
    """A help line under a control that has no description column (a checkbox) starts at its left."""
    box.add_class("wb-field-flush")
    return box
