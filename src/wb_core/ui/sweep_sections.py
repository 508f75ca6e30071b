"""The Sweep tab's "How to search" and "Serving scenario" sections, each control with a help line.

`values()` on each gives keyword arguments of `wb_core.api.profile`.
"""

from __future__ import annotations

import ipywidgets as w

from wb_core.api import ConfigError
from wb_core.ui.widgets import STYLE, number_box, section, text, with_help

GRID, SMART = "grid", "smart"
SEARCHES = (("Every combination", GRID), ("Smart search", SMART))


def parse_p99(value: str) -> float | None:
    """The p99 target a user typed, in ms: empty for none."""
    from wb_core.api import check_number

    value = str(value).strip().removesuffix("ms").strip()
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"The p99 target takes a number of milliseconds such as 5, or nothing; got '{value}'.") \
            from None
    return float(check_number(number, "The p99 target", 0.0, 3_600_000.0, low_open=True))


class SearchSection(w.VBox):
    """Every combination, or a smart search with a budget and a p99 target (shown only for smart)."""

    def __init__(self):
        self.how = w.ToggleButtons(options=SEARCHES, value=GRID, description="How to search", style=STYLE)
        self.budget = number_box("Budget (configurations)", 8, integer=True)
        self.p99 = text("p99 target (ms)", placeholder="empty: highest throughput, no latency limit")
        self.smart_box = w.VBox([
            with_help(self.budget, "The most configurations the search measures; it stops earlier when "
                                   "nothing better is left to try."),
            with_help(self.p99, "The search climbs towards the highest throughput whose p99 latency stays "
                                "under this many milliseconds."),
        ])
        self.how.observe(self._on_how, "value")
        self._on_how()
        super().__init__([
            with_help(self.how, "Every combination measures the whole grid below. Smart search measures only "
                                "part of it, the part most likely to hold the best configuration."),
            self.smart_box])
        self.add_class("wb-search-section")

    def _on_how(self, *_):
        self.smart_box.layout.display = "" if self.how.value == SMART else "none"

    def values(self) -> dict:
        if self.how.value == GRID:
            return dict(search=GRID, budget=None, p99_ms=None)
        from wb_core.api import check_number

        return dict(search=SMART, budget=int(check_number(self.budget.value, "The budget", 1, 10_000, integer=True)),
                    p99_ms=parse_p99(self.p99.value))


class ScenarioSection(w.VBox):
    """How the model is served while it is measured: instances, requests in flight, arrivals, rounds."""

    def __init__(self, field_help):
        from wb_core.api import setting_label as label  # the axes table's: errors and notes use the same words

        self.instances = text(label("instances"), "1")
        self.cores_per_instance = text(label("cores_per_instance"), "auto")
        self.concurrency = text(label("concurrency"), "auto")
        self.rates = text(label("rates"), "none")
        self.repeats = number_box("Repeats", 1, integer=True)
        super().__init__([
            section("Serving scenario"),
            with_help(self.instances, "Copies of the model serving side by side, each in its own process, e.g. "
                                      "1,2. " + field_help("instances")),
            with_help(self.cores_per_instance, "CPUs pinned to each copy (they do not overlap), e.g. 1; auto: "
                                               "not pinned. Instances × cores per instance must fit this machine."),
            with_help(self.concurrency, "Requests each copy works on at once, e.g. 1,4; auto: one per OpenVINO "
                                        "stream."),
            with_help(self.rates, "Requests arriving at random (Poisson) at this many per second, e.g. 50,200, as "
                                  "from real users; none: each request starts as soon as the last one ends."),
            with_help(self.repeats, "Rounds per configuration, each in a fresh process; more than 1 gives the "
                                    "median and a 95% interval, at that many times the time."),
        ])
        self.add_class("wb-scenario-section")

    def values(self) -> dict:
        from wb_core.api import check_number

        return dict(instances=self.instances.value, cores_per_instance=self.cores_per_instance.value,
                    concurrency=self.concurrency.value, rates=self.rates.value,
                    repeats=int(check_number(self.repeats.value, "Repeats", 1, 50, integer=True)))
