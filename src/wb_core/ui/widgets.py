"""Small widget factories and the error guard every callback goes through.

A callback that raises inside a widget event vanishes into the kernel log; users of a Voila page
never see it. `guarded` turns a WorkbenchError into its one-sentence message and anything else
into a short message plus the traceback in a collapsed Output, so the page keeps working.
"""

from __future__ import annotations

import functools
import html
import json
import traceback

import ipywidgets as w

from wb_core.api import WorkbenchError

STYLE = {"description_width": "150px"}
WIDE = w.Layout(width="520px")

# The page's own CSS: message colours and compact tables (Voila has no stylesheet hook).
CSS = """
<style>
.wb-msg { padding: 6px 10px; border-radius: 4px; margin: 4px 0; font-size: 13px; }
.wb-msg-info { background: #eef5fc; border-left: 4px solid #1f77b4; }
.wb-msg-ok { background: #eefaf0; border-left: 4px solid #2ca02c; }
.wb-msg-error { background: #fdeeee; border-left: 4px solid #d62728; }
.wb-msg-warn { background: #fff8e1; border-left: 4px solid #e6a700; }
.wb-table { border-collapse: collapse; font-size: 12px; }
.wb-table th, .wb-table td { border-bottom: 1px solid #ddd; padding: 2px 8px; text-align: right; }
.wb-table th { background: #f4f4f4; }
.wb-kv td { padding: 1px 10px 1px 0; font-size: 13px; vertical-align: top; }
.wb-help { color: #555; font-size: 12px; margin: -2px 0 6px 158px; line-height: 1.3; }
.wb-diff { background: #fff3c4; font-weight: bold; }
.wb-caption { color: #444; font-size: 12px; margin: 2px 0 8px 0; }
.wb-pre { font-family: monospace; font-size: 12px; white-space: pre; max-height: 420px; overflow: auto;
          background: #f8f8f8; border: 1px solid #ddd; padding: 8px; }
/* One look on every tab: one font, section titles in one colour, help text in one grey. */
.wb-dashboard { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
                color: #222; }
.wb-dashboard h3 { color: #1f4e79; font-size: 15px; border-bottom: 1px solid #dbe4ee; padding-bottom: 2px; }
.wb-help-block, .wb-help-inline { color: #555; font-size: 12px; line-height: 1.3; margin: 2px 0 6px 0; }
.wb-help-inline { padding: 6px 8px; }
.wb-explore-panel .wb-help { margin-left: 178px; }
.wb-field-flush .wb-help { margin-left: 0; }
.wb-recommendation .wb-best { font-size: 14px; }
.wb-run-details .wb-kv td:first-child, .wb-run-full .wb-kv td:first-child { color: #444; white-space: nowrap; }
.wb-run-full .wb-kv td { font-size: 12px; }
.wb-download { border-radius: 4px; margin: 4px 8px 4px 0; }
.wb-export-run { margin: 2px 0 6px 0; }
</style>
"""


def said(text) -> str:
    """A note or message from the core as the dashboard says it: each setting it names as its label."""
    from wb_core.faces import word_for_dashboard

    return word_for_dashboard(text)


def message_html(text: str, kind: str = "info") -> str:
    """An inline message box; kind is info, ok or error. A setting the text names is said as its label."""
    return f'<div class="wb-msg wb-msg-{kind}">{html.escape(said(text))}</div>'


class MessageArea(w.VBox):
    """Where a panel tells the user what happened: one message, and a traceback only for bugs."""

    def __init__(self):
        self.text = w.HTML("")
        self.details = w.Output()
        self.details_box = w.Accordion(children=[self.details], titles=("Details",))
        self.details_box.layout.display = "none"
        super().__init__([self.text, self.details_box])
        self.add_class("wb-messages")

    def show(self, text: str, kind: str = "info") -> None:
        self.text.value = message_html(text, kind)
        if kind != "error":
            self.details_box.layout.display = "none"

    def clear(self) -> None:
        self.text.value = ""
        self.details_box.layout.display = "none"

    def clear_error(self, *_) -> None:
        """Take an error away (the field it was about has changed); other messages stay."""
        if "wb-msg-error" in self.text.value:
            self.clear()

    def error(self, exc: BaseException) -> None:
        if isinstance(exc, WorkbenchError):
            from wb_core.faces import setting_label

            # A setting the error names is said as this dashboard labels it, never as a CLI flag.
            self.show(exc.worded(setting_label) if hasattr(exc, "worded") else str(exc), "error")
            return
        self.show(f"Something went wrong: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}",
                  "error")
        self.details.clear_output()
        with self.details:
            print("".join(traceback.format_exception(exc)))
        self.details_box.layout.display = ""


def guarded(messages: MessageArea):
    """Decorator for widget callbacks: show any exception in `messages` instead of losing it."""

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as e:  # a callback must never die silently
                messages.error(e)
                return None

        return inner

    return wrap


