"""Model tab: pick a bundled demo, a path on the server or an upload; show its inputs and the CPU.

Reading a model (and building a demo the first time, which trains it: a minute or two) runs in a
background thread with a progress line, the button disabled until it is done, so the page stays
live. The CPU table is filled in the background too, after the page is up.
"""

from __future__ import annotations

import html
import threading

import ipywidgets as w

from wb_core.ui.state import DashboardState
from wb_core.ui.uploads import MODEL_SUFFIXES, save_upload, upload_limit_mb, upload_message
from wb_core.ui.widgets import CSS, MessageArea, button, guarded, key_values, section, text, with_help

SOURCES = ("Demo model", "Path on the server", "Upload")


def hardware_html() -> str:
    """The CPU as a table: model, cores, caches, ISA flags (present ones in bold) and peak FLOP/s."""
    from wb_core.api import hardware_info

    hw = hardware_info()
    flags = " ".join(f"<b>{html.escape(k)}</b>" if v else f"<span style='color:#aaa'>{html.escape(k)}</span>"
                     for k, v in hw.flags.items())
    from wb_core.faces import executed_words

    peak = ", ".join(f"{executed_words(p)} {v:,.0f}" for p, v in hw.peak_gflops.items())
    rows = [("CPU", f"{hw.cpu_model} ({hw.architecture})"),
            ("Cores", f"{hw.physical_cores} physical, {hw.logical_cores} logical; usable CPUs "
                      f"{', '.join(map(str, hw.available_cpus))}"),
            ("Sockets / NUMA", f"{hw.sockets} / {hw.numa_nodes}"),
            ("Caches", f"L1d {hw.l1d_kb} KiB, L2 {hw.l2_kb} KiB, L3 {hw.l3_kb} KiB"),
            ("Memory", f"{hw.memory_gb} GiB"),
            ("Peak GFLOP/s", peak)]
    table = key_values(rows)
    return table.replace("</table>", f"<tr><td><b>ISA flags</b></td><td>{flags}</td></tr></table>")


def inputs_html(info) -> str:
    """A model's description (`inspect_model`) as label/value rows, formats and families by their names."""
    from wb_core.faces import format_title

    families = {"cnn": "CNN (convolutional)", "transformer": "Transformer"}

    def shown(label: str, value: str) -> str:
        if label == "Format":
            return format_title(value)
        if label == "Family":
            word, _, rest = value.partition(" ")
            return f"{families.get(word, word)} {rest}".strip()
        return value

    return key_values([(label, shown(label, str(value))) for label, value in info.facts()])


