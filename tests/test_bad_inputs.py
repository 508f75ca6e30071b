"""Every bad input gives one plain sentence naming what and where, a non-zero exit, and no traceback."""

import json
import os
import re
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


def wb_here(*args):
    """`wb` run by its console entry point inside this process: the same code path as `wb()` (argument
    parsing, the one-line error handler, exit codes) without a new interpreter, for the many
    refusals that happen before any work. Tests of process-level behaviour (stdin, logs) use `wb()`."""
    import contextlib
    import io

    from wb_core.cli.app import main

    out, err, argv = io.StringIO(), io.StringIO(), sys.argv
    sys.argv = ["wb", *map(str, args)]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = argv
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


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
    line = one_error_line(wb_here("profile", lenet_ir, *args, "--db", tmp_path / "r.db", "--quiet", "--max-time", "0.3")
                          if "--max-time" not in args else
                          wb_here("profile", lenet_ir, *args, "--db", tmp_path / "r.db", "--quiet"))
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
    line = one_error_line(wb_here("profile", lenet_ir, "--spec", spec, "--db", tmp_path / "r.db", "--quiet"))
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
    line = one_error_line(wb_here("profile", lenet_ir, "--spec", spec, "--db", db, "--quiet"))
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


# ---- the inputs of the newer features: each refused before anything runs, in one sentence ----

def count_runs(db: Path) -> int:
    """Records in a store, counted with sqlite3 itself (0 when there is no database)."""
    import sqlite3

    if not db.exists() or db.stat().st_size == 0:
        return 0
    with sqlite3.connect(db) as c:
        return c.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    from wb_core.demo import build_text_encoder

    return build_text_encoder(tmp_path_factory.mktemp("enc") / "encoder.xml", vocab=1000)


@pytest.fixture(scope="module")
def text_setup(tmp_path_factory):
    """A tokenizer trained here, an encoder sized to its vocabulary, and text lines."""
    from tokenizers import Tokenizer

    from wb_core.demo import build_text_encoder, train_tokenizer

    d = tmp_path_factory.mktemp("text")
    lines = ["The quick brown fox jumps over the lazy dog.", "A model is measured on real text here.",
             "Sequence length is the workload, not a setting."] * 6
    tok = train_tokenizer(lines, d / "tokenizer.json", vocab_size=120)
    model = build_text_encoder(d / "enc.xml", vocab=Tokenizer.from_file(str(tok)).get_vocab_size())
    return model, tok, "\n".join(lines) + "\n"


FAST_FLAGS = ["--quiet", "--max-time", "0.3", "--warmup", "0.05", "--window", "0.1"]


@pytest.mark.parametrize("name", ["ref_nan.npz", "ref_inf.npz", "ref_strings.npz", "ref_unknown_output.npz",
                                  "ref_short.npz", "ids_nan.npz"])
def test_bad_reference_outputs_are_refused(encoder, tmp_path, name):
    path, needle = bad_corpus.reference_cases(tmp_path / "refs")[name]
    db = tmp_path / "r.db"
    line = one_error_line(wb("profile", encoder, "--data", path, "--dynamic-size", "16", "--db", db, *FAST_FLAGS))
    assert needle in line and name in line, line
    assert count_runs(db) == 0 and not db.exists()


def test_an_array_of_strings_is_a_config_error_not_a_value_error(tmp_path):
    from wb_core.data import load_dataset
    from wb_core.errors import ConfigError

    path, _ = bad_corpus.reference_cases(tmp_path)["ref_strings.npz"]
    with pytest.raises(ConfigError, match="'ref.sentence_embedding'.*hold text, not numbers"):
        load_dataset(str(path))


@pytest.mark.parametrize("args,needle", [
    (["--dynamic-size", "8,16", "--shape", "input_ids=1x32"], "fixes the sequence length of 'input_ids' to 32"),
    (["--dynamic-size", "16", "--shape", "attention_mask=1x8"], "fixes the sequence length of 'attention_mask' to 8"),
])
def test_shapes_against_lengths_refused_with_nothing_stored(encoder, tmp_path, args, needle):
    db = tmp_path / "r.db"
    line = one_error_line(wb("profile", encoder, *args, "--db", db, *FAST_FLAGS))
    assert needle in line and "--dynamic-size" in line, line
    assert not db.exists()


def test_a_length_for_a_model_without_dynamic_dimensions_is_refused(lenet_ir, tmp_path):
    db = tmp_path / "r.db"
    line = one_error_line(wb("profile", lenet_ir, "--dynamic-size", "16", "--db", db, *FAST_FLAGS))
    assert "none of the model's inputs has one" in line and "8x8x1" in line, line
    assert not db.exists()


