"""Every bad input gives one plain sentence naming what and where, a non-zero exit, and no traceback."""

import shutil
import subprocess
import sys
from pathlib import Path

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


# ---- inputs found by feeding the tool as a new user would: each refused before anything runs ----

@pytest.fixture(scope="module")
def onnx_corpus(tmp_path_factory):
    return bad_corpus.onnx_cases(tmp_path_factory.mktemp("onnx"))


@pytest.mark.parametrize("name", ["no_inputs.onnx", "no_layers.onnx", "future_opset.onnx", "rank0.onnx",
                                  "string_input.onnx"])
def test_models_no_sweep_can_measure_are_refused(onnx_corpus, name, tmp_path):
    path, needle = onnx_corpus[name]
    db = tmp_path / "r.db"
    line = one_error_line(wb("profile", path, "--db", db, "--quiet", "--max-time", "0.3"))
    assert needle in line, line
    assert not db.exists()  # nothing stored for input refused in preflight


@pytest.mark.parametrize("args,needle", [
    (["--rate", "nan"], "Rate must be"),
    (["--rate", "inf"], "Rate must be"),
    (["--rate", "1e-9"], "Rate must be at least"),
    (["--rate", "0.02"], "fewer than 10 requests"),
    (["--warmup", "inf"], "finite number"),
    (["--warmup", "nan"], "finite number"),
    (["--window", "1e-12"], "window_s must be"),
    (["--tolerance", "inf"], "finite number"),
    (["--int-range", "0:1e23"], "must look like 0:30522"),
    (["--int-range", "0:100000000000000000000000000"], "at most 9223372036854775807"),
    (["--int-range", "nosuch=0:5"], "which the model does not have"),
    (["--shape", "imagee=1x28x28x1"], "which the model does not have"),
    (["--dynamic-size", "0"], "--dynamic-size"),
    (["--timeout", "inf"], "finite number"),
])
def test_bad_numbers_refused_before_any_worker(lenet_ir, tmp_path, args, needle):
    db = tmp_path / "r.db"
    line = one_error_line(wb("profile", lenet_ir, *args, "--db", db, "--quiet", "--max-time", "0.3"))
    assert needle in line, line
    assert not db.exists()


BOMB = "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9) if p else ', '.join(['1'] * 9)}]\n"
               for p, c in zip([None, *"abcdefgh"], "abcdefghi")) + "threads: *i\n"


@pytest.mark.parametrize("text,needle", [
    ("inputs: [1, 2]\n", "invalid at inputs"),
    ("inputs: {int_range: [0, 1, 2]}\n", "inputs.int_range"),
    ("inputs: {shapes: [1, 28, 28, 1]}\n", "inputs.shapes"),
    ("inputs: {shapes: {x: '1x28'}}\n", "inputs.shapes.x"),
    ("inputs: {int_range: [0, 100000000000000000000000]}\n", "at most 9223372036854775807"),
    ("settings: [1]\n", "invalid at settings"),
    ("settings: {warmup_iters: 1000000000}\n", "warmup_iters must be"),
    ("settings: {seed: -1}\n", "seed must be"),
    ("settings: {pool_size: 1000000000}\n", "pool_size must be"),
    ("settings: {window_s: .nan}\n", "finite number"),
    ("settings: {warmup_s: .inf}\n", "finite number"),
    ("threads: [1, [2]]\n", "invalid at threads"),
    ("allow_oversubscribe: maybe\n", "allow_oversubscribe"),
    (f"threads: [{', '.join(map(str, range(1, 201)))}]\nbatch_sizes: [{', '.join(map(str, range(1, 201)))}]\n",
     "asks for 40,000 configurations"),
    ("x: &x [1]\n" + "".join(f"y{i}: *x\n" for i in range(120)), "YAML aliases"),
    (BOMB.replace("threads: *i", "threads: [1]").replace("a:", "a_:"), "Unknown sweep field"),
])
def test_bad_spec_sections(lenet_ir, tmp_path, text, needle):
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    db = tmp_path / "r.db"
    line = one_error_line(wb("profile", lenet_ir, "--spec", spec, "--db", db, "--quiet"))
    assert needle in line, line
    assert not db.exists()