class ModelPanel(w.VBox):
    """Chooses the model the Sweep tab profiles (DashboardState.model_path)."""

    def __init__(self, session: DashboardState, title: str = "Model"):
        from wb_core.faces import DEMOS

        self.session = session
        self.messages = MessageArea()
        self.source = w.ToggleButtons(options=SOURCES, value=SOURCES[0], description="Source",
                                     style={"button_width": "150px", "description_width": "150px"})
        self.demo = w.Dropdown(options=[(f"{k}: {v}", k) for k, v in DEMOS.items()], value="lenet-digits",
                               description="Demo", style={"description_width": "150px"},
                               layout=w.Layout(width="620px"))
        self.path = text("Path", placeholder="/data/models/resnet50.onnx or a SavedModel folder")
        limit = upload_limit_mb()
        self.upload = w.FileUpload(accept=",".join(MODEL_SUFFIXES), multiple=True,
                                   description=f"Choose files (≤ {limit} MB)", layout=w.Layout(width="260px"))
        self.upload_help = w.HTML("<div class='wb-help-inline'>.onnx, .keras, an IR's .xml with its .bin, or a "
                                  "SavedModel folder zipped.</div>")
        self.use = button("Use this model", "primary", "check")
        self.model_info = w.HTML()
        self.hardware = w.HTML("<i>Reading this machine's CPU…</i>")
        self.choice = w.VBox()
        self._work: threading.Thread | None = None
        self._saved: tuple[list[str], str] | None = None  # the upload saved last: (file names, path)
        self._selected = ""  # the model `select` made the one in use
        self.source.observe(self._on_source, "value")
        for control in (self.source, self.demo, self.path, self.upload):  # an error about the old choice goes
            control.observe(self.messages.clear_error, "value")
        self.use.on_click(guarded(self.messages)(self._on_use))
        self._on_source()
        self.hardware_box = w.Accordion(children=[self.hardware], titles=("This machine's CPU",))
        self.hardware_box.selected_index = None if title != "Model" else 0
        super().__init__([w.HTML(CSS), section(title),
                          with_help(self.source, "A ready-made demo, a model file already on this server, or "
                                                 "one from your computer."),
                          self.choice, w.HBox([self.use]), self.messages, self.model_info,
                          self.hardware_box])
        self.add_class("wb-model-panel")
        # Detecting the CPU takes a second or two: done after the page is up.
        self._hw_thread = threading.Thread(target=guarded(self.messages)(self._show_hardware), daemon=True,
                                           name="wb-hardware")
        self._hw_thread.start()

    def _show_hardware(self):
        self.hardware.value = hardware_html()

    def _on_source(self, *_):
        self.choice.children = {
            SOURCES[0]: [with_help(self.demo, "Built on this machine the first time (a minute or two), then reused.")],
            SOURCES[1]: [with_help(self.path, "An .onnx or .keras file, an OpenVINO .xml (its .bin beside it) or "
                                              "a SavedModel folder.")],
            SOURCES[2]: [w.HBox([self.upload, self.upload_help])]}[self.source.value]

    def chosen_name(self) -> str:
        """The model the controls name now (a demo's name or a typed path; "" for an upload)."""
        if self.source.value == SOURCES[0]:
            return self.demo.value
        return self.path.value.strip() if self.source.value == SOURCES[1] else ""

    def chosen(self) -> tuple[str, str, list[str] | None]:
        """(model, label, uploaded file names or None) of what the controls choose now; an upload is saved.
        One sentence (ConfigError) when nothing is chosen."""
        from wb_core.api import ConfigError

        if self.source.value == SOURCES[0]:
            return self.demo.value, self.demo.value, None
        if self.source.value == SOURCES[1]:
            model = self.path.value.strip()
            if not model:
                raise ConfigError("Type the path of a model on the server first.")
            return model, model, None
        files = list(self.upload.value)
        if not files:
            raise ConfigError("Choose the model's files to upload first.")
        if self._saved is None or self._saved[0] != [f["name"] for f in files]:
            self._saved = ([f["name"] for f in files], str(save_upload(files)))
        return self._saved[1], ", ".join(f["name"] for f in files), [f["name"] for f in files]

    def select_chosen(self, model: str, label: str, uploaded: list[str] | None = None) -> None:
        """Make `model` the one in use unless it already is (for Tune, which needs no “Use this model” first)."""
        from wb_core.api import WorkbenchError

        if self._selected == model and self.session.model_path:
            return
        try:
            self.select(model, label, progress=lambda text: self.messages.show(text))
        except WorkbenchError as e:  # said next to the model's controls, and the tune stops with it
            self.messages.show(upload_message(e, uploaded) if uploaded else str(e), "error")
            raise

    def _on_use(self, *_):
        if self._work is not None and self._work.is_alive():
            self.messages.show("Still reading the model; wait for it to finish.")
            return
        self.model_info.value = ""
        if self.source.value == SOURCES[2]:
            self.messages.show("Saving the upload…")
        model, label, uploaded = self.chosen()
        self.use.disabled = True
        self.messages.show("Reading the model…")
        self._work = threading.Thread(target=self._select_in_background, args=(model, label, uploaded), daemon=True,
                                      name="wb-model")
        self._work.start()

    def _select_in_background(self, model: str, label: str, uploaded: list[str] | None = None) -> None:
        from wb_core.api import WorkbenchError

        try:
            self.select(model, label, progress=lambda text: self.messages.show(text))
        except WorkbenchError as e:  # one sentence on the page, naming the upload if it was one
            self.messages.show(upload_message(e, uploaded) if uploaded else str(e), "error")
        except Exception as e:  # the button works again
            self.messages.error(e)
        finally:
            self.use.disabled = False

    def wait(self, timeout: float | None = None) -> None:
        """Until the CPU table is filled and the model being read is ready (or failed)."""
        self._hw_thread.join(timeout)
        if self._work is not None:
            self._work.join(timeout)

    def select(self, model: str, label: str | None = None, progress=None) -> None:
        """Inspect `model` (a demo name or a path) and make it the one the Sweep tab profiles.

        `progress(text)` hears each step: building a demo (the first time), reading the inputs.
        """
        from wb_core.api import ensure_demo, inspect_model
        from wb_core.faces import DEMOS, format_title

        say = progress or (lambda text: None)
        name = label or model
        if model in DEMOS:
            say(f"Step 1 of 2: preparing the demo model {model} (built and trained on this machine the first "
                f"time, which takes a minute or two; later it is reused)…")
            ensure_demo(model)
            say(f"Step 2 of 2: reading the inputs of {model}…")
        else:
            say(f"Reading {name}: checking its format and inputs (a SavedModel or Keras file loads TensorFlow, "
                f"a few seconds)…")
        info = inspect_model(model)
        self._selected = model
        self.model_info.value = inputs_html(info)
        self.session.model_label = name
        self.session.model_path = str(info.path)
        self.messages.show(f"Ready: {name} ({format_title(info.format)}). Press Tune below for the "
                           f"answer, or use the Sweep tab to measure settings of your own.", "ok")