def test_text_from_standard_input_and_a_pipe_one_length_stored_as_seq_len(text_setup, tmp_path):
    model, tok, text = text_setup
    db = tmp_path / "r.db"
    r = subprocess.run([sys.executable, "-m", "wb_core", "profile", str(model), "--text", "-", "--tokenizer", str(tok),
                        "--dynamic-size", "16", "--db", str(db), "--study", "stdin", *FAST_FLAGS],
                       input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "18 lines of text" in r.stderr  # the summary counts the lines it was given on stdin
    # A pipe, as bash's <(command) gives one: the read end of an os.pipe, named by /dev/fd.
    rd, wr = os.pipe()
    os.write(wr, text.encode())
    os.close(wr)
    r = subprocess.run([sys.executable, "-m", "wb_core", "profile", str(model), "--text", f"/dev/fd/{rd}",
                        "--tokenizer", str(tok), "--dynamic-size", "16", "--db", str(db), "--study", "pipe",
                        *FAST_FLAGS], capture_output=True, text=True, pass_fds=(rd,))
    os.close(rd)
    assert r.returncode == 0, r.stderr
    assert "18 lines of text" in r.stderr
    import sqlite3

    with sqlite3.connect(db) as c:
        lens = [json.loads(row[0]).get("seq_len") for row in c.execute("SELECT config_json FROM runs")]
    assert lens == [16, 16]
    r = wb("recommend", "--study", "stdin", "--db", db, "--seq-mix", "16:1")
    assert r.returncode == 0 and "mix 100% at 16" in r.stdout, r.stderr


def test_a_fifo_nobody_writes_is_refused_within_its_time_limit(tmp_path):
    from wb_core.errors import ConfigError
    from wb_core.streams import read_stream

    f = bad_corpus.fifo(tmp_path / "silent")
    with pytest.raises(ConfigError, match="gave nothing within 0.5 s"):
        read_stream(f, "The text", timeout_s=0.5)


def test_the_api_returns_the_clis_notes_and_columns(text_setup, tmp_path, fast):
    from wb_core import api

    model, tok, text = text_setup
    (tmp_path / "t.txt").write_text(text)
    db = tmp_path / "r.db"
    df = api.profile(model, db=db, study="api", seq_lens="16", precisions="fp32", text=tmp_path / "t.txt",
                     tokenizer=tok, settings=fast)
    notes = df.attrs["notes"]
    assert any("18 lines of text" in n for n in notes), notes
    assert any("The accuracy figure reads the model's first output 'last_hidden_state'" in n for n in notes), notes
    assert {"vs_fp32", "tied_with_best"} <= set(df.columns)
    assert df["tied_with_best"].tolist() == ["best"] and df["vs_fp32"].tolist() == [1.0]
    cli = json.loads(wb("results", "--study", "api", "--db", db, "--format", "json").stdout)
    assert set(df.columns) == set(cli[0]) and cli[0]["tied_with_best"] == "best"
    assert api.results("api", db, "stored").attrs.get("notes") is None  # as stored: no notes added


def test_an_empty_database_file_is_one_sentence(tmp_path):
    db = tmp_path / "empty.db"
    db.write_bytes(b"")
    for args in (["results", "--study", "x"], ["studies"], ["plot", "--study", "x", "--out", tmp_path / "p.html"]):
        line = one_error_line(wb(*args, "--db", db))
        assert "empty database that holds no studies" in line, line
    assert db.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def test_a_store_restored_from_a_dump_is_recognised_by_its_tables(lenet_ir, tmp_path, fast):
    import sqlite3

    src = tmp_path / "orig.db"
    run_sweep(lenet_ir, SweepSpec(batch_sizes="1,2"), src, "s", settings=fast)
    restored = bad_corpus.dumped_store(src, tmp_path / "restored.db")
    with sqlite3.connect(restored) as c:
        assert c.execute("PRAGMA application_id").fetchone()[0] == 0
        assert "rounds" in {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    r = wb("results", "--study", "s", "--db", restored, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)) == count_runs(src) == 2


def test_another_applications_file_is_refused_by_name_everywhere(tmp_path):
    db = bad_corpus.foreign_sqlite(tmp_path / "theirs.db")
    for args in (["results", "--study", "x"], ["recommend", "--study", "x"], ["dashboard", "--port", "1"]):
        line = one_error_line(wb(*args, "--db", db))
        assert "not a workbench results database" in line and "theirs.db" in line, (args, line)


@pytest.fixture(scope="module")
def small_store(lenet_ir, tmp_path_factory):
    from conftest import FAST

    db = tmp_path_factory.mktemp("store") / "s.db"
    run_sweep(lenet_ir, SweepSpec(), db, "s", settings=FAST)
    return db


def test_output_paths_checked_before_any_work(small_store, tmp_path):
    folder = tmp_path / "a folder"
    folder.mkdir()
    line = one_error_line(wb("plot", "--study", "s", "--db", small_store, "--out", folder))
    assert "is a folder; give a file name" in line and "a folder" in line, line
    line = one_error_line(wb("report", "--study", "s", "--db", small_store, "--out", folder))
    assert "is a folder" in line, line
    line = one_error_line(wb("export", "--study", "s", "--db", small_store, "--best", "--out", small_store))
    assert "is a file; give a folder" in line, line
    # A place nobody can write: /proc refuses even root; a folder without write permission refuses others.
    place = Path("/proc") if os.geteuid() == 0 else tmp_path / "ro"
    if place != Path("/proc"):
        place.mkdir()
        place.chmod(0o500)
    line = one_error_line(wb("plot", "--study", "s", "--db", small_store, "--out", place / "p.html"))
    assert "cannot write to" in line, line
    assert count_runs(small_store) == 1
    r = wb("plot", "--study", "s", "--db", small_store, "--out", tmp_path / "new" / "sub" / "p.html")
    assert r.returncode == 0 and (tmp_path / "new" / "sub" / "p.html").stat().st_size > 1000, r.stderr


# Kubernetes' rule for the names of services (an InferenceService is one): a DNS-1035 label.
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def test_serving_names_are_names_kubernetes_accepts(small_store, tmp_path):
    import yaml

    line = one_error_line(wb("export", "--study", "s", "--db", small_store, "--best", "--format", "kserve",
                             "--name", "модель", "--out", tmp_path / "k1"))
    assert "no Latin letters or digits" in line and "--name" in line, line
    assert not (tmp_path / "k1").exists()
    for given, expected in (("Modèle Größe", "modele-groe"), ("3d-net", "model-3d-net"), ("ResNet_50 v2", "resnet-50-v2")):
        out = tmp_path / expected
        r = wb("export", "--study", "s", "--db", small_store, "--best", "--format", "kserve,triton", "--name", given,
               "--out", out)
        assert r.returncode == 0, r.stderr
        isvc = next(yaml.safe_load_all((out / "kserve" / "inferenceservice.yaml").read_text()))
        name = isvc["metadata"]["name"]
        assert name == expected and DNS_1035.match(name) and len(name) <= 63
        assert (out / "triton" / "model_repository" / name / "config.pbtxt").is_file()


def test_numbers_as_users_type_them_or_one_sentence(small_store, tmp_path):
    r = wb("capacity", "--study", "s", "--db", small_store, "--rate", "1k", "--p99-ms", "1e3")
    assert r.returncode == 0 and re.search(r"\bserves? 1000 req/s", r.stdout), r.stderr  # 1k read as 1000
    r = wb("export", "--study", "s", "--db", small_store, "--best", "--target-rate", "1k", "--max-p99-ms", "1e3",
           "--out", tmp_path / "e")
    assert r.returncode == 0, r.stderr
    for args, needle in ((["capacity", "--rate", "1x", "--p99-ms", "10"], "1000, 1e3, 1k or 2.5M; got '1x'"),
                         (["export", "--best", "--target-rate", "fast", "--max-p99-ms", "10"], "got 'fast'"),
                         (["results", "--nosuch"], "No such option: --nosuch"),
                         (["profile", "x", "--budget", "2.5"], "whole number")):
        line = one_error_line(wb(*args[:1], "--study", "s", "--db", small_store, *args[1:]) if args[0] != "profile"
                              else wb(*args))
        assert needle in line and "╭" not in line and "Usage:" not in line, line
        assert "--help" in line


def test_dashboard_options_refused_before_voila_starts(tmp_path):
    import socket

    def refused(*args, env=None):
        r = subprocess.run([sys.executable, "-m", "wb_core", "dashboard", "--db", str(tmp_path / "d.db"), *args],
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "WB_DASHBOARD_TOKEN": "a-good-token-123", **(env or {})})
        assert "[Voila]" not in r.stderr and "Traceback" not in r.stderr, r.stderr
        return one_error_line(r)

    assert "'256.0.0.1' is not an address or a name" in refused("--host", "256.0.0.1")
    assert "is not an address or a name" in refused("--host", "no-such-host.invalid")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert f"--port {port} on 127.0.0.1 is in use" in refused("--port", str(port))
    token = tmp_path / "token"
    token.write_text("a-good-token-123\n")
    token.chmod(0o644)
    line = refused("--token-file", str(token))
    assert "can be read by other users (permissions 0644)" in line and "chmod 600" in line, line
    assert not (tmp_path / "d.db").exists()


