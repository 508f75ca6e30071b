"""A model is read once into a description that every later step reads, and `profile` takes a spec
and four option objects (any field of them also by name)."""

from __future__ import annotations

import inspect

import pytest

from wb_core import api
from wb_core.variants import description as described_module
from wb_core.variants.description import ModelDescription, describe_model


def test_an_ir_is_described_as_openvino_reads_it(lenet_ir):
    import openvino as ov

    d = describe_model(lenet_ir)
    model = ov.Core().read_model(lenet_ir)  # the reference: OpenVINO's own reading of the file
    assert d.format == "openvino" and d.path == lenet_ir
    assert [s.name for s in d.inputs] == [p.get_any_name() for p in model.inputs]
    assert list(d.inputs[0].shape[1:]) == [dim.get_length() for dim in list(model.inputs[0].get_partial_shape())[1:]]
    assert len(d.outputs) == len(model.outputs)
    # LeNet is made of convolutions and has no attention: the CNN family, whose reason counts them
    n_conv = sum(op.get_type_name() == "Convolution" for op in model.get_ops())
    assert n_conv > 0 and d.family == "cnn" and f"{n_conv} convolution" in d.family_reason
    assert d.text_roles == {} and not d.is_text and d.quantized is None
    assert ModelDescription.from_dict(d.to_dict()) == d


@pytest.mark.slow  # long; `make test-all` runs it
def test_a_keras_file_is_described_by_keras(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "tiny.keras"
    # Keras is built in a child process, as the workbench reads it: TensorFlow stays out of the test process.
    subprocess.run([sys.executable, "-c", "import keras, sys; keras.Sequential([keras.Input((5,), name='features'), "
                    "keras.layers.Dense(3)]).save(sys.argv[1])", str(path)], check=True, capture_output=True)
    d = describe_model(path)
    assert d.format == "keras" and d.inputs[0].shape == (-1, 5) and d.inputs[0].dtype == "float32"
    # The family is read from the IR OpenVINO converts the model to; this Sequential model is one that
    # OpenVINO's converter cannot trace, and the description says so instead of guessing.
    assert d.family is None and "OpenVINO could not convert it" in d.family_reason
    assert ("Family", f"not read ({d.family_reason})") in d.facts()


def test_a_study_reads_the_model_once(lenet_ir, tmp_path, fast, monkeypatch):
    """A grid of four points, then a smart search on the same model: one child process reads the model."""
    described_module._DESCRIBED.clear()
    reads = []
    real = described_module.run_task

    def counting(task, **kw):
        if task["task"].endswith(":task_describe"):
            reads.append(task["path"])
        return real(task, **kw)

    monkeypatch.setattr(described_module, "run_task", counting)
    db = tmp_path / "once.db"
    df = api.profile(lenet_ir, db=db, study="grid", settings=fast, batch_sizes="1,2", threads="1,2")
    assert len(df) == 4 and (df["status"] == "ok").all()
    api.profile(lenet_ir, db=db, study="smart", settings=fast, batch_sizes="1,2", search="smart", budget=2)
    assert reads == [str(lenet_ir)], reads
    # a changed file is read again: the description belongs to the content, not the name
    copy = tmp_path / "m.xml"
    copy.write_bytes(lenet_ir.read_bytes())
    copy.with_suffix(".bin").write_bytes(lenet_ir.with_suffix(".bin").read_bytes())
    describe_model(copy)
    assert len(reads) == 2


def test_profile_takes_a_spec_and_four_option_objects():
    params = inspect.signature(api.profile).parameters
    named = [n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    assert named[:2] == ["model", "spec"]
    assert {"settings", "inputs", "precision_options", "run"} <= set(named)
    assert len(named) <= 12, named


def test_keywords_land_on_the_object_that_declares_them():
    spec, settings, inputs, precision, run = api._profile_request(
        None, None, None, None, None,
        {"batch_sizes": "1,8", "threads": [1, 2], "max_time": 2, "warmup_s": 0.3, "text": "lines.txt",
         "tokenizer": "tokenizer.json", "calib_size": 50, "accuracy_guard": 0.02, "metric": "top1",
         "search": "smart", "budget": 5, "seq_lens": "32,128", "shapes": "image=1x3x8x8,1x3x12x12", "repeats": 3})
    assert spec.batch_sizes == [1, 8] and spec.threads == [1, 2] and spec.repeats == 3
    assert spec.seq_lens == [32, 128] and spec.shapes == ["image=1x3x8x8", "image=1x3x12x12"]
    assert settings.max_time_s == 2 and settings.warmup_s == 0.3
    # `shapes` is the spec's axis, not InputOptions.shapes
    assert inputs.text == "lines.txt" and inputs.tokenizer == "tokenizer.json" and inputs.shapes == {}
    assert precision.subset_size == 50 and precision.guard.limit == 0.02 and precision.metric == "top1"
    assert run.search == "smart" and run.budget == 5 and run.searches


def test_none_by_name_leaves_the_default():
    spec, settings, inputs, precision, run = api._profile_request(
        None, None, None, None, None, {"input_map": None, "timeout_s": None, "seq_lens": None, "max_time": None})
    assert precision.input_map == {} and run.timeout_s is None and spec.seq_lens == [None]
    assert settings.max_time_s == api.MeasureSettings().max_time_s


def test_a_keyword_replaces_that_axis_of_a_given_spec():
    base = api.SweepSpec(batch_sizes="1,2", threads="1")
    spec, *_ = api._profile_request(base, None, None, None, None, {"threads": "2"})
    assert spec.batch_sizes == [1, 2] and spec.threads == [2] and base.threads == [1]


def test_only_the_shape_axis_shares_its_name_between_the_objects():
    """A name declared by two objects would be routed to the first; only `shapes` is, on purpose."""
    import dataclasses

    kinds = [api.SweepSpec, api.MeasureSettings, api.InputOptions, api.PrecisionOptions, api.RunOptions]
    seen, shared = set(), set()
    for kind in kinds:
        names = {f.name for f in dataclasses.fields(kind)}
        shared |= seen & names
        seen |= names
    assert shared == {"shapes"}


def test_an_unknown_keyword_names_the_closest_one():
    with pytest.raises(TypeError, match="did you mean 'batch_sizes'"):
        api._profile_request(None, None, None, None, None, {"batch_size": "1,8"})


def test_run_options_refuse_what_cannot_run_together():
    with pytest.raises(api.ConfigError, match="needs a cluster address"):
        api.RunOptions(hosts=["a"])
    with pytest.raises(api.ConfigError, match="smart search runs on this machine"):
        api.RunOptions(cluster="tcp://h:8786", search="smart")
    with pytest.raises(api.ConfigError):
        api.RunOptions(ci_target=-1)


def test_wb_inspect_prints_the_description(lenet_ir):
    from typer.testing import CliRunner

    from wb_core.cli import app

    res = CliRunner().invoke(app, ["inspect", str(lenet_ir)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == f"Path:        {lenet_ir}" and lines[1] == "Format:      OpenVINO IR"
    assert lines[2].startswith("Input 1:     image") and any(line.startswith("Family:      cnn (") for line in lines)
