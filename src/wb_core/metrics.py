"""What a point measures, each metric declared once: its column, its words and unit, which way is
better and the digits its noise allows (the records of a results row, as a model analyzer keeps
them). Tables, rounding and comparisons read this table."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str  # the results column
    words: str  # what it is, in words
    unit: str = ""  # shown in brackets after the words
    higher_is_better: bool | None = None  # None: a description, not a goal
    digits: int = 3  # significant digits: run-to-run noise on a shared CPU is a few percent

    @property
    def label(self) -> str:
        """Its column header: the words and, in brackets, the unit."""
        return f"{self.words} ({self.unit})" if self.unit else self.words


METRICS: tuple[Metric, ...] = (
    Metric("latency_ms_p50", "p50 latency", "ms", higher_is_better=False),
    Metric("latency_ms_p90", "p90 latency", "ms", higher_is_better=False),
    Metric("latency_ms_p95", "p95 latency", "ms", higher_is_better=False),
    Metric("latency_ms_p99", "p99 latency", "ms", higher_is_better=False),
    Metric("latency_ms_mean", "Mean latency", "ms", higher_is_better=False),
    Metric("throughput", "Throughput", "samples/s", higher_is_better=True),
    Metric("throughput_per_core", "Throughput per core", "samples/s", higher_is_better=True),
    Metric("cpu_util", "CPU cores busy", higher_is_better=False, digits=2),
    Metric("rss_mb", "Peak memory", "MB", higher_is_better=False),
    Metric("accuracy", "Accuracy", higher_is_better=True, digits=4),
    Metric("accuracy_drop", "Accuracy drop", higher_is_better=False, digits=4),
    Metric("vs_fp32", "Speed vs FP32", "×", higher_is_better=True),
)


def metric(column: str) -> Metric | None:
    """The metric a column holds: its own, or the one it derives from (`latency_ms_p99_ci_low` from
    `latency_ms_p99`, the longest name it starts with); None for a column that is no metric."""
    found = [m for m in METRICS if column == m.name or column.startswith(m.name + "_")]
    return max(found, key=lambda m: len(m.name)) if found else None