def test_pipeline_sources_refused_before_anything_runs(lenet_ir, tmp_path):
    db = tmp_path / "p.db"
    images = bad_corpus.truncated_images(tmp_path / "imgs")
    line = one_error_line(wb("pipeline", lenet_ir, "--source", images, "--db", db, "--quiet"))
    assert "has no readable frames" in line and "truncated" in line, line
    pipe = bad_corpus.fifo(tmp_path / "camera")
    r = subprocess.run([sys.executable, "-m", "wb_core", "pipeline", str(lenet_ir), "--source", str(pipe), "--db",
                        str(db), "--quiet"], capture_output=True, text=True, timeout=60)  # never a hang
    line = one_error_line(r)
    assert "is a FIFO (named pipe), not a video file" in line, line
    assert not db.exists()


@pytest.mark.slow
def test_training_labels_and_frozen_models_refused_before_the_study(tmp_path):
    d = bad_corpus.training_cases(tmp_path / "train")
    db = tmp_path / "t.db"
    line = one_error_line(wb("train-profile", d / "three_classes.keras", "--data", d / "labels_0_to_7.npz",
                             "--db", db))
    assert "run from 0 to 7, but the model's output has 3 classes" in line, line
    line = one_error_line(wb("train-profile", d / "frozen.keras", "--data", d / "labels_ok.npz", "--db", db))
    assert "has nothing to train: every layer is frozen" in line, line
    assert count_runs(db) == 0


@pytest.mark.slow
def test_confirm_on_a_study_measured_at_one_length(encoder, tmp_path, fast):
    from wb_core import api
    from wb_core.config import InputOptions

    db = tmp_path / "c.db"
    # Measured as before one --dynamic-size became a seq_len: the length lives in the study's input options.
    api.profile(encoder, db=db, study="one", inputs=InputOptions(dynamic_size=16), settings=fast, threads="1,2")
    assert api.results("one", db)["seq_len"].isna().all()
    out = api.confirm("one", db, rounds=2, settings=fast)
    assert out["tuned"] is not None and out["tuned"]["status"] == "ok", out["verdict"]


@pytest.mark.parametrize("flag,needle", [(None, "Model path"), ("--data", "Data path"), ("--spec", "Sweep spec"),
                                         ("--db", "Results database"), ("--tokenizer", "Tokenizer file")])
def test_a_fifo_where_a_file_is_read_is_refused_not_waited_on(lenet_ir, encoder, tmp_path, flag, needle):
    pipe = bad_corpus.fifo(tmp_path / "pipe")
    db = tmp_path / "r.db"
    args = [pipe] if flag is None else [lenet_ir, flag, pipe]
    if flag == "--tokenizer":
        (tmp_path / "t.txt").write_text("one line of text\n")
        args = [encoder, flag, pipe, "--text", tmp_path / "t.txt", "--dynamic-size", "16"]
    if flag != "--db":
        args += ["--db", db]
    r = subprocess.run([sys.executable, "-m", "wb_core", "profile", *map(str, args), "--quiet"], capture_output=True,
                       text=True, timeout=60)
    line = one_error_line(r)
    assert f"{needle} '{pipe}' is a FIFO (named pipe)" in line, line
    assert not db.exists()


# ---- every check before the work: each refused in one sentence, with nothing stored ----

def _store_bytes(db: Path) -> dict[str, bytes]:
    """The store's file and its companions (-wal, -shm), byte for byte: nothing may change them."""
    return {p.name: p.read_bytes() for p in db.parent.iterdir() if p.name.startswith(db.name)}


