"""Declarations are read, not copied: the sweep settings (the axes table and each backend's
registration), the precisions, the export formats and the backends live in one place each.

The scans below read every module of the package and fail on a copy of a declaration: a literal
list of four or more setting names, a full list of the precisions or of the export formats, a
precision or backend name compared by literal, a dashboard module that builds a plotly figure (the
figures are the core's, `plots.py`). The copies still standing are listed in KNOWN with the reason
and the count; the test fails when one grows, when a new one appears, and when a listed one has
gone (then its line goes too), in the manner of test_architecture's KNOWN_CIRCLES.

The end-to-end test adds a setting to a backend in a fresh process, as a registration would, and
follows it through every place a setting must reach, with no other file changed.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from wb_core import axes
from wb_core.backends import registry
from wb_core.export.formats import FORMATS
from wb_core.precisions import NAMES as PRECISION_NAMES

SRC = Path(__file__).resolve().parents[1] / "src" / "wb_core"

# The declarations themselves (module path under wb_core).
DECLARATIONS = {"axes.py", "axis.py", "backends/registry.py", "precisions.py", "export/formats.py"}
# Where a precision's own code lives (the variants are built and run per precision).
PRECISION_HOMES = ("variants/", "backends/")

SETTING_NAMES = frozenset(axes.run_settings()) | frozenset(a.spec for a in axes.all_axes())

# (module, kind) -> (how many, why it stands). Kinds: settings, precisions, formats, precision-compare,
# backend-compare, plotly.
KNOWN: dict[tuple[str, str], tuple[int, str]] = {
    ("training/study.py", "settings"): (2, "TrainPoint.to_dict and TrainSpec.to_dict: the record a training "
                                           "study's keys hash, which must not change with the table"),
    ("export/triton.py", "precision-compare"): (1, "Triton's openvino backend's HINT_BF16, a parameter that names bf16 "
                                                   "itself"),
}


def _strings(node) -> list[str]:
    """The string constants of a literal list, tuple, set, or a dict's keys."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if isinstance(node, ast.Dict):
        return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return []


def copies(source: str, module: str) -> Counter:
    """(module, kind) -> how many copies of a declaration `source` holds."""
    found: Counter = Counter()
    if module in DECLARATIONS:
        return found
    for node in ast.walk(ast.parse(source)):
        names = set(_strings(node))
        if len(names & SETTING_NAMES) >= 4:
            found[(module, "settings")] += 1
        if set(PRECISION_NAMES) <= names:
            found[(module, "precisions")] += 1
        if len(names & set(FORMATS)) >= 3:
            found[(module, "formats")] += 1
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                words = [side.value] if isinstance(side, ast.Constant) else _strings(side)
                words = [w for w in words if isinstance(w, str)]
                if any(w in PRECISION_NAMES for w in words) and not module.startswith(PRECISION_HOMES):
                    found[(module, "precision-compare")] += 1
                if any(w in registry.names() for w in words) and not module.startswith("backends/"):
                    found[(module, "backend-compare")] += 1
    if module.startswith("ui/"):
        count = source.count("go.Figure") + source.count("px.")
        if count:
            found[(module, "plotly")] += count
    return found


def _scan() -> Counter:
    found: Counter = Counter()
    for path in sorted(SRC.rglob("*.py")):
        found += copies(path.read_text(encoding="utf-8"), path.relative_to(SRC).as_posix())
    return found


def test_no_module_copies_a_declaration():
    found = _scan()
    grown = [f"{m} ({kind}): {n} copies, {KNOWN.get((m, kind), (0,))[0]} known" for (m, kind), n in sorted(found.items())
             if n > KNOWN.get((m, kind), (0,))[0]]
    gone = [f"{m} ({kind}): listed {n}, now {found.get((m, kind), 0)}; lower its count in KNOWN"
            for (m, kind), (n, _) in sorted(KNOWN.items()) if found.get((m, kind), 0) < n]
    assert not grown, "read the declaration instead of copying it:\n" + "\n".join(grown)
    assert not gone, "\n".join(gone)


