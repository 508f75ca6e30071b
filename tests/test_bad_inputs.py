"""Every bad input gives one plain sentence naming what and where, a non-zero exit, and no traceback."""

import shutil
import subprocess
import sys

import pytest

import bad_corpus
from wb_core.config import SweepSpec
from wb_core.store import load_results
from wb_core.sweep.local import run_sweep


def wb(*args):
    return subprocess.run([sys.executable, "-m", "wb_core", *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, lenet_dir, lenet_ir):
    return bad_corpus.build(tmp_path_factory.mktemp("corpus"), lenet_dir, lenet_ir)


CASES = ["truncated.keras", "random.keras", "truncated.onnx", "text_as.onnx", "truncated_savedmodel",
         "garbage_ir/model.xml", "short_bin/model.xml", "lonely_ir/model.xml", "empty_dir", "not_savedmodel",
         "model.pb", "weights.h5", "model.bin", "onnx_renamed.keras", "no_signatures", "lambda_layer.keras",
         "unsupported_op.onnx"]


def one_error_line(r):
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    errors = [ln for ln in lines if ln.startswith("Error:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_bad_model_files(corpus, name, tmp_path):
    path, needle = corpus[name]
    db = tmp_path / "r.db"
    line = one_error_line(wb("profile", path, "--db", db, "--quiet", "--max-time", "0.3"))
    assert needle in line, line
    assert len(line) < 600
    # Nothing was written for a model that cannot be read.
    assert not db.exists() or "no studies" in wb("results", "--study", "x", "--db", db).stderr


def test_corpus_fast_subset(corpus, tmp_path):
    """The cases that need no TensorFlow child run in the default suite."""
    for name in ["truncated.onnx", "lonely_ir/model.xml", "empty_dir", "model.pb", "weights.h5",
                 "unsupported_op.onnx", "garbage_ir/model.xml"]:
        path, needle = corpus[name]
        line = one_error_line(wb("profile", path, "--db", tmp_path / "r.db", "--quiet"))
        assert needle in line, (name, line)


def test_path_with_spaces_and_non_ascii_works(lenet_ir, tmp_path, fast):
    d = tmp_path / "mödel dir ü"
    d.mkdir()
    shutil.copy(lenet_ir, d / "le net ✓.xml")
    shutil.copy(lenet_ir.with_suffix(".bin"), d / "le net ✓.bin")
    db = tmp_path / "résultats db.db"
    s = run_sweep(d / "le net ✓.xml", SweepSpec(), db, "ü study", settings=fast)
    assert s.ok == 1 and load_results(db, "ü study").status.iloc[0] == "ok"


@pytest.mark.parametrize("args,needle", [
    (["--batch", "0"], "Batch size must be at least 1"),
    (["--batch", "-3"], "Batch size must be at least 1"),
    (["--batch", "1e9"], "whole numbers"),
    (["--batch", "100000000"], "beyond the supported maximum"),
    (["--threads", "0"], "Threads must be at least 1"),
    (["--threads", "-1"], "Threads must be at least 1"),
    (["--streams", "0"], "Streams must be at least 1"),
    (["--concurrency", "0"], "Concurrency must be at least 1"),
    (["--cores", "0-99999999"], "absurdly large"),
    (["--cores", "5000"], "does not offer"),
    (["--shape", "image=1x100000x100000x1"], "too large"),
    (["--shape", "image=1x0x8x1"], "zero, negative or absurd"),
    (["--shape", "image=1x8x8"], "has 3 dimensions"),
    (["--shape", "nonsense"], "NAME=1x128"),
    (["--int-range", "9:1"], "low < high"),
    (["--max-time", "0"], "positive number"),
    (["--max-time", "-5"], "positive number"),
    (["--timeout", "-1"], "--timeout (seconds a silent worker is given) must be"),
    (["--timeout", "nan"], "must be a finite number"),
    (["--rate", "-10"], "Rate must be at least"),
    (["--instances", "99", "--cores-per-instance", "1"], "this machine offers"),
    (["--precision", "fp64"], "Unknown precision"),
    (["--backend", "torch"], "Unknown backend"),
    (["--hint", "fastest"], "Unknown performance hint"),
    (["--onednn", "maybe"], "on, off or auto"),
])
def test_bad_flags(lenet_ir, tmp_path, args, needle):
    line = one_error_line(wb("profile", lenet_ir, *args, "--db", tmp_path / "r.db", "--quiet", "--max-time", "0.3")
                          if "--max-time" not in args else
                          wb("profile", lenet_ir, *args, "--db", tmp_path / "r.db", "--quiet"))
    assert needle in line, line


@pytest.mark.parametrize("text,needle", [
    ("threads: [1, 2\nbatch_sizes: [1]\n", "not valid YAML at line"),
    ("!!python/object/apply:os.system ['echo pwned']\n", "tag that is not allowed"),
    ("threads: !!python/name:os.system\n", "tag that is not allowed"),
    ("- 1\n- 2\n", "must be a mapping"),
    ("threadz: [1]\n", "Unknown sweep field"),
    ("threads: [0]\n", "Threads must be at least 1"),
    ("settings: {max_time_s: -1}\n", "positive number"),
    ("settings: {bogus: 1}\n", "bogus"),
])
def test_bad_spec_yaml(lenet_ir, tmp_path, text, needle):
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    marker = tmp_path / "pwned"
    line = one_error_line(wb("profile", lenet_ir, "--spec", spec, "--db", tmp_path / "r.db", "--quiet"))
    assert needle in line, line
    assert not marker.exists()


def test_good_spec_yaml_runs(lenet_ir, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("backends: [openvino]\nbatch_sizes: [1, 2]\ncores: [none]\n"
                    "settings: {max_time_s: 0.3, window_s: 0.1, warmup_s: 0.05}\n")
    r = wb("profile", lenet_ir, "--spec", spec, "--db", tmp_path / "r.db", "--study", "y", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "2 ok" in r.stdout