def test_oversized_spec_file_is_refused_unread(lenet_ir, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("# padding\n" * 200_000)
    assert "a spec is at most" in one_error_line(wb("profile", lenet_ir, "--spec", spec, "--db", tmp_path / "r.db"))


# An archive without `x` may name its arrays after the model's inputs: that is checked against the model later.
@pytest.mark.parametrize("name", ["huge_header.npz", "text.npz"])
def test_data_files_checked_from_their_headers(tmp_path, name):
    from wb_core.data import load_dataset
    from wb_core.errors import ConfigError

    path, needle = bad_corpus.npz_cases(tmp_path)[name]
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        load_dataset(str(path))


@pytest.mark.parametrize("args,needle", [
    (["--rate", "nan"], "finite number"), (["--rate", "inf"], "finite number"), (["--rate", "0"], "above 0"),
    (["--p99-ms", "nan"], "finite number"), (["--headroom", "1"], "Headroom"),
])
def test_capacity_inputs_refused_before_the_database_is_read(tmp_path, args, needle):
    base = {"--rate": "100", "--p99-ms": "10"}
    for k, v in zip(args[::2], args[1::2]):
        base[k] = v
    flat = [x for kv in base.items() for x in kv]
    line = one_error_line(wb("capacity", "--study", "s", "--db", tmp_path / "none.db", *flat))
    assert needle in line, line


def test_another_applications_sqlite_file_is_refused_and_left_untouched(lenet_ir, tmp_path):
    import hashlib

    db = bad_corpus.foreign_sqlite(tmp_path / "theirs.db")
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    for args in (["profile", lenet_ir, "--db", db, "--quiet", "--max-time", "0.3"], ["results", "--study", "x", "--db", db],
                 ["studies", "--db", db]):
        assert "not a workbench results database" in one_error_line(wb(*args))
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.db"]  # no -wal, -shm or journal either


def test_database_path_with_uri_characters(lenet_ir, tmp_path, fast):
    import os

    name = "r#1?x=%41.db"
    run_sweep(lenet_ir, SweepSpec(), tmp_path / name, "s", settings=fast)
    r = subprocess.run([sys.executable, "-m", "wb_core", "results", "--study", "s", "--db", name], cwd=tmp_path,
                       capture_output=True, text=True, env={**os.environ})
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout
    assert {p.name for p in tmp_path.iterdir()} <= {name, name + "-wal", name + "-shm"}  # no stray 'r'


def test_unexpected_error_is_one_sentence_with_a_log_file(tmp_path):
    import os

    script = ("import sys\nfrom wb_core.cli import app, main\n"
              "@app.command()\ndef boom():\n    raise RuntimeError('deliberate bug')\n"
              "sys.argv = ['wb'] + sys.argv[1:]\nmain()\n")
    env = {**os.environ, "WB_CACHE_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", script, "boom"], capture_output=True, text=True, env=env)
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "unexpected RuntimeError (deliberate bug)" in lines[0], r.stderr
    log = lines[0].split("the traceback is in ")[1].rstrip(".")
    assert "Traceback" in Path(log).read_text()
    r = subprocess.run([sys.executable, "-c", script, "boom", "--debug"], capture_output=True, text=True, env=env)
    assert "Traceback" in r.stderr and "deliberate bug" in r.stderr


def test_names_with_terminal_escapes_are_printed_clean(lenet_ir, tmp_path):
    r = wb("profile", lenet_ir, "--db", tmp_path / "r.db", "--study", "evil\x1b[2J\x1b]0;title\x07\x07name",
           "--quiet", "--max-time", "0.3", "--warmup", "0.05", "--window", "0.1")
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "evil" in r.stdout
    s = wb("studies", "--db", tmp_path / "r.db")
    assert "\x1b" not in s.stdout and "evil" in s.stdout