@pytest.mark.parametrize("source, kind", [
    ('COLUMNS = ("backend", "precision", "batch_size", "threads")', "settings"),
    ('SHOWN = {"hint": "h", "streams": "s", "execution_mode": "e", "graph_optimization": "g"}', "settings"),
    ('CHOICES = ["fp32", "bf16", "int8"]', "precisions"),
    ('TITLES = {"yaml": 1, "ovms": 2, "triton": 3}', "formats"),
    ('def f(p):\n    return p == "int8"', "precision-compare"),
    ('def f(b):\n    return b in ("onnxruntime", "x")', "backend-compare"),
])
def test_the_scan_sees_each_kind_of_copy(source, kind):
    assert copies(source, "analysis/somewhere.py") == Counter({("analysis/somewhere.py", kind): 1})
    assert not copies('COLUMNS = ("backend", "precision", "batch_size")', "analysis/somewhere.py")  # three: no list
    assert not copies(source, "axes.py")  # the declarations may list what they declare


def test_the_scan_counts_plotly_figures_in_the_dashboard():
    source = "import plotly.graph_objects as go\nfig = go.Figure()\n"
    assert copies(source, "ui/new_panel.py") == Counter({("ui/new_panel.py", "plotly"): 1})
    assert not copies(source, "plots.py")


# A setting added to a backend in its registration reaches every face and record (run in a fresh
# process: the axes become RunConfig and SweepSpec fields when config is first imported).
NEW_SETTING = textwrap.dedent('''
    import sys
    from wb_core.axis import Axis, whole_numbers
    from wb_core.backends.registry import BackendInfo, get, register

    register(BackendInfo(name="toyrt", description="A toy runtime", formats=("onnx",), session="toy:Session",
                         distributions=(), loads="onnx", settings=("threads",),
                         axes=(Axis("toy_knob", "toy_knobs", whole_numbers("Toy knob", 64), "The toy runtime's knob.",
                                    "Knob (Toy runtime)", "--toy-knob", becomes="TOY_KNOB", env=("TOY_KNOB",)),)))

    from typer.testing import CliRunner

    from wb_core import api, faces
    from wb_core.analysis.planning import Allocation, allocation_spec, same_run_columns, same_settings
    from wb_core.analysis.precision import match_columns
    from wb_core.axes import spec_schema
    from wb_core.cli import app
    from wb_core.config import RunConfig, SweepSpec
    from wb_core.export.common import setting_summary
    from wb_core.export.deployment import DeploymentConfig, build
    from wb_core.store import Store, load_results

    db, out = sys.argv[1], {}
    helped = CliRunner().invoke(app, ["profile", "--help"], env={"COLUMNS": "200"}).output
    out["cli"] = "--toy-knob" in helped and "knob" in helped
    out["pipeline_cli"] = "--toy-knob" in CliRunner().invoke(app, ["pipeline", "--help"], env={"COLUMNS": "200"}).output
    out["schema"] = "toy_knobs" in spec_schema({})["properties"]
    spec = SweepSpec(backends="toyrt", toy_knobs="2,3")
    configs = spec.expand()
    out["sweep"] = sorted(c.toy_knob for c in configs) == [2, 3]
    out["key"] = RunConfig(backend="toyrt").key != configs[0].key != configs[1].key
    out["env"] = get("toyrt").process_env(configs[0].to_dict()) == {"TOY_KNOB": str(configs[0].toy_knob)}
    with Store(db) as store:
        store.ensure_study("s", "m.onnx", "onnx", "fp", {}, "hw", {}, spec.to_dict())
        for i, cfg in enumerate(configs):
            store.add_run("s", cfg.key, cfg.to_dict(), "ok", {"throughput": 10.0 + i, "latency_ms_p99": 1.0,
                                                              "latency_ms_p50": 1.0})
    df = load_results(db, "s")
    out["store"] = sorted(df["toy_knob"].tolist()) == [2, 3]
    row = df[df["toy_knob"] == 3].iloc[0].to_dict()
    out["run_name"] = faces.run_name(row).endswith("knob 3")
    frame, differing = api.compare_runs(df)
    out["compare"] = "toy_knob" in differing and "toy_knob" in frame.columns
    out["planning"] = "toy_knob" in same_run_columns() and len(same_settings(df, row["key"])) == 1
    alloc = Allocation(1, 1, 1.0, 1.0, False, row["key"], {"backend": "toyrt", "toy_knob": 3})
    out["allocation"] = allocation_spec(alloc)["toy_knobs"] == [3]
    out["fp32_match"] = "toy_knob" in match_columns()
    dep = build({"name": "s", "model_path": "m.onnx", "model_format": "onnx", "model_fingerprint": "fp"}, row)
    text = dep.to_yaml()
    out["yaml"] = "toy_knob: 3" in text and DeploymentConfig.from_yaml(text) == dep and dep.toy_knob == 3
    out["summary"] = setting_summary(dep).endswith("knob 3")
    from wb_core.ui.state import DashboardState
    from wb_core.ui.sweep_panel import SweepPanel, runs_table

    panel = SweepPanel(DashboardState(db))
    box = panel.axis_boxes.get("toy_knobs")
    out["sweep_tab"] = box is not None and box.description == "Knob (Toy runtime)"
    if box is not None:
        box.value = "5"
        out["sweep_tab"] = out["sweep_tab"] and panel.spec_values()["toy_knobs"] == "5"
    table = runs_table(df)
    out["runs_table"] = "knob" in table.split("</thead>")[0].lower() and "<td>3</td>" in table
    print(out)
''')


