"""Export tab: pick a format, preview the files, download them, or write them to a folder.

The run exported is the one the Explore tab chose (the recommendation, or a point the user
clicked); with none chosen, the study's recommended run without limits.
"""

from __future__ import annotations

import base64
import html
import io
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
        self.write = button("Write files", icon="save")
        self._files: dict[str, str] = {}
        self._dep = None
        self.format.observe(guarded(self.messages)(self.render), "value")
        session.observe(guarded(self.messages)(self.render), ["selected_key", "results_version", "study"])
        self.write.on_click(guarded(self.messages)(self._on_write))
        super().__init__([w.HTML(CSS), section("Export"), self.run_line, self.format, self.messages, self.download,
                          section("Preview"), self.preview, section("Write to a folder"),
                          w.HBox([self.folder, self.write])])
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
        name, data = bundle(self._files, f"{self._dep.serving_name}-{self.format.value}.zip")
        self.download.value = download_link(name, data, f"Download {name}")

    def _on_write(self, *_):
        from wb_core.api import export

        if self._dep is None:
            self.messages.show("Nothing to write yet: run a sweep or open a study first.", "error")
            return
        folder = self.folder.value.strip()
        if not folder:
            self.messages.show("Type the folder to write into.", "error")
            return
        export(self._dep, self.format.value, folder)
        self.messages.show(f"Wrote {', '.join(self._files)} into '{folder}'.", "ok")
