"""The Sweep tab's data section: which data measures accuracy and calibrates INT8, and how.

The user picks no data, the demo's own data, a path on the server (checked as soon as it is
entered) or an uploaded .npz (written to the cache), then the metric in words, the calibration
size and an accuracy-drop limit (empty: plain INT8; a number: accuracy-aware quantization).
`values()` gives them as keyword arguments of `wb_core.api.profile`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import ipywidgets as w

from wb_core.api import ConfigError
from wb_core.faces import cache_dir
from wb_core.ui.uploads import safe_name, upload_limit_mb
from wb_core.ui.widgets import STYLE, WIDE, message_html, number_box, text, with_help

NO_DATA, DEMO_DATA, SERVER_PATH, UPLOAD, TEXT = (
    "No data (speed only)", "The demo's own data", "A file on this server (.npz or image folder)",
    "Upload an .npz file", "Text on this server (one sample per line) and its tokenizer")
SOURCES = (NO_DATA, DEMO_DATA, SERVER_PATH, UPLOAD, TEXT)

# The metrics in words, and the names profile() takes.
METRICS = (
    ("Automatic (top-1 with labels, else cosine similarity to FP32)", "auto"),
    ("Top-1 accuracy", "top1"),
    ("Top-5 accuracy", "top5"),
    ("Cosine similarity to FP32", "cosine"),
    ("Mean squared error", "mse"),
    ("Max absolute error", "max_abs"),
)


def parse_drop_limit(value: str) -> float | None:
    """The accuracy-drop limit a user typed: empty for none, else a number between 0 and 1."""
    from wb_core.faces import check_number

    value = str(value).strip()
    if not value:
        return None
    percent = value.endswith("%")
    try:
        number = float(value.rstrip("%").strip())
    except ValueError:
        raise ConfigError(f"The accuracy-drop limit takes a number such as 0.01, or nothing; got '{value}'.") from None
    if percent:
        number /= 100
    return float(check_number(number, "The accuracy-drop limit", 0.0, 1.0))


def save_data_upload(files, dest_root: Path | None = None, limit_mb: int | None = None) -> Path:
    """Write an uploaded .npz (a dict with `name` and `content`) to its own folder; returns its path."""
    from wb_core.faces import describe_data_source

    files = list(files or ())
    if not files:
        raise ConfigError("No file was uploaded; choose an .npz file first.")
    f = files[0]
    name = safe_name(f["name"])
    if not name.lower().endswith(".npz"):
        raise ConfigError(f"'{name}' is not an .npz file; save your arrays with numpy.savez (x, and y for labels).")
    limit = (limit_mb or upload_limit_mb()) * 2**20
    if len(f["content"]) > limit:
        raise ConfigError(f"The upload is {len(f['content']) / 2**20:.1f} MB, over the limit of {limit // 2**20} MB; "
                          f"put the file on the server and give its path instead.")
    root = dest_root or cache_dir() / "uploads"
    root.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="data-", dir=root)) / name
    path.write_bytes(bytes(f["content"]))
    describe_data_source(path)  # a broken archive is said now, not halfway through a sweep
    return path


class DataSection(w.VBox):
    """Data, metric, calibration size and accuracy-drop limit, each with a help line."""

    def __init__(self, demo_name=lambda: None, sources=SOURCES, expert: bool = True):
        """`sources`: the choices offered; `expert` adds the metric, calibration size and drop limit."""
        self._demo_name = demo_name  # the demo the chosen model is, or None
        self.uploaded: Path | None = None
        self.source = w.RadioButtons(options=sources, value=NO_DATA, description="Data",
                                     style=STYLE, layout=w.Layout(width="520px"))
        self.path = text("Data path", placeholder="/data/val.npz or /data/images/ (one subfolder per class)")
        self.path.continuous_update = False
        self.text_path = text("Text file", placeholder="/data/questions.txt (one sample per line)")
        self.tokenizer_path = text("Tokenizer", placeholder="/models/bert/tokenizer.json")
        for control in (self.text_path, self.tokenizer_path):
            control.continuous_update = False
        self.text_box = w.VBox([
            with_help(self.text_path, "Real text for a text model: each line is one request. It is tokenized to "
                                      "every sequence length swept, and used for measuring, INT8 and accuracy."),
            with_help(self.tokenizer_path, "The model's own tokenizer.json (Hugging Face tokenizers format), a file "
                                           "on this server; nothing is downloaded."),
        ])
        self.upload = w.FileUpload(accept=".npz", multiple=False, description="Choose .npz")
        self.status = w.HTML("")
        self.metric = w.Dropdown(options=METRICS, value="auto", description="Accuracy metric", style=STYLE,
                                 layout=WIDE)
        self.calib = number_box("Calibration samples", 300, integer=True)
        self.drop = text("Accuracy-drop limit", placeholder="empty: plain INT8")
        self.path_box = with_help(self.path, "An .npz file with an array x (inputs) and, if you have them, y "
                                             "(labels); or a folder with one subfolder of images per class.")
        self.upload_box = with_help(self.upload, "An .npz file from your computer (arrays x and optional y); "
                                                 f"at most {upload_limit_mb()} MB.")
        self.choice = w.VBox([])
        self.source.observe(self._on_source, "value")
        self.path.observe(self._on_path, "value")
        self.upload.observe(self._on_upload, "value")
        self.text_path.observe(self._on_text, "value")
        self.tokenizer_path.observe(self._on_text, "value")
        expert_rows = [
            with_help(self.metric, "How accuracy is scored. Top-1/top-5 need labels (y); the others compare each "
                                   "precision's outputs with FP32's."),
            with_help(self.calib, "How many samples INT8 quantization looks at to choose its ranges (300 is "
                                  "usually enough)."),
            with_help(self.drop, "Leave empty for plain INT8. A number, e.g. 0.01 (one point of accuracy), makes "
                                 "INT8 keep the layers that hurt accuracy in FP32 so the drop stays under it."),
        ]
        source_help = ("Data lets the workbench measure accuracy and calibrate INT8. Without it, INT8 calibrates "
                       "on the demo's data or random inputs and accuracy is not shown." if expert else
                       "INT8 is tried only with data: it needs samples to calibrate on and to check its accuracy "
                       "against FP32. Without data the tune measures FP32 and BF16 only.")
        super().__init__([with_help(self.source, source_help), self.choice, self.status,
                          *(expert_rows if expert else [])])
        self.add_class("wb-data-section")

    # ---- the choice ----
    def _on_source(self, *_):
        self.status.value = ""
        self.choice.children = {SERVER_PATH: [self.path_box], UPLOAD: [self.upload_box],
                                TEXT: [self.text_box]}.get(self.source.value, [])
        if self.source.value == DEMO_DATA:
            from wb_core.api import demo_sample_text

            name = self._demo_name()
            what = "sample text, through its tokenizer" if demo_sample_text(name) else "test data (with labels)"
            self.status.value = (message_html(f"Using the {name} demo's {what}.", "ok") if name else
                                 message_html("The demo data fits only the demo models; pick a demo in the Model "
                                              "tab, or another data source.", "error"))
        elif self.source.value == SERVER_PATH and self.path.value.strip():
            self._on_path()
        elif self.source.value == TEXT:
            self._on_text()
        elif self.source.value == UPLOAD and self.uploaded:
            self.status.value = message_html(f"Uploaded {self.uploaded.name}.", "ok")

    def _on_path(self, *_):
        from wb_core.faces import describe_data_source

        if self.path.value.strip():
            self._say_found(lambda: describe_data_source(self.path.value.strip()))
        else:
            self.status.value = ""

    def _on_text(self, *_):
        if self.source.value != TEXT:
            return
        if self.text_path.value.strip() and self.tokenizer_path.value.strip():
            self._say_found(self._text_description)
        else:
            self.status.value = ""

    def _say_found(self, describe) -> None:
        """What `describe()` found in what the user typed, or its one-sentence error."""
        try:
            self.status.value = message_html(f"Found {describe()}.", "ok")
        except ConfigError as e:
            self.status.value = message_html(str(e), "error")

    def _text_description(self) -> str:
        from wb_core.faces import describe_text_source

        return describe_text_source(Path(self.text_path.value.strip()).expanduser(),
                                    Path(self.tokenizer_path.value.strip()).expanduser())

    def _on_upload(self, *_):
        if not self.upload.value:
            return
        try:
            self.uploaded = save_data_upload(self.upload.value)
        except ConfigError as e:
            self.uploaded = None
            self.status.value = message_html(str(e), "error")
            return
        from wb_core.faces import describe_data_source

        self.status.value = message_html(f"Uploaded {self.uploaded.name}: {describe_data_source(self.uploaded)}.",
                                         "ok")

    def data(self) -> str | None:
        """The data string profile() takes, or None; ConfigError with one sentence when the choice is unusable."""
        from wb_core.faces import describe_data_source

        if self.source.value == NO_DATA:
            return None
        if self.source.value == DEMO_DATA:
            name = self._demo_name()
            if not name:
                raise ConfigError("The demo data fits only the demo models; pick a demo in the Model tab, "
                                  "or choose another data source.")
            return f"demo:{name}"
        if self.source.value == TEXT:
            return None
        if self.source.value == SERVER_PATH:
            path = self.path.value.strip()
            describe_data_source(path)
            return str(Path(path).expanduser())
        if self.uploaded is None:
            raise ConfigError("Upload an .npz file first, or choose another data source.")
        return str(self.uploaded)

    def values(self) -> dict:
        """data, metric, calib_size and max_accuracy_drop for profile()."""
        from wb_core.faces import check_number

        drop = parse_drop_limit(self.drop.value)
        text_inputs = {}
        if self.source.value == TEXT:
            if not (self.text_path.value.strip() and self.tokenizer_path.value.strip()):
                raise ConfigError("Give both the text file and its tokenizer.json, or choose another data source.")
            self._text_description()  # a wrong file is said now, not halfway through a sweep
            text_inputs = dict(text=str(Path(self.text_path.value.strip()).expanduser()),
                               tokenizer=str(Path(self.tokenizer_path.value.strip()).expanduser()))
        return dict(data=self.data(), metric=self.metric.value, **text_inputs,
                    calib_size=int(check_number(self.calib.value, "The calibration size", 1, 100_000, integer=True)),
                    max_accuracy_drop=drop)