def text(description: str, value: str = "", tooltip: str = "", placeholder: str = "") -> w.Text:
    return w.Text(value=value, description=description, tooltip=tooltip, placeholder=placeholder,
                  style=STYLE, layout=WIDE)


def number_box(description: str, value, integer: bool = False, width: str = "300px"):
    """A number box that keeps what was typed (no silent clamping: `checked_number` says what is wrong)."""
    cls = w.IntText if integer else w.FloatText
    return cls(value=value, description=description, style=STYLE, layout=w.Layout(width=width))


def checked_number(value, name: str, low: float, high: float, integer: bool = False):
    """`value` when it lies in [low, high]; else a ConfigError saying so in one sentence."""
    from wb_core.faces import check_number

    return check_number(value, name, low, high, integer=integer)


def choices(description: str, options, value, tooltip: str = "", words=None) -> w.HBox:
    """A row of checkboxes for a multi-valued choice; `.selected()` on the box returns the ticked
    options. Each box shows `words(option)` (default: the option itself) and keeps its option in `.option`."""
    boxes = []
    for o in options:
        box = w.Checkbox(value=o in value, description=words(o) if words else o, indent=False,
                         layout=w.Layout(width="auto"))
        box.option = o
        boxes.append(box)
    label = w.Label(description, layout=w.Layout(width="154px"), tooltip=tooltip)
    row = w.HBox([label, *boxes])
    row.selected = lambda: [b.option for b in boxes if b.value]
    row.boxes = boxes
    return row


def button(description: str, style: str = "", icon: str = "", tooltip: str = "") -> w.Button:
    # As wide as its words wherever it sits: a button alone in a column would stretch across the page.
    return w.Button(description=description, button_style=style, icon=icon, tooltip=tooltip,
                    layout=w.Layout(width="auto", align_self="flex-start"))


def section(title: str) -> w.HTML:
    return w.HTML(f"<h3 style='margin:10px 0 4px 0'>{html.escape(title)}</h3>")


def key_values(rows: list[tuple[str, object]]) -> str:
    """A two-column HTML table of labels and values."""
    cells = "".join(f"<tr><td><b>{html.escape(str(k))}</b></td><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    return f'<table class="wb-kv">{cells}</table>'


def frame_html(df, columns: list[str], max_rows: int = 200) -> str:
    """A compact HTML table of some columns of a DataFrame (missing values as '-')."""
    cols = [c for c in columns if c in df.columns]
    view = df[cols].tail(max_rows).copy()
    for c in cols:
        if c.startswith(("latency", "cpu_util")):
            view[c] = view[c].map(lambda v: f"{v:.3g}" if isinstance(v, (int, float)) and v == v else v)
        elif c in ("throughput", "rss_mb"):
            view[c] = view[c].map(lambda v: f"{v:,.1f}" if isinstance(v, (int, float)) and v == v else v)
    view = view.astype(object).where(view.notna(), "-")
    return view.to_html(index=False, classes="wb-table", border=0, escape=True)


def with_help(control, help_text: str) -> w.VBox:
    """`control` with a plain-words help line under it (hover tooltips are easy to miss).

    The returned box keeps the control as `.control`, so panels read `box.control.value`.
    """
    box = w.VBox([control, w.HTML(f'<div class="wb-help">{html.escape(help_text)}</div>')])
    box.control = control
    box.add_class("wb-field")
    return box


def caption(text: str) -> w.HTML:
    """A line under a plot saying how to read it."""
    return w.HTML(f'<div class="wb-caption">{html.escape(text)}</div>')


PLOTLY_MIME = "application/vnd.plotly.v1+json"


class PlotArea(w.Output):
    """Where a plotly figure is drawn: `show(fig)` puts `fig` in place of the one shown before.

    The figure goes to the page as plotly's own output type, drawn by the plotly renderer that
    ships with plotly (served by the dashboard, nothing fetched online), not as a FigureWidget: a
    FigureWidget is a widget the browser must start within two seconds, which a busy machine often
    misses (an error in the console, and a figure that follows no later change). The drawn figure
    sends no events back to Python, so a choice of point is made with a control beside the plot.
    The last figure shown is kept as `.figure` (a `plotly.graph_objects.Figure`).
    """

    def __init__(self, fig=None, **kwargs):
        super().__init__(**kwargs)
        self.figure = None
        self.add_class("wb-plot")
        if fig is not None:
            self.show(fig)

    def show(self, fig) -> None:
        import plotly.io as pio

        self.figure = fig
        spec = json.loads(pio.to_json(fig, validate=False))
        spec["config"] = {"displaylogo": False}
        title = fig.layout.title.text or "plot"
        self.outputs = ({"output_type": "display_data", "metadata": {},
                         "data": {PLOTLY_MIME: spec, "text/plain": f"<{title}>"}},)

    def clear(self) -> None:
        self.figure = None
        self.outputs = ()