def test_tune_checks_where_it_writes_before_it_measures(lenet_ir, tmp_path):
    db = tmp_path / "t.db"
    place = Path("/proc") if os.geteuid() == 0 else tmp_path / "ro"
    if place != Path("/proc"):
        place.mkdir()
        place.chmod(0o500)
    line = one_error_line(wb_here("tune", lenet_ir, "--time", "30s", "--db", db, "--out", place / "deploy"))
    assert "--out" in line and "cannot write to" in line, line
    # A study name longer than a file name may be: its export folder (STUDY-deploy) could never be made.
    line = one_error_line(wb_here("tune", lenet_ir, "--time", "30s", "--db", db, "--study", "s" * 250))
    assert "The export folder named after the study (--study) has a name of 257 bytes" in line, line
    assert "longer than the 255 bytes" in line, line
    line = one_error_line(wb_here("tune", lenet_ir, "--time", "30s", "--db", place / "t.db"))
    assert "--db" in line and "cannot write to" in line, line
    assert not db.exists() and count_runs(db) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == (["ro"] if place != Path("/proc") else [])


def test_export_names_too_long_for_the_file_system_write_nothing(small_store, tmp_path):
    out = tmp_path / ("d" * 300)
    line = one_error_line(wb("export", "--study", "s", "--db", small_store, "--best", "--format", "all", "--out", out))
    assert "--out has a name of 300 bytes" in line and "longer than the 255 bytes" in line, line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("backends,needle", [("onnxruntime", "ONNX Runtime cannot load the model"),
                                             ("openvino,onnxruntime", "ONNX Runtime cannot load the model")])
def test_each_backend_asked_for_opens_the_model_before_the_sweep(tmp_path, backends, needle):
    path = bad_corpus.matmul_onnx(tmp_path / "future_ir.onnx", ir_version=99)
    db = tmp_path / "r.db"
    line = one_error_line(wb_here("profile", path, "--backend", backends, "--db", db, *FAST_FLAGS))
    assert needle in line and "future_ir.onnx" in line and "IR version: 99" in line, line
    assert "onnxruntime_src" not in line and ".cc:" not in line, line  # its C++ source lines are not the reason
    assert not db.exists()
    # OpenVINO, which reads this IR version, measures it when it alone is asked for.
    r = wb_here("profile", path, "--backend", "openvino", "--db", db, *FAST_FLAGS)
    assert r.returncode == 0 and count_runs(db) == 1, r.stderr


def test_a_study_whose_points_all_could_not_run_says_why_and_exits_nonzero(tmp_path):
    """Only a backend that cannot run the model's format was asked for: the points are kept as skipped
    (with their reason), and the summary line says that reason and the exit status is not success."""
    path = bad_corpus.matmul_onnx(tmp_path / "m.onnx")
    db = tmp_path / "r.db"
    r = wb_here("profile", path, "--backend", "tensorflow", "--db", db, *FAST_FLAGS)
    assert r.returncode == 1 and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    assert "0 ok, 0 failed, 1 skipped (the tensorflow backend cannot run a model in the ONNX format)" in r.stdout
    assert list(load_results(db, "m").status) == ["skipped"]  # kept with its reason; nothing measured


def test_the_python_api_refuses_objects_in_the_wrong_place_before_any_work(lenet_ir, tmp_path):
    from wb_core import api
    from wb_core.api import ConfigError, MeasureSettings, RunOptions

    db = tmp_path / "r.db"
    calls = {
        "profile() takes a SweepSpec as its second argument, not a RunOptions; pass it as run=RunOptions(...).":
            lambda: api.profile(lenet_ir, RunOptions(search="smart"), db=db),
        "profile() takes a MeasureSettings as settings, not a RunOptions; pass it as run=RunOptions(...).":
            lambda: api.profile(lenet_ir, settings=RunOptions(), db=db),
        "profile() takes an InputOptions as inputs, not a MeasureSettings; pass it as settings=MeasureSettings(...).":
            lambda: api.profile(lenet_ir, inputs=MeasureSettings(), db=db),
        "profile() takes a function as on_point (called with each point as it is stored), not an int (42).":
            lambda: api.profile(lenet_ir, on_point=42, db=db),
        "profile() takes a threading.Event as cancel": lambda: api.profile(lenet_ir, cancel="stop", db=db),
        "tune() takes a function as on_progress": lambda: api.tune(lenet_ir, on_progress="print", db=db),
        "confirm() takes a MeasureSettings as settings, not a dict": lambda: api.confirm("s", db, settings={}),
        "find_max_rate() takes a function as on_point": lambda: api.find_max_rate(lenet_ir, None, 5, db=db, on_point=1),
    }
    for words, call in calls.items():
        with pytest.raises(ConfigError) as e:
            call()
        assert str(e.value).startswith(words), str(e.value)
    assert not db.exists()


