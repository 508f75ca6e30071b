"""Export tab: pick a format, preview the files, download them, or write them to a folder; serve the
run with a real Triton server and measure it (the serve check).

The run exported is the one the Explore tab chose (the recommendation, or a point the user
clicked); with none chosen, the study's recommended run without limits. Downloads and folders
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
from wb_core.ui.widgets import CSS, MessageArea, button, guarded, section, text


def download_link(filename: str, data: bytes, label: str) -> str:
    """An HTML link that saves `data` as `filename` in the browser (no server round trip)."""
    b64 = base64.b64encode(data).decode()
    return (f'<a class="wb-download jupyter-button mod-primary" download="{html.escape(filename)}" '
            f'href="data:application/octet-stream;base64,{b64}" '
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
        from wb_core.api import EXPORTERS

        self.session = session
        self.messages = MessageArea()
        self.format = w.Dropdown(options=[(f"{k}: {m.DESCRIPTION}", k) for k, m in EXPORTERS.items()], value="yaml",
                                 description="Format", style={"description_width": "150px"},
                                 layout=w.Layout(width="820px"))
        self.run_line = w.HTML()
        self.preview = w.HTML()
        self.download = w.HTML()
        self.folder = text("Folder on the server", "deployment", "Files are written here (created if missing).")
        self.with_models = w.Checkbox(value=True, description="Include the model files (the format's repository "
                                                              "layout, ready to copy to a server)", indent=False,
                                      layout=w.Layout(width="auto"))
        self.write = button("Write files", icon="save")
        self.serve = button("Serve and measure", icon="server")
        self.serve_messages = MessageArea()
        self.serve_result = w.HTML()
        self._serving: threading.Thread | None = None
        self._files: dict[str, str] = {}
        self._dep = None
        self.format.observe(guarded(self.messages)(self.render), "value")
        self.with_models.observe(guarded(self.messages)(self.render), "value")
        self.serve.on_click(guarded(self.serve_messages)(self._on_serve))
        session.observe(guarded(self.messages)(self.render), ["selected_key", "results_version", "study"])
        self.write.on_click(guarded(self.messages)(self._on_write))
        serve_help = w.HTML("<i>Starts a real tritonserver on 127.0.0.1 with this run's instances, pinning and "
                            "batching (Python backend running OpenVINO), drives it at the run's concurrency or rate, "
                            "and stores served against predicted throughput and latency.</i>")
        super().__init__([w.HTML(CSS), section("Export"), self.run_line, self.format, self.with_models, self.messages,
                          self.download, section("Preview"), self.preview, section("Write to a folder"),
                          w.HBox([self.folder, self.write]), section("Serve check"), serve_help, self.serve,
                          self.serve_messages, self.serve_result])
        self.add_class("wb-export-panel")
        guarded(self.messages)(self.render)()

    def deployment(self):
        from wb_core.api import deployment_for_study

        s = self.session
        dep = deployment_for_study(s.db, s.study, run_key=s.selected_key or None)
        if s.selected_reason and s.selected_key:
            dep.measurement.reason = s.selected_reason
        return dep

    def render(self, *_):
        from wb_core.api import render

        self.messages.clear()
        self._files, self._dep = {}, None
        if not self.session.study or self.session.results().empty:
            self.run_line.value = "<i>Nothing to export yet: run a sweep or open a study first.</i>"
            self.preview.value = self.download.value = ""
            return
        self._dep = self.deployment()
        how = "recommended" if self.session.selected_reason or not self.session.selected_key else "chosen in Explore"
        self.run_line.value = (f"Run <code>{html.escape(self._dep.measurement.run_key)}</code> of study "
                               f"<b>{html.escape(self.session.study)}</b> ({how}).")
        result = render(self._dep, self.format.value)
        self._files = dict(result.files)
        parts = [f"<b>{html.escape(name)}</b><div class='wb-pre'>{html.escape(body)}</div>"
                 for name, body in self._files.items()]
        if result.notes:
            parts.append("<b>Notes</b><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in result.notes) + "</ul>")
        self.preview.value = "".join(parts)
        self.download.value = self._download_link()
        self.serve_result.value = serve_checks_html(self.session.db, self.session.study, self._dep.measurement.run_key)

    def _download_link(self) -> str:
        from wb_core.api import model_files, zip_bundle

        fmt, dep = self.format.value, self._dep
        if fmt == "yaml" or not self.with_models.value:
            name, data = bundle(self._files, f"{dep.serving_name}-{fmt}.zip")
            return download_link(name, data, f"Download {name}")
        size = sum(src.stat().st_size for _, src in model_files(dep, fmt, []))
        if size > DOWNLOAD_MODEL_LIMIT:
            name, data = bundle(self._files, f"{dep.serving_name}-{fmt}.zip")
            return (download_link(name, data, f"Download {name} (without the model files)")
                    + f"<div><i>The model files ({size / 2**20:,.0f} MB) are too large for a browser download: "
                      "write them to a folder below, or run <code>wb export --bundle</code>.</i></div>")
        name, data, notes = zip_bundle(dep, fmt, with_models=True)
        link = download_link(name, data, f"Download {name}")
        return link + "".join(f"<div><i>{html.escape(n)}</i></div>" for n in notes)

    def _on_write(self, *_):
        from wb_core.api import export

        if self._dep is None:
            self.messages.show("Nothing to write yet: run a sweep or open a study first.", "error")
            return
        folder = self.folder.value.strip()
        if not folder:
            self.messages.show("Type the folder to write into.", "error")
            return
        results = export(self._dep, self.format.value, folder, bundle=self.with_models.value)
        res = results[self.format.value]
        models = f" and {len(res.model_files)} model file(s)" if res.model_files else ""
        self.messages.show(f"Wrote {', '.join(self._files)}{models} into '{folder}'.", "ok")

    def _on_serve(self, *_):
        if self._dep is None:
            self.serve_messages.show("Nothing to serve yet: run a sweep or open a study first.", "error")
            return
        if self._serving is not None and self._serving.is_alive():
            self.serve_messages.show("A serve check is running; wait for it to finish.", "error")
            return
        key = self._dep.measurement.run_key
        self.serve.disabled = True
        self.serve_messages.show(f"Serving run {key} with tritonserver and measuring it…")
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


def serve_checks_html(db, study: str, run_key: str) -> str:
    """The stored serve checks of one run, newest first: predicted vs served, or why it failed."""
    from wb_core.api import load_serve_checks

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
    return ("<table class='wb-table'><tr><th>checked</th><th>throughput /s: predicted → served</th>"
            "<th>p50 ms</th><th>p99 ms</th></tr>" + "".join(rows) + "</table>")


def _num(v) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
