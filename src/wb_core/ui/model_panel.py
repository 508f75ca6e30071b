"""Model tab: pick a bundled demo, a path on the server or an upload; show its inputs and the CPU."""

from __future__ import annotations

import html

import ipywidgets as w

from wb_core.ui.state import DashboardState
from wb_core.ui.uploads import MODEL_SUFFIXES, save_upload, upload_limit_mb
from wb_core.ui.widgets import CSS, MessageArea, button, guarded, key_values, section, text

SOURCES = ("Demo model", "Path on the server", "Upload")


def hardware_html() -> str:
    """The CPU as a table: model, cores, caches, ISA flags (present ones in bold) and peak FLOP/s."""
    from wb_core.api import hardware_info

    hw = hardware_info()
    flags = " ".join(f"<b>{html.escape(k)}</b>" if v else f"<span style='color:#aaa'>{html.escape(k)}</span>"
                     for k, v in hw.flags.items())
    peak = ", ".join(f"{p} {v:,.0f}" for p, v in hw.peak_gflops.items())
    rows = [("CPU", f"{hw.cpu_model} ({hw.architecture})"),
            ("Cores", f"{hw.physical_cores} physical, {hw.logical_cores} logical; usable CPUs "
                      f"{', '.join(map(str, hw.available_cpus))}"),
            ("Sockets / NUMA", f"{hw.sockets} / {hw.numa_nodes}"),
            ("Caches", f"L1d {hw.l1d_kb} KiB, L2 {hw.l2_kb} KiB, L3 {hw.l3_kb} KiB"),
            ("Memory", f"{hw.memory_gb} GiB"),
            ("Peak GFLOP/s", peak)]
    table = key_values(rows)
    return table.replace("</table>", f"<tr><td><b>ISA flags</b></td><td>{flags}</td></tr></table>")


def inputs_html(info: dict) -> str:
    rows = [("Path", info["path"]), ("Format", info["format"])]
    rows += [(f"Input {i + 1}", spec.describe()) for i, spec in enumerate(info["inputs"])]
    return key_values(rows)


class ModelPanel(w.VBox):
    """Chooses the model the Sweep tab profiles (DashboardState.model_path)."""

    def __init__(self, session: DashboardState):
        from wb_core.api import DEMOS

        self.session = session
        self.messages = MessageArea()
        self.source = w.ToggleButtons(options=SOURCES, value=SOURCES[0], description="Source", style={"button_width": "150px"})
        self.demo = w.Dropdown(options=[(f"{k}: {v}", k) for k, v in DEMOS.items()], value="lenet-digits",
                               description="Demo", layout=w.Layout(width="620px"))
        self.path = text("Path", placeholder="/data/models/resnet50.onnx or a SavedModel folder")
        limit = upload_limit_mb()
        self.upload = w.FileUpload(accept=",".join(MODEL_SUFFIXES), multiple=True,
                                   description=f"Choose files (≤ {limit} MB)", layout=w.Layout(width="260px"))
        self.upload_help = w.HTML(".onnx, .keras, an IR's .xml with its .bin, or a SavedModel folder zipped.")
        self.use = button("Use this model", "primary", "check")
        self.model_info = w.HTML()
        self.hardware = w.HTML()
        self.choice = w.VBox()
        self.source.observe(self._on_source, "value")
        self.use.on_click(guarded(self.messages)(self._on_use))
        self._on_source()
        super().__init__([w.HTML(CSS), section("Model"), self.source, self.choice,
                          w.HBox([self.use]), self.messages, self.model_info, section("Hardware"), self.hardware])
        self.add_class("wb-model-panel")
        guarded(self.messages)(self._show_hardware)()

    def _show_hardware(self):
        self.hardware.value = hardware_html()

    def _on_source(self, *_):
        self.choice.children = {SOURCES[0]: [self.demo], SOURCES[1]: [self.path],
                                SOURCES[2]: [w.HBox([self.upload, self.upload_help])]}[self.source.value]

    def _on_use(self, *_):
        self.messages.show("Reading the model…")
        self.model_info.value = ""
        if self.source.value == SOURCES[0]:
            model, label = self.demo.value, self.demo.value
        elif self.source.value == SOURCES[1]:
            model = self.path.value.strip()
            if not model:
                self.messages.show("Type the path of a model on the server first.", "error")
                return
            label = model
        else:
            files = list(self.upload.value)
            model = str(save_upload(files))
            label = ", ".join(f["name"] for f in files)
        self.select(model, label)

    def select(self, model: str, label: str | None = None) -> None:
        """Inspect `model` (a demo name or a path) and make it the one the Sweep tab profiles."""
        from wb_core.api import inspect_model

        info = inspect_model(model)
        self.model_info.value = inputs_html(info)
        self.session.model_label = label or model
        self.session.model_path = info["path"]
        self.messages.show(f"Ready: {label or model} ({info['format']}). Go to the Sweep tab to profile it.", "ok")