def test_every_verb_refuses_values_of_the_wrong_kind_in_one_sentence(small_store, lenet_ir, tmp_path):
    """Paths that are not paths, options objects and callbacks of the wrong kind, given to the verbs after
    profile: one ConfigError each, before a store is opened or a file written."""
    from wb_core import api
    from wb_core.api import ConfigError, RunOptions

    db, out = tmp_path / "r.db", tmp_path / "out"
    dep = api.deployment_for_study(small_store, "s")
    runs = api.results("s", small_store, "stored")
    config = api.run_config("s", runs.key.iloc[0], small_store)
    before = _store_bytes(small_store)
    calls = {
        "The model must be a path (a str or pathlib.Path); got an int (42).": lambda: api.profile(42, db=db),
        "The results database must be a path (a str or pathlib.Path); got a list.": lambda: api.confirm("s", ["x"]),
        "The configuration to search a rate for must be a RunConfig (api.default_configs or api.run_config give one);"
        " got a RunOptions.": lambda: api.find_max_rate(lenet_ir, RunOptions(), 5, db=db),
        "The rate search's steps must be a whole number at least 1 and at most 50; got 1000000000.":
            lambda: api.find_max_rate(lenet_ir, config, 5, db=db, steps=10**9),
        "tune() takes a threading.Event as cancel (set it to stop the study), not an int (42).":
            lambda: api.tune(lenet_ir, db=db, cancel=42),
        "The output folder must be a path (a str or pathlib.Path); got an int (7).":
            lambda: api.tune(lenet_ir, db=db, export_dir=7),
        "The constraints must be a Constraints (api.Constraints(max_p99_ms=...)); got a RunOptions.":
            lambda: api.recommend(runs, constraints=RunOptions()),
        "The runs to recommend from must be a DataFrame (api.results gives them); got a str.":
            lambda: api.recommend("s"),
        "The run to export must be a DeploymentConfig (api.deployment_for_study gives it); got a RunOptions.":
            lambda: api.export(RunOptions(), "all", out),
        "The run to render must be a DeploymentConfig": lambda: api.render(runs, "yaml"),
        "The output folder must be a path (a str or pathlib.Path); got an int (42).": lambda: api.export(dep, "yaml", 42),
        "The report file '/proc/report.html' is in a place this user cannot write to":
            lambda: api.write_report(small_store, "s", "/proc/report.html"),
    }
    for words, call in calls.items():
        with pytest.raises(ConfigError) as e:
            call()
        assert str(e.value).startswith(words), str(e.value)
    assert not db.exists() and not out.exists() and _store_bytes(small_store) == before


@pytest.mark.parametrize("value", ["three", "", "2.5", "-1"])
def test_a_store_whose_schema_version_is_not_a_number(small_store, tmp_path, value):
    db = bad_corpus.store_with_schema_version(small_store, tmp_path / "odd.db", value)
    before = _store_bytes(db)
    line = one_error_line(wb("profile", bad_corpus.matmul_onnx(tmp_path / "m.onnx"), "--db", db, *FAST_FLAGS))
    assert f"holds a schema version of {value!r} in its meta table, which is not a version number" in line, line
    assert "odd.db" in line and "unexpected" not in line, line
    assert _store_bytes(db) == before and count_runs(db) == count_runs(small_store)


def test_numbers_beyond_what_plan_and_layers_can_use_are_refused_at_once(tmp_path):
    db = tmp_path / "none.db"
    for args, needle in (
            (["plan", "--machine-cores", "1000000000"], "--machine-cores must be a whole number at least 1 and at most "
                                                        "65536; got 1000000000."),
            (["plan", "--machine-cores", "0"], "at least 1 and at most 65536; got 0."),
            (["plan", "--p99-ms", "nan"], "--p99-ms must be a finite number above 0"),
            (["plan", "--p99-ms", "inf"], "--p99-ms must be a finite number above 0"),
            (["layers", "--run", "abc", "--iterations", "1000000000"],
             "--iterations must be a whole number at least 1 and at most 100000; got 1000000000."),
            (["layers", "--run", "abc", "--iterations", "0"], "--iterations must be a whole number at least 1")):
        r = subprocess.run([sys.executable, "-m", "wb_core", args[0], "--study", "s", "--db", str(db), *args[1:]],
                           capture_output=True, text=True, timeout=60)  # never a hang
        assert needle in one_error_line(r), (args, r.stderr)
    assert not db.exists()  # refused before the database is read


def _guard_model(tmp_path) -> Path:
    return bad_corpus.matmul_onnx(tmp_path / "m.onnx")


@pytest.mark.parametrize("extra,metric", [([], "cosine"), (["--metric", "auto"], "cosine"),
                                          (["--metric", "cosine"], "cosine")])
def test_a_guard_the_metric_cannot_use_is_refused_whatever_picked_it(tmp_path, extra, metric):
    db = tmp_path / "r.db"
    line = one_error_line(wb_here("profile", _guard_model(tmp_path), "--accuracy-guard", "5", *extra, "--db", db,
                                  *FAST_FLAGS))
    assert f"An accuracy guard of 5 lets any {metric} pass" in line and "below 1" in line, line
    assert not db.exists()


def test_a_guard_on_labelled_data_is_checked_against_top1(lenet_ir, lenet_dir, tmp_path):
    import numpy as np

    with np.load(lenet_dir / "data.npz") as d:
        x, y = d["x"][:16], d["y"][:16]
    np.savez(tmp_path / "labelled.npz", x=x, y=y.astype(np.int64))
    db = tmp_path / "r.db"
    line = one_error_line(wb_here("profile", lenet_ir, "--data", tmp_path / "labelled.npz", "--accuracy-guard", "1",
                                  "--db", db, *FAST_FLAGS))
    assert "An accuracy guard of 1 lets any top1 pass" in line and "class labels" in line, line
    assert not db.exists()


def test_an_empty_host_list_is_refused_not_read_as_every_host(lenet_ir, tmp_path):
    from wb_core.api import ConfigError, RunOptions

    db = tmp_path / "r.db"
    for hosts in ("", " , ,"):
        line = one_error_line(wb_here("profile", lenet_ir, "--cluster", "tcp://127.0.0.1:9", "--hosts", hosts,
                                      "--db", db, *FAST_FLAGS))
        assert "The host list (--hosts) is empty" in line, line
    for hosts in ([], "", ","):
        with pytest.raises(ConfigError, match=r"^The host list \(Hosts\) is empty; name at least one host"):
            RunOptions(cluster="tcp://127.0.0.1:9", hosts=hosts)
    assert RunOptions(cluster="tcp://127.0.0.1:9", hosts=" a, b ,a").hosts == ["a", "b"]
    assert not db.exists()


