"""The axes table is the one place a sweep setting is declared: the spec, the run config, the schema,
the CLI options and the expansion all follow it, so they cannot drift apart."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

from wb_core.config import MeasureSettings, RunConfig, SweepSpec, load_spec_file, load_spec_schema, validate_spec_data
from wb_core.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_FILE = ROOT / "src" / "wb_core" / "schemas" / "sweep_spec.schema.json"


def test_the_shipped_schema_is_the_generated_one():
    # After changing an axis: PYTHONPATH=src python -m wb_core.config rewrites it.
    assert json.loads(SCHEMA_FILE.read_text()) == load_spec_schema()


def test_the_schema_accepts_every_sweep_field_and_measurement_setting():
    schema = load_spec_schema()
    spec_fields = [f.name for f in dataclasses.fields(SweepSpec)]
    # The fields an earlier hand-written schema refused although SweepSpec took them.
    assert {"repeats", "seq_lens", "shapes"} <= set(spec_fields)
    assert set(spec_fields) | {"settings", "inputs"} == set(schema["properties"])
    data = SweepSpec().to_dict()
    data["settings"] = dataclasses.asdict(MeasureSettings())
    data["settings"].pop("RANGES", None)
    assert "min_requests" in data["settings"]
    jsonschema.validate(data, schema)
    validate_spec_data(data)


def test_a_spec_file_takes_fields_the_old_schema_refused(tmp_path):
    f = tmp_path / "spec.yaml"
    f.write_text(textwrap.dedent("""\
        backends: [openvino, onnxruntime]
        threads: [1, 2]
        repeats: 3
        seq_lens: [32, 128]
        shapes: [image=1x3x224x224, image=1x3x320x320]
        execution_modes: [sequential, parallel]
        settings: {min_requests: 50, max_time_s: 2}
        """))
    spec, settings, _ = load_spec_file(f)
    assert spec.repeats == 3 and spec.seq_lens == [32, 128] and spec.threads == [1, 2]
    assert spec.shapes == ["image=1x3x224x224", "image=1x3x320x320"]
    assert spec.execution_modes == ["sequential", "parallel"]
    assert settings.min_requests == 50 and settings.max_time_s == 2


def test_a_spec_file_with_an_unknown_field_names_it(tmp_path):
    f = tmp_path / "spec.yaml"
    f.write_text("threads: [1]\nexecution_mode: [parallel]\n")
    with pytest.raises(ConfigError, match="Unknown sweep field.*execution_mode"):
        load_spec_file(f)


def test_every_axis_is_a_spec_field_a_run_config_field_and_a_cli_option():
    from wb_core.axes import all_axes

    run_fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    spec_fields = {f.name for f in dataclasses.fields(SweepSpec)}
    help_text = subprocess.run([sys.executable, "-m", "wb_core.cli", "profile", "--help"], capture_output=True,
                               text=True, env={"COLUMNS": "250", "PATH": "", "PYTHONPATH": str(ROOT / "src")}).stdout
    for a in all_axes():
        assert a.name in run_fields and a.spec in spec_fields, a.name
        if a.flag:
            assert a.flag in help_text, a.flag
    # A default setting is left out of the run key: adding an axis changes no stored key.
    assert RunConfig("onnxruntime", execution_mode=None).key == RunConfig("onnxruntime").key
    assert RunConfig("onnxruntime", execution_mode="parallel").key != RunConfig("onnxruntime").key


def test_streams_and_hint_rules_come_from_the_openvino_declaration():
    spec = SweepSpec(threads="1,2", streams="1,2", hints="none,throughput", concurrency="auto")
    got = [(c.threads, c.streams, c.hint, c.concurrency) for c in spec.expand()]
    # Hint and streams exclude each other; 2 streams on 1 thread would run as 1 stream; auto
    # concurrency takes the streams (1 without them).
    assert got == [(1, 1, None, 1), (1, None, "throughput", 1), (2, 1, None, 1), (2, 2, None, 2),
                   (2, None, "throughput", 1)]
    assert spec.notes == ["2 streams with 1 thread left out: OpenVINO gives each stream a thread of its own, so it "
                          "would run as fewer streams."]
    assert spec.size() >= len(got)


TOY = '''
from wb_core.axis import Axis, whole_numbers
from wb_core.backends.registry import BackendInfo, register
register(BackendInfo(name="toy", description="toy", formats=("openvino",), session="toy:S", distributions=(),
                     axes=(Axis("toy_level", "toy_levels", whole_numbers("Toy level", 9), "Toy levels, e.g. 1,2.",
                                "Toy level", "--toy-level", ordered=True, env=("TOY_LEVEL",)),)))
'''


def test_an_axis_declared_by_a_backend_reaches_every_place_that_lists_axes(tmp_path):
    """A backend's own axis, declared once in its registration, is a spec field, a run config field,
    part of the key, a schema entry, a CLI option, a worker variable and a search axis."""
    (tmp_path / "sitecustomize.py").write_text(TOY)
    script = textwrap.dedent('''
        import json, sys
        from wb_core.config import SweepSpec, load_spec_schema
        from wb_core.backends.registry import get
        from wb_core.sweep.search import Space
        spec = SweepSpec(backends="toy,openvino", toy_levels="1,3", batch_sizes="1")
        configs = spec.expand()
        print(json.dumps({
            "levels": sorted((c.backend, c.toy_level) for c in configs),
            "size": spec.size(),
            "schema": "toy_levels" in load_spec_schema()["properties"],
            "env": get("toy").process_env(configs[0].to_dict()),
            "keys": len({c.key for c in configs}),
            "search": "toy_level" in Space(configs).axes,
        }))
    ''')
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT / 'src'}", "PATH": "", "COLUMNS": "250"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["levels"] == [["openvino", None], ["toy", 1], ["toy", 3]]
    assert got["size"] == 3 and got["keys"] == 3 and got["schema"] and got["search"]
    assert got["env"] == {"TOY_LEVEL": "1"}
    help_text = subprocess.run([sys.executable, "-m", "wb_core.cli", "profile", "--help"], capture_output=True,
                               text=True, env=env).stdout
    assert "--toy-level" in help_text and "Toy levels, e.g. 1,2." in help_text
    bad = subprocess.run([sys.executable, "-c", "from wb_core.config import SweepSpec; SweepSpec(toy_levels='10')"],
                         capture_output=True, text=True, env=env)
    assert "Toy level of 10 is beyond the supported maximum of 9." in bad.stderr


def test_an_error_about_a_setting_names_its_field_and_each_face_words_it(tmp_path):
    """The core says which setting is wrong (a field of the table); the CLI says it as its flag, the
    dashboard as its label, and neither shows the other's words."""
    from wb_core.axes import setting_flag, setting_label

    with pytest.raises(ConfigError) as caught:
        SweepSpec(threads="1,x")
    e = caught.value
    assert e.field == "threads" and str(e) == "Threads must be whole numbers or 'auto'; got 'x'."
    assert e.worded(setting_flag, prefix=True) == "--threads: Threads must be whole numbers or 'auto'; got 'x'."
    assert e.worded(setting_label) == str(e)
    with pytest.raises(ConfigError) as caught:
        SweepSpec(backends="onnxruntime", graph_optimizations="max")
    assert caught.value.field == "graph_optimizations"
    with pytest.raises(ConfigError) as caught:
        SweepSpec(seq_lens="0")
    assert caught.value.field == "seq_lens" and str(caught.value) == "Sequence length must be at least 1; got 0."
    assert caught.value.worded(setting_flag, prefix=True) == "--dynamic-size: Sequence length must be at least 1; got 0."
    assert caught.value.worded(setting_label) == "Sequence length must be at least 1; got 0."

    out = subprocess.run([sys.executable, "-m", "wb_core.cli", "profile", "lenet-digits", "--execution-mode", "fast",
                          "--db", str(tmp_path / "x.db")], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""})
    assert out.returncode == 2
    assert out.stderr.strip() == ("Error: --execution-mode: Unknown execution mode 'fast'; choose from auto, "
                                  "sequential, parallel.")
    assert not (tmp_path / "x.db").exists()
    f = tmp_path / "spec.yaml"  # a spec file's error names the file's field, not a flag
    f.write_text("seq_lens: [0]\n")
    with pytest.raises(ConfigError) as caught:
        load_spec_file(f)
    assert str(caught.value) == f"Sweep spec '{f}' field seq_lens: Sequence length must be at least 1; got 0."
    assert caught.value.worded(setting_flag, prefix=True) == str(caught.value)


def test_the_dashboard_words_a_setting_error_with_its_label():
    pytest.importorskip("ipywidgets")
    import html

    from wb_core.axes import setting_flag
    from wb_core.config import InputOptions
    from wb_core.ui.widgets import MessageArea

    area = MessageArea()
    with pytest.raises(ConfigError) as caught:
        InputOptions(dynamic_size=0)
    area.error(caught.value)
    shown = html.unescape(area.text.value)
    assert "The size for dynamic dimensions (Sequence lengths) must be" in shown and "--" not in shown
    assert "(--dynamic-size) must be" in caught.value.worded(setting_flag, prefix=True)
