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
    from wb_core.faces import check_number

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
        from wb_core.faces import check_number

        return dict(search=SMART, budget=int(check_number(self.budget.value, "The budget", 1, 10_000, integer=True)),
                    p99_ms=parse_p99(self.p99.value))


class ScenarioSection(w.VBox):
    """How the model is served while it is measured: instances, requests in flight, arrivals, rounds."""

    def __init__(self, boxes: list):
        """`boxes`: the scenario's settings, each with its line (the Sweep tab makes them from the axes table)."""
        self.repeats = number_box("Repeats", 1, integer=True)
        super().__init__([
            section("Serving scenario"), *boxes,
            with_help(self.repeats, "Rounds per configuration, each in a fresh process; more than 1 gives the "
                                    "median and a 95% interval, at that many times the time."),
        ])
        self.add_class("wb-scenario-section")

    def repeat_count(self) -> int:
        """The rounds per configuration, checked (one sentence naming the box and its range otherwise)."""
        from wb_core.faces import check_number

        return int(check_number(self.repeats.value, "Repeats", 1, 50, integer=True))