def test_report_layers_never_profiles_a_run_it_does_not_recommend(small_store, tmp_path):
    out = tmp_path / "r.html"
    r = wb("report", "--study", "s", "--db", small_store, "--layers", "--max-p99-ms", "0.000001", "--out", out)
    assert r.returncode == 0, r.stderr
    assert "No run meets the limits, so the report recommends none and has no per-layer profile." in r.stderr
    html = out.read_text()
    assert "Per-layer profile" not in html and "executed in</th>" not in html
    # Under limits a run meets, the recommended run's own profile is there.
    r = wb("report", "--study", "s", "--db", small_store, "--layers", "--out", out)
    assert r.returncode == 0, r.stderr
    assert "Per-layer profile" in out.read_text()
    # A profile of any other run is left out of the report, whoever passes it.
    from wb_core.api import LayerProfile, layer_profile
    from wb_core.faces import build_report

    own = layer_profile("s", json.loads(wb("results", "--study", "s", "--db", small_store, "--format",
                                           "json").stdout)[0]["key"], small_store, iterations=5)
    other = LayerProfile(key="0" * 16, label="another run", iterations=5, batch_size=1, layers=own.layers)
    assert "Per-layer profile" in build_report(small_store, "s", layer_profile=own)
    assert "Per-layer profile" not in build_report(small_store, "s", layer_profile=other)


def test_a_grid_too_large_is_refused_with_advice_that_fits_the_smart_search_too(lenet_ir, tmp_path):
    many = ",".join(map(str, range(1, 201)))
    for search in ([], ["--search", "smart", "--budget", "10"]):
        line = one_error_line(wb_here("profile", lenet_ir, "--threads", many, "--batch", many, *search,
                                      "--db", tmp_path / "r.db"))
        assert "asks for 40,000 configurations" in line and "narrow --threads (200 values) or --batch (200" in line, line
        assert "--search" not in line and "--budget" not in line, line
    assert not (tmp_path / "r.db").exists()


def _npz_of_zeros(path: Path, rows: int) -> Path:
    """An .npz whose x [rows, 8] float32 is all zeros, written compressed a chunk at a time (the file
    stays small, the array it declares does not)."""
    import zipfile

    import numpy as np

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z, \
            z.open("x.npy", "w", force_zip64=True) as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (rows, 8)})
        left, chunk = rows * 32, bytes(32 << 20)
        while left > 0:
            f.write(chunk[:min(left, len(chunk))])
            left -= len(chunk)
    return path


PARENT_UNDER_A_LIMIT = """
import resource, sys
import psutil
from wb_core.cli.app import main
vms = psutil.Process().memory_info().vms  # the CLI loaded first: the limit is what is left beyond it
resource.setrlimit(resource.RLIMIT_AS, (vms + (int(sys.argv[1]) << 20), resource.RLIM_INFINITY))
sys.argv = ["wb"] + sys.argv[2:]
main()
"""


def test_data_the_parent_cannot_hold_is_a_sentence_with_the_limit_not_a_silent_exit(tmp_path):
    """A parent with 400 MiB of room left is given 512 MiB of data: one sentence naming both, exit 2,
    nothing stored (the kernel would otherwise kill it, or numpy fail half-way through)."""
    data = _npz_of_zeros(tmp_path / "big.npz", 1 << 24)  # 16M x 8 float32: 512 MiB
    db = tmp_path / "r.db"
    r = subprocess.run([sys.executable, "-c", PARENT_UNDER_A_LIMIT, "400", "profile",
                        _guard_model(tmp_path), "--data", data, "--precision", "fp32,int8", "--db", db, *FAST_FLAGS],
                       capture_output=True, text=True, timeout=120)
    line = one_error_line(r)
    assert "big.npz' needs 512 MiB of memory to load, more than this process can take" in line, line
    assert "address-space limit" in line, line
    room = re.search(r"take \((\d+) MiB", line)
    assert room and int(room.group(1)) <= 400, line
    assert not db.exists()


def test_an_ir_openvino_reads_but_cannot_compile_is_refused_before_any_point(tmp_path):
    db = tmp_path / "r.db"
    ir = bad_corpus.uncompilable_ir(tmp_path / "strings" / "model.xml")
    line = one_error_line(wb("profile", ir, "--db", db, *FAST_FLAGS))
    assert "OpenVINO reads the model" in line and "but cannot compile it for the CPU" in line, line
    assert "Unsupported operation of type: Convert" in line and "model.xml" in line, line
    assert not db.exists()


def test_numbers_beyond_the_data_or_what_a_command_can_use_are_one_sentence_with_the_limit(small_store, tmp_path):
    import numpy as np

    model = _guard_model(tmp_path)
    np.savez(tmp_path / "d.npz", x=np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32))
    db = tmp_path / "r.db"
    for args, needle in (
            (["--data", tmp_path / "d.npz", "--precision", "fp32,int8", "--calib-size", "50"],
             "Calibration (--calib-size) asks for 50 samples, but the data from"),
            (["--find-max-rate", "--p99-ms", "1e-12"], "--p99-ms of 1e-12 ms is below 0.001 ms"),
            (["--search", "smart", "--p99-ms", "1e-9"], "--p99-ms of 1e-09 ms is below 0.001 ms"),
            (["--max-rounds", "-1"], "--max-rounds must allow at least one round; got -1."),
            (["--decode", "nosuchmodule:fn"], "The decoding 'nosuchmodule:fn' cannot be imported"),
            (["--decode", "a_bare_name"], "its import path package.module:function; got 'a_bare_name'"),
            (["--spec", tmp_path], "is a folder; give a YAML file")):
        line = one_error_line(wb_here("profile", model, *args, "--db", db, *FAST_FLAGS))
        assert needle in line, (args, line)
        if "--calib-size" in args:
            assert "hold 20; give at most 20." in line, line
    assert not db.exists()
    folder = tmp_path / "a folder"
    folder.mkdir()
    for args, needle in (
            (["recommend", "--top", "-1"], "--top (the runners-up to list) must be a whole number from 0 to 10,000"),
            (["layers", "--run", "abc", "--top", "-1"], "--top (the layers to list) must be a whole number from 0"),
            (["confirm", "--rounds", "1"], "--rounds of a confirmation must be a whole number from 2 (an interval "
                                           "needs two) to 1000; got 1."),
            (["confirm", "--model", folder], "is a folder, but study 's' measured a file"),
            (["serve-check", "--run", "abc", "--max-time", "-1"], "--max-time must be a positive number of seconds, "
                                                                  "at most 86400"),
            (["serve-check", "--run", "abc", "--tritonserver", folder], "is a folder; give the tritonserver program"),
            (["results", "--outputs", "--probes"], "Choose --probes or --outputs, not both.")):
        before = count_runs(small_store)
        line = one_error_line(wb_here(args[0], "--study", "s", "--db", small_store, *args[1:]))
        assert needle in line, (args, line)
        assert count_runs(small_store) == before
    r = wb_here("results", "--study", "s", "--db", small_store, "--outputs")
    assert r.returncode == 0 and "no INT8 or BF16 run has per-output figures" in r.stdout, r.stderr
    key = load_results(small_store, "s").key.iloc[0]
    r = wb_here("layers", "--study", "s", "--db", small_store, "--run", key, "--top", "0", "--iterations", "2")
    assert r.returncode == 0 and "By layer type:" in r.stdout, r.stderr
    assert "Slowest" not in r.stdout and "Empty DataFrame" not in r.stdout, r.stdout  # --top 0: the types only