def places_reached(script: str, db) -> tuple[dict, list[str]]:
    """Run `script` in a fresh process (its declarations changed there only) with `db`; the places
    it printed as a dict, and those the new declaration did not reach."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, "-c", script, str(db)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    reached = ast.literal_eval(r.stdout.strip().splitlines()[-1])
    return reached, [place for place, ok in reached.items() if ok is not True]


def test_a_new_backend_setting_reaches_every_face_and_record(tmp_path):
    reached, missed = places_reached(NEW_SETTING, tmp_path / "toy.db")
    assert not missed and len(reached) == 16, f"the new setting did not reach: {missed}"


# A precision added to the declaration (in a fresh process, before anything reads it) reaches every
# place that reads the precisions, with no other file changed. Declared from the widest to the narrowest.
NEW_PRECISION = textwrap.dedent('''
    from wb_core import precisions
    from wb_core.precisions import PeakPath, Precision

    fp16 = Precision("fp16", "FP16", "f16", cpu_flags=("avx512_fp16",), by_hint=True,
                     without_flags="this CPU has no AVX512_FP16, so FP16 would be emulated",
                     peak=(PeakPath("avx512_fp16", times_fp32=2, words="FP16 on AVX512_FP16 (2 x FP32)"),
                           PeakPath("", times_fp32=1, words="FP16 as FP32 (no FP16 instructions)")))
    fp32, bf16, int8 = precisions.PRECISIONS
    precisions.PRECISIONS = (fp32, bf16, fp16, int8)
    precisions.NAMES = ("fp32", "bf16", "fp16", "int8")

    from wb_core import api, faces
    from wb_core.axes import GENERATION_PRECISIONS, axis, field_help
    from wb_core.config import SweepSpec
    from wb_core.hardware import _ops_per_cycle, _precision_paths, detect
    from wb_core.analysis.recommend import with_efficiency
    import pandas as pd

    out = {}
    out["choices"] = "fp16" in axis("precision").choices
    out["sweep"] = sorted({c.precision for c in SweepSpec(precisions="fp32,fp16").expand()}) == ["fp16", "fp32"]
    out["help"] = "fp16" in field_help("precisions")
    hw = detect()
    hw.flags = {**hw.flags, "avx512_fp16": False}
    without = hw.supports("fp16")
    hw.flags["avx512_fp16"] = True
    out["cpu_check"] = without == (False, "this CPU has no AVX512_FP16, so FP16 would be emulated") \
        and hw.supports("fp16") == (True, "")
    flags = {"avx512f", "fma", "avx512_fp16"}  # 2 units x 16 lanes x 2 (FMA) = 64 FP32 ops per cycle
    out["peak"] = _ops_per_cycle(flags, 2)["fp16"] == 128 and _ops_per_cycle({"avx512f", "fma"}, 2)["fp16"] == 64
    out["peak_words"] = "FP16 on AVX512_FP16 (2 x FP32)" in _precision_paths(flags)
    runs = pd.DataFrame([{"precision": "fp16", "throughput": 100.0, "threads": 1, "cores": None, "instances": 1,
                          "cores_per_instance": None}])
    done = with_efficiency(runs, {"peak_gflops": {"fp32": 10.0, "fp16": 20.0}, "physical_cores": 1}, 1e8)
    out["recommend_peak"] = abs(float(done["pct_peak_flops"].iloc[0]) - 50.0) < 1e-9  # 10 GFLOP/s of 20
    out["order"] = precisions.narrowest_first() == ("int8", "fp16", "bf16", "fp32")
    out["by_hint"] = "fp16" in precisions.hinted()
    out["generation"] = "fp16" in GENERATION_PRECISIONS
    out["run_name"] = "FP16" in faces.run_name({"backend": "openvino", "precision": "fp16", "batch_size": 1})
    from wb_core.ui.state import DashboardState
    from wb_core.ui.sweep_panel import SweepPanel
    import sys

    panel = SweepPanel(DashboardState(sys.argv[1]))
    out["sweep_tab"] = [b.option for b in panel.precisions.boxes] == ["fp32", "bf16", "fp16", "int8"]
    print(out)
''')


def test_a_new_precision_reaches_what_reads_it(tmp_path):
    reached, missed = places_reached(NEW_PRECISION, tmp_path / "p.db")
    assert not missed and len(reached) == 12, f"the new precision did not reach: {missed}"


DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def test_the_architecture_doc_counts_the_files_each_addition_takes():
    import re

    rows = dict(re.findall(r"^\| (an? [^|]+?) \| (\d+) \|", DOC.read_text(encoding="utf-8"), re.M))
    found = _scan()
    modules_of = lambda *kinds: {m for (m, kind) in found if kind in kinds}  # noqa: E731 - a short reading
    expected = {
        # its module and its line in formats.py, plus any module still listing formats
        "an export format": 2 + len(modules_of("formats")),
        # its panel and its line in TABS
        "a dashboard tab": 2 if "TABS" in (SRC / "ui" / "app.py").read_text(encoding="utf-8") else 0,
        # its session module and its registration (test_backend_names keeps the rest from naming it)
        "a backend": 2 if all(registry.get(n).session.startswith("wb_core.backends.") for n in registry.names()) else 0,
        # its Axis: test_a_new_backend_setting_reaches_every_face_and_record adds one and changes nothing else
        "a sweep setting": 1 + len(modules_of("settings") - {m for (m, _k) in KNOWN}),
        # its declaration, the variant planner, the registry's refusals (test_a_new_precision_reaches_what_reads_it
        # adds one and changes nothing else), and every module still listing all the precisions
        "a precision": 3 + len(modules_of("precisions")),
    }
    assert {k: int(rows.get(k, -1)) for k in expected} == expected


def test_one_p99_rule_and_its_words():
    from wb_core.analysis.words import p99_limit_words, p99_verdict
    from wb_core.limits import within_p99

    assert within_p99(5.0, 5) and not within_p99(5.01, 5) and within_p99(1e9, None)
    assert not within_p99(float("nan"), 5) and not within_p99(None, None) and not within_p99(1.0, 5, saturated=True)
    assert p99_verdict(2.0, 5) == "p99 2.00 ms, within the limit" and p99_verdict(7.0, 5).endswith("over the limit")
    assert p99_verdict(2.0, 5, saturated=1) == "requests queued up"
    assert p99_limit_words(5) == "at p99 ≤ 5 ms" and p99_limit_words(None) == "without a p99 limit"


def test_a_plan_without_a_p99_limit_is_exported_in_its_words():
    from wb_core.analysis.planning import CapacityPlan
    from wb_core.export.deployment import build
    from wb_core.export.formats import render

    run = {"backend": registry.ir_backend(), "precision": "fp32", "batch_size": 1, "key": "k1", "threads": 2,
           "throughput": 100.0, "latency_ms_p99": 3.0}
    dep = build({"name": "s", "model_path": "m.xml", "model_format": "openvino", "model_fingerprint": "f"}, run)
    plan = CapacityPlan(target_rate=50.0, p99_ms=None, per_instance_rate=100.0, instances=2, cores_per_instance=2,
                        instances_per_machine=1, replicas=2, cpu_request=2, headroom=0.2, source_key="k1", basis="b")
    dep.capacity = plan.to_dict()
    for fmt in ("kserve", "triton"):
        assert "without a p99 limit" in " ".join(render(dep, fmt).notes), fmt
    assert plan.sentence() == "To serve 50 requests/s you need 2 replicas of 1 instance × 2 cores: 4 CPUs."
