"""Core messages name a setting, never a CLI flag; each face words it: the CLI as its flag, the
dashboard as its label.

A message of the core says `errors.setting(field, words)`; `field` is a field of the axes table
(axes.py, backends/registry.py) or of the options table (options.py). The CLI renders an error
with `cli.app.worded` (and a note with `cli.app.said`), the dashboard with `MessageArea.error`
(and `message_html` for everything it shows). These tests raise one real error (or build one real
note) per setting the core names, render it in both faces, and scan the core's strings for a
`--flag` that would reach a dashboard user.
"""

from __future__ import annotations

import ast
import html
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from wb_core.errors import WorkbenchError

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "wb_core"
FACES = ("cli", "ui")  # their own words are theirs to choose
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9_-]*")

# Core files that write another program's command line (servers, docker, pip, Dask): flags of that
# program may appear there. A flag of `wb` itself may not, unless the pair is listed in ALLOWED.
OTHER_PROGRAMS = {
    "export/triton.py": "tritonserver's, docker's and perf_analyzer's command lines in the exported scripts",
    "export/tritonserver.py": "the tritonserver command the serve check starts, and pip's install line",
    "export/tfserving.py": "tensorflow_model_server's and docker's command lines",
    "export/ovms.py": "OpenVINO Model Server's and docker's command lines",
    "optimum_export.py": "optimum-cli's command line (the Hugging Face folder's conversion)",
    "export/kserve.py": "the model servers' arguments in KServe manifests, and the kubelet's flag",
    "fleet/dask_executor.py": "Dask's `dask worker --name`, the worker's own name",
}
ALLOWED = {
    ("optimum_export.py", "--weight-format"): "optimum-cli's own --weight-format, the precision it exports in",
    ("optimum_export.py", "--model"): "optimum-cli's own --model, the Hugging Face folder it reads",
    ("axes.py", "--spec"): "the spec file's JSON schema says which command reads such a file",
    ("export/tfserving.py", "--name"): "docker run's --name, the container's name",
    ("export/tfserving.py", "--port"): "tensorflow_model_server's gRPC port",
    ("export/triton.py", "--name"): "docker run's --name, the container's name",
    ("export/ovms.py", "--name"): "docker run's --name, the container's name",
    ("export/ovms.py", "--port"): "OpenVINO Model Server's gRPC port",
    ("fleet/dask_executor.py", "--name"): "Dask's `dask worker --name`, not a wb option",
}


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _declared_flags(tree: ast.AST) -> set[int]:
    """The flag strings of the declarations, `Axis(...)` and `Option(...)`: the one place a flag is written."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in ("Axis", "Option"):
            for arg in (*node.args, *(k.value for k in node.keywords)):
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and FLAG.fullmatch(arg.value):
                    ids.add(id(arg))
    return ids


def core_flags(root: Path = SRC) -> list[tuple[str, int, str]]:
    """(file, line, flag) for each `--flag` in a string of the core (docstrings and the declarations aside)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] in FACES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree) | _declared_flags(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                for flag in FLAG.findall(node.value):
                    found.append((rel, node.lineno, flag))
    return found


def wb_flags() -> set[str]:
    """Every option of every `wb` command, read from the CLI itself."""
    import typer

    from wb_core.cli import app

    flags: set[str] = set()

    def walk(cmd):
        for p in cmd.params:
            flags.update(o for o in (*p.opts, *p.secondary_opts) if o.startswith("--"))
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    assert {"--db", "--study", "--threads", "--dynamic-size"} <= flags  # the walk reaches every command
    return flags


def offending(found, ours: set[str]) -> list[str]:
    bad = []
    for rel, line, flag in found:
        if (rel, flag) in ALLOWED:
            continue
        if rel in OTHER_PROGRAMS and flag not in ours:
            continue
        bad.append(f"{rel}:{line} names {flag}")
    return bad


def test_no_core_message_names_a_cli_flag():
    """A core string with `--flag` reaches dashboard users as words they cannot type: name the
    setting with errors.setting(field, words) instead (and declare it in options.py if it is not an axis)."""
    bad = offending(core_flags(), wb_flags())
    assert not bad, "core strings naming CLI flags:\n" + "\n".join(bad)


def test_the_flag_scan_catches_a_new_flag(tmp_path):
    """The scan sees flags in plain and f-strings, skips docstrings, and lets another program's flags
    through only where that program's command line is written."""
    pkg = tmp_path / "wb_core"
    (pkg / "export").mkdir(parents=True)
    (pkg / "models.py").write_text('"""Docstring: --dynamic-size is fine here."""\n'
                                   'def f(n):\n    raise ValueError(f"give --dynamic-size {n}")\n'
                                   'A = Axis("seq_len", "seq_lens", flag="--dynamic-size")\n')
    (pkg / "export" / "ovms.py").write_text('CMD = ["docker", "run", "--rm", "--name", "x"]\nNOTE = "use --db"\n')
    found = core_flags(pkg)
    assert sorted((r, f) for r, _, f in found) == [("export/ovms.py", "--db"), ("export/ovms.py", "--name"),
                                                   ("export/ovms.py", "--rm"), ("models.py", "--dynamic-size")]
    bad = offending(found, {"--dynamic-size", "--db", "--name"})
    assert sorted(bad) == ["export/ovms.py:2 names --db", "models.py:3 names --dynamic-size"]


def test_every_allowance_is_still_needed():
    found = {(rel, flag) for rel, _, flag in core_flags()}
    assert set(ALLOWED) <= found, f"allowed but no longer there: {sorted(set(ALLOWED) - found)}"
    files = {rel for rel, _ in found}
    assert set(OTHER_PROGRAMS) <= files, f"listed but naming no flag: {sorted(set(OTHER_PROGRAMS) - files)}"


def _setting_fields() -> set[tuple[str, str]]:
    """(file, field) for each `setting("field", ...)` call in src/wb_core."""
    out = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "setting"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                out.add((path.relative_to(SRC).as_posix(), node.args[0].value))
    return out


def test_every_named_setting_has_a_flag_and_a_label():
    from wb_core.axes import setting_flag, setting_label

    fields = _setting_fields()
    assert len({f for _, f in fields}) >= 25  # the scan sees the calls
    ours = wb_flags()
    for rel, field in sorted(fields):
        flag, label = setting_flag(field), setting_label(field)
        assert flag and label, f"{rel}: setting {field!r} is in neither the axes table nor options.OPTIONS"
        assert flag in ours, f"{rel}: {field!r} is worded as {flag}, which no wb command has"
        assert "--" not in label


def test_every_declared_option_is_a_real_wb_option():
    from wb_core.options import OPTIONS

    ours = wb_flags()
    assert len({o.field for o in OPTIONS}) == len(OPTIONS)
    for o in OPTIONS:
        assert o.flag in ours, f"options.OPTIONS says {o.field} is {o.flag}, which no wb command has"
        assert o.label and "--" not in o.label


# ---- one real message per setting, in both faces ----

def _raises(fn) -> WorkbenchError:
    with pytest.raises(WorkbenchError) as caught:
        fn()
    return caught.value


def _spec(name="x", shape=(1, 8, 8, 3), dtype="float32"):
    return SimpleNamespace(name=name, shape=list(shape), dtype=dtype, describe=lambda: f"{name} {shape} {dtype}")


def _errors(tmp_path) -> dict[str, WorkbenchError]:
    """One error raised by the core for each setting, keyed by the field it names."""
    from wb_core.analysis.confirm import check_model_unchanged
    from wb_core.analysis.planning import single_instance_curve
    from wb_core.analysis.seq_mix import mix_lengths
    from wb_core.config import InputOptions, SweepSpec, check_max_rounds, parse_ci_target
    from wb_core.export import check_name, with_capacity
    from wb_core.export.servecheck import _settings, serve_check
    from wb_core.export.tritonserver import find_tritonserver
    from wb_core.fleet.compare import compare_host_types
    from wb_core.parsing import check_timeout
    from wb_core.paths import check_output_file
    from wb_core.pipeline.queue import SlotQueue
    from wb_core.store import Store

    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    return {
        "text": _raises(lambda: InputOptions(text="q.txt")),
        "int_ranges": _raises(lambda: InputOptions(int_ranges={"nosuch": (0, 5)}).check_names([_spec("ids")])),
        "shapes": _raises(lambda: InputOptions(shapes={"nosuch": (1, 2)}).check_names([_spec("ids")])),
        "threads": _raises(lambda: SweepSpec(batch_sizes=list(range(1, 101)), threads=list(range(1, 301))).check_size()),
        "ci": _raises(lambda: parse_ci_target("three")),
        "max_rounds": _raises(lambda: check_max_rounds(0)),
        "timeout_s": _raises(lambda: check_timeout(-1)),
        "out": _raises(lambda: check_output_file(tmp_path)),
        "db": _raises(lambda: Store(empty, readonly=True)),
        "serving_name": _raises(lambda: check_name("модель")),
        "target_rate": _raises(lambda: with_capacity(None, empty, "s", 100.0, None)),
        "max_time_s": _raises(lambda: _settings({}, -1)),
        "port": _raises(lambda: serve_check(empty, "s", "k", port=0)),
        "tritonserver": _raises(lambda: find_tritonserver(tmp_path / "no" / "tritonserver")),
        "seq_lens": _raises(lambda: mix_lengths(pd.DataFrame({"status": ["ok"]}), {128: 1.0})),
        "model": _raises(lambda: check_model_unchanged({"model_path": str(tmp_path / "gone.xml")}, None, "s")),
        "cores": _raises(lambda: single_instance_curve(pd.DataFrame({"status": ["ok"], "instances": [1],
                                                                      "throughput": [1.0]}))),
        "cluster": _raises(lambda: compare_host_types(pd.DataFrame({"status": ["ok"]}), [])),
        "queue_depth": _raises(lambda: SlotQueue.create(10**6, 10**3, (10**3, 10**3))),
    }


CLI_SAYS = {  # the flag words the CLI shows, where the old messages had them
    "text": ["--text", "--tokenizer"], "int_ranges": ["--int-range names input 'nosuch'"],
    "shapes": ["--shape names input 'nosuch'"], "threads": ["narrow --threads (300 values) or --batch (100 values)"],
    "ci": ["--ci must be a percentage"], "max_rounds": ["--max-rounds must allow"],
    "timeout_s": ["--timeout (seconds a silent worker is given)"], "out": ["--out '"], "db": ["choose another database (--db)"],
    "serving_name": ["--name my-model"], "target_rate": ["--target-rate needs", "--max-p99-ms"],
    "max_time_s": ["--max-time must be"], "port": ["--port must be"], "tritonserver": ["--tritonserver"],
    "seq_lens": ["(--dynamic-size)"], "model": ["(--model)"], "cores": ["--cores first1"],
    "cluster": ["(--cluster)"], "queue_depth": ["(--queue-depth)"],
}


def test_each_setting_error_says_its_flag_in_the_cli_and_its_label_in_the_dashboard(tmp_path):
    pytest.importorskip("ipywidgets")
    from wb_core.axes import setting_label
    from wb_core.cli.app import worded
    from wb_core.ui.widgets import MessageArea

    errors = _errors(tmp_path)
    assert set(errors) == set(CLI_SAYS)
    for field, e in errors.items():
        assert field in {e.field, *re.findall("\x1f([a-z_]+)\x1e", e.template)}, (field, e.template)
        cli = worded(e)
        for words in CLI_SAYS[field]:
            assert words in cli, (field, cli)
        area = MessageArea()
        area.error(e)
        shown = html.unescape(re.sub("<[^>]+>", "", area.text.value))
        assert "--" not in shown and "\x1f" not in shown, (field, shown)
        assert setting_label(field) in shown, (field, shown)
        assert "\x1f" not in str(e) and "--" not in str(e), (field, str(e))  # the API's words: no face's


def test_notes_are_worded_by_each_face():
    """Notes travel as strings: the CLI says the flag, the dashboard the label."""
    from wb_core.analysis.results_view import busy_notes
    from wb_core.cli.app import said as cli_said
    from wb_core.ui.widgets import message_html

    (note,) = busy_notes(pd.DataFrame({"busy": [True], "status": ["ok"]}))
    assert "--remeasure-busy" in cli_said(note)
    shown = html.unescape(message_html(note))
    assert "Re-measure busy points" in shown and "--" not in shown and "\x1f" not in shown


def test_the_cli_prints_the_flag_for_a_core_error(tmp_path):
    """End to end through `wb`: a core error about a setting that is not an axis names its flag."""
    r = subprocess.run([sys.executable, "-m", "wb_core", "profile", "lenet-digits", "--ci", "three", "--db",
                        str(tmp_path / "r.db")], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert r.returncode == 2
    assert "Error: --ci must be a percentage such as 3%; got 'three'." in r.stderr, r.stderr
    assert not (tmp_path / "r.db").exists()