def test_an_image_folder_the_parent_cannot_hold_is_refused_before_an_image_is_decoded(lenet_ir, tmp_path):
    from PIL import Image

    for c in ("a", "b"):
        (tmp_path / "images" / c).mkdir(parents=True)
        for i in range(40):
            Image.new("L", (2, 2)).save(tmp_path / "images" / c / f"{i}.png")
    db = tmp_path / "r.db"
    r = subprocess.run([sys.executable, "-c", PARENT_UNDER_A_LIMIT, "400", "profile", lenet_ir, "--data",
                        tmp_path / "images", "--image-size", "1024", "--precision", "fp32,int8", "--db", db,
                        *FAST_FLAGS], capture_output=True, text=True, timeout=120)
    line = one_error_line(r)  # 80 images of 1024x1024 float32, twice: 640 MiB
    assert "(80 images at 1024x1024) needs 640 MiB of memory to load, more than this process can take" in line, line
    assert not db.exists()


def test_generation_settings_refused_before_a_worker_starts(generator, tmp_path):
    """Each bad setting of a generation study is one sentence, and no point is stored."""
    from wb_core import api

    c = bad_corpus.generation_cases(tmp_path / "gen", generator)
    db = tmp_path / "g.db"
    for args, needle in (
            ([c["config_only"]], "is not a text-generation model folder"),
            ([c["bigger_tokenizer"]], "has 1032 tokens but the model's vocabulary has 1024: they do not belong"),
            ([generator, "--output-len", "0"], "Output length must be at least 1; got 0."),
            ([generator, "--output-len", "-4"], "Output length must be at least 1; got -4."),
            ([generator, "--output-len", "100000000"], "is beyond the supported maximum"),
            ([generator, "--prompt-len", "100000"], "more than the model's context of 1024"),
            ([generator, "--weight-format", "int4_sym", "--group-size", "7"],
             "INT4 group size 7 does not divide the model's hidden size 64"),
            ([generator, "--weight-format", "int4_sym", "--ratio", "0"], "above 0 and at most 1"),
            ([generator, "--weight-format", "int4_sym", "--ratio", "1.5"], "above 0 and at most 1"),
            ([generator, "--kv-cache-precision", "fp3"], "Unknown KV-cache precision 'fp3'; choose from"),
            ([generator, "--concurrency", "0"], "Concurrency must be at least 1; got 0."),
            ([generator, "--requests", "0"], "Requests per point must be a whole number of at least 1"),
            ([generator, "--text", c["empty.txt"]], "holds no lines of text"),
            ([generator, "--text", c["binary.txt"]], "is not UTF-8 text"),
            ([generator, "--text", c["missing.txt"]], "does not exist")):
        line = one_error_line(wb_here("generate", *args, "--db", db, "--quiet"))
        assert needle in line, (args, line)
    assert count_runs(db) == 0
    for kwargs, needle in ((dict(output_lens="0"), "Output length must be at least 1"),
                           (dict(kv_cache_precisions="fp3"), "Unknown KV-cache precision"),
                           (dict(requests=0), "Requests per point"),
                           (dict(weight_formats="int4_sym", group_sizes="7"), "does not divide")):
        with pytest.raises(api.ConfigError) as e:
            api.generate_profile(generator, db=db, study="g", **kwargs)
        assert needle in str(e.value), (kwargs, str(e.value))
    assert count_runs(db) == 0
    for cmd in ("generate-recommend", "generate-export"):
        extra = ["--out", tmp_path / "exp"] if cmd == "generate-export" else []
        line = one_error_line(wb_here(cmd, "--study", "nope", "--db", db, *extra))
        assert "nope" in line or "does not exist" in line, line
    assert not (tmp_path / "exp").exists()


