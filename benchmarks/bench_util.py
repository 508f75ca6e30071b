"""Small helpers the benchmark scripts share: tables, spread statistics, quick measuring settings,
and OpenVINO's own benchmark_app as the reference."""

from __future__ import annotations

import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from wb_core.api import MeasureSettings, inspect_model


def print_table(title: str, header: Sequence[str], rows: Iterable[Sequence], notes: Iterable[str] = ()) -> None:
    """An aligned plain-text table (numbers right-aligned), a title above and notes below."""
    rows = [[_cell(v) for v in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    numeric = [all(_is_num(r[i]) for r in rows) and bool(rows) for i in range(len(header))]

    def line(cells):
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    print(f"\n{title}")
    print(line(header))
    print(line(["-" * w for w in widths]))
    for r in rows:
        print(line(r))
    for n in notes:
        print(n)
    print(flush=True)


def fixed_time(seconds: float, warmup_s: float = 0.5) -> MeasureSettings:
    """Measure for exactly `seconds` (no early stop on stable windows): like benchmark_app's -t."""
    return MeasureSettings(warmup_s=warmup_s, window_s=seconds / 3, min_windows=3, tolerance=1e-9,
                           max_time_s=seconds)


def median_spread(values: Sequence[float]) -> tuple[float, float, float]:
    """(median, min, max) of the finite values; NaN when there are none."""
    v = [x for x in values if x is not None and math.isfinite(x)]
    if not v:
        return math.nan, math.nan, math.nan
    return statistics.median(v), min(v), max(v)


def cv(values: Sequence[float]) -> float:
    """Coefficient of variation: sample standard deviation over the mean."""
    v = [x for x in values if x is not None and math.isfinite(x)]
    if len(v) < 2 or statistics.fmean(v) == 0:
        return math.nan
    return statistics.stdev(v) / statistics.fmean(v)


def fmt_ratio(med: float, lo: float, hi: float) -> str:
    if not math.isfinite(med):
        return "n/a"
    return f"{med:.3f} ({lo:.2f}-{hi:.2f})"


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "n/a"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 100:
            return f"{v:.1f}"
        return f"{v:.3g}" if abs(v) < 1 else f"{v:.2f}"
    return str(v)


def _is_num(s: str) -> bool:
    try:
        float(s.replace(",", "").rstrip("x%"))
        return True
    except ValueError:
        return s in ("-", "n/a")


def benchmark_app_path() -> str:
    here = Path(sys.executable).parent / "benchmark_app"
    found = str(here) if here.exists() else shutil.which("benchmark_app")
    if not found:
        sys.exit("benchmark_app not found: it ships in the openvino wheel; install openvino in this environment.")
    return found


def run_benchmark_app(xml: Path, args: Sequence[str], cpus: Sequence[int] | None = None) -> dict:
    """One benchmark_app run of `xml` on the CPU with `args` (pinned to `cpus` when given, before the
    runtime loads); throughput and median latency from its JSON report."""
    import os

    pin = (lambda: os.sched_setaffinity(0, list(cpus))) if cpus else None
    with tempfile.TemporaryDirectory() as report:  # the report folder must exist beforehand
        cmd = [benchmark_app_path(), "-m", str(xml), "-d", "CPU", *args, "-report_type", "no_counters",
               "-report_folder", report, "-json_stats"]  # -json_stats last: it takes an optional value
        out = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=pin)
        if out.returncode != 0:
            tail = (out.stdout + out.stderr).strip().splitlines()[-3:]
            raise RuntimeError(f"benchmark_app failed: {' | '.join(tail)}")
        res = json.loads((Path(report) / "benchmark_report.json").read_text())["execution_results"]
    return {"throughput": float(res["throughput"]), "median_ms": float(res["latency (ms)"])}


def shape_arg(model: Path, batch: int, seq_len: int | None) -> str:
    """benchmark_app's `-shape`: every input at the batch size, its other dynamic sizes at `seq_len`."""
    parts = []
    for spec in inspect_model(model).inputs:
        dims = [batch if i == spec.batch_axis else (d if d > 0 else (seq_len or 1)) for i, d in enumerate(spec.shape)]
        parts.append(f"{spec.name}[{','.join(map(str, dims))}]")
    return ",".join(parts)


def layout_arg(model: Path) -> str | None:
    """benchmark_app's `-layout` naming each input's batch axis (when it is the first): without it
    benchmark_app cannot tell the batch of a token-id input and reports requests/s, not samples/s."""
    layouts = [f"{spec.name}[N...]" for spec in inspect_model(model).inputs if spec.batch_axis == 0]
    return ",".join(layouts) or None