def test_comparison_settings_refused_before_any_block(small_store, lenet_ir, tmp_path):
    """`wb confirm --design/--time/--margin` and compare_configs check their settings before measuring."""
    from wb_core import api
    from wb_core.config import RunConfig

    for args, needle in (
            (["--design", "bogus"], "The comparison design must be one of auto, paired, rounds; got 'bogus'."),
            (["--margin", "0"], "must be above 0 and below 1; got 0.0."),
            (["--margin", "1"], "must be above 0 and below 1; got 1.0."),
            (["--margin", "-0.1"], "must be above 0 and below 1; got -0.1."),
            (["--time", "0"], "The time budget must be more than 0 seconds"),
            (["--time", "-3"], "is not a duration"),
            (["--time", "forever"], "is not a duration")):
        before = count_runs(small_store)
        line = one_error_line(wb_here("confirm", "--study", "s", "--db", small_store, *args))
        assert needle in line, (args, line)
        assert count_runs(small_store) == before
    db = tmp_path / "c.db"
    a, b = RunConfig("openvino", "fp32", batch_size=1), RunConfig("openvino", "fp32", batch_size=2)
    for kwargs, needle in (
            (dict(design="bogus"), "The comparison design must be one of"),
            (dict(margin=0), "must be above 0 and below 1; got 0."),
            (dict(margin=1.0), "must be above 0 and below 1; got 1.0."),
            (dict(margin="0.03"), "must be above 0 and below 1; got '0.03'."),
            (dict(max_s=0), "must be more than 0 seconds and at most a week; got 0."),
            (dict(max_s=-1.0), "must be more than 0 seconds and at most a week; got -1.0."),
            (dict(max_s=1e12), "at most a week"),
            (dict(a={"batch": 1}), "Configuration a to compare must be a RunConfig; got a dict."),
            (dict(b=a), "are one and the same")):
        args = {"a": a, "b": b, **kwargs}
        with pytest.raises(api.ConfigError) as e:
            api.compare_configs(lenet_ir, args.pop("a"), args.pop("b"), db=db, **args)
        assert needle in str(e.value), (kwargs, str(e.value))
    assert count_runs(db) == 0


def test_a_decoding_or_metric_that_raises_or_returns_the_wrong_thing_is_one_sentence(tmp_path, monkeypatch, fast):
    """Users' functions named by import path: each failure names the function and what it did; no point stored."""
    import numpy as np

    from test_output_guard import _classifier
    from wb_core.errors import ConfigError
    from wb_core.variants.planner import PrecisionOptions

    mods = bad_corpus.user_functions(tmp_path / "mods")
    monkeypatch.syspath_prepend(str(mods))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(mods), os.environ.get("PYTHONPATH", "")]))
    model, broken = _classifier(tmp_path / "cls.onnx", 0.0), _classifier(tmp_path / "cls8.onnx", 0.5)
    np.savez(tmp_path / "d.npz", x=np.random.default_rng(3).normal(size=(16, 8)).astype(np.float32))
    m = "wb_bad_user_functions"
    for opts, needle in (
            (dict(decode=f"{m}:decode_raises"), f"The decoding '{m}:decode_raises' failed on output 'logits'"),
            (dict(decode=f"{m}:decode_int"), "must return one item per sample (a list); on output 'logits' it "
                                             "returned int."),
            (dict(decode="math:pi"), "names nothing callable in module 'math'"),
            (dict(metric=f"{m}:metric_raises"), f"The metric '{m}:metric_raises' failed: RuntimeError: the "
                                                "metric broke."),
            (dict(metric=f"{m}:metric_text"), f"The metric '{m}:metric_text' must return one number; it returned "
                                              "a str."),
            (dict(metric=f"{m}:metric_nan"), f"The metric '{m}:metric_nan' must return a finite number; it "
                                             "returned nan.")):
        db = tmp_path / f"{sorted(opts.values())[0].replace(':', '_')}.db"
        with pytest.raises(ConfigError) as e:
            run_sweep(model, SweepSpec(precisions="fp32,int8"), db, "g", settings=fast,
                      precision=PrecisionOptions(data=str(tmp_path / "d.npz"), variants={"openvino/int8": str(broken)},
                                                 **opts))
        assert needle in str(e.value), (opts, str(e.value))
        assert "\n" not in str(e.value)
        assert count_runs(db) == 0


def test_a_generation_study_named_with_control_characters_is_listed_clean_on_one_line(generator, tmp_path):
    """A line break or escape code in a study name is kept as the name, never printed: each study
    listed on one line, no escape code reaching the terminal."""
    db = tmp_path / "r.db"
    for name in ("a\nb", "c\x1b[31mred\x07"):
        r = wb_here("generate", generator, "--study", name, "--output-len", "2", "--requests", "1", "--db", db)
        assert r.returncode == 0, r.stderr
        assert "\x1b" not in r.stdout + r.stderr and "\x07" not in r.stdout + r.stderr
    listing = wb_here("studies", "--db", db).stdout
    lines = [ln for ln in listing.splitlines() if ln.strip()]
    assert "\x1b" not in listing and len(lines) == 2, listing
    assert lines[0].startswith("a b ") and lines[1].startswith("cred "), lines


def test_a_study_name_that_reads_as_a_path_is_only_a_name(generator, tmp_path, monkeypatch):
    """'../x' names a study in the store; nothing is written outside the folder of the database."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()
    db = tmp_path / "here" / "g.db"
    before = set(tmp_path.iterdir())
    r = wb_here("generate", generator, "--study", "../x", "--output-len", "2", "--requests", "1", "--db", db,
                "--quiet")
    assert r.returncode == 0, r.stderr
    assert set(tmp_path.iterdir()) == before
    assert load_results(db, "../x").status.tolist() == ["ok"]


def test_layers_and_outputs_asked_of_a_study_that_has_none_say_so(tmp_path, fast):
    """`wb recommend --layers` on a study without OpenVINO runs and `wb results --outputs` without guard
    figures: a sentence saying there is nothing to show, not silence; nothing is measured."""
    db = tmp_path / "o.db"
    run_sweep(bad_corpus.matmul_onnx(tmp_path / "mm.onnx"), SweepSpec(backends="onnxruntime"), db, "o", settings=fast)
    before = count_runs(db)
    r = wb_here("recommend", "--study", "o", "--db", db, "--layers")
    assert r.returncode == 0, r.stderr
    assert ("note: --layers found nothing to explain: no INT8 or BF16 run of study 'o' ran slower than its FP32 "
            "twin.") in r.stdout, r.stdout
    r = wb_here("results", "--study", "o", "--db", db, "--outputs")
    assert r.returncode == 0 and "no INT8 or BF16 run has per-output figures" in r.stdout, r.stderr
    assert count_runs(db) == before
