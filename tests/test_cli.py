"""The `wb` command as a user meets it: plain one-line errors, non-zero exits, the store untouched."""

import json
import subprocess
import sys

import pytest

from wb_core.config import SweepSpec
from wb_core.store import load_results
from wb_core.sweep.local import run_sweep


def wb(*args):
    return subprocess.run([sys.executable, "-m", "wb_core.cli", *map(str, args)], capture_output=True, text=True)


@pytest.fixture
def filled_db(lenet_ir, db, fast):
    run_sweep(lenet_ir, SweepSpec(batch_sizes="1,2"), db, "kept", settings=fast)
    return db


@pytest.mark.parametrize("args,needle", [
    (["/no/such/model.onnx"], "does not exist"),
    (["{notes}"], "not a model format"),
    (["{ir}", "--backend", "pytorch"], "Unknown backend 'pytorch'"),
    (["{ir}", "--precision", "fp64"], "Unknown precision 'fp64'"),
    (["{ir}", "--batch", "0"], "Batch size must be at least 1"),
    (["{ir}", "--threads", "-2"], "Threads must be at least 1"),
    (["{ir}", "--cores", "64"], "does not offer"),
    (["{truncated}"], "truncated.onnx"),
    (["{xml_only}"], "no weights file"),
])
def test_bad_input_is_one_sentence_and_store_is_untouched(filled_db, lenet_ir, tmp_path, args, needle):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a model")
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(b"\x08\x07\x12\x04onnx" + b"\x00" * 40)
    xml_only = tmp_path / "only.xml"
    xml_only.write_text(lenet_ir.read_text())
    args = [a.format(ir=lenet_ir, notes=notes, truncated=truncated, xml_only=xml_only) for a in args]
    before = load_results(filled_db, "kept")
    r = wb("profile", *args, "--db", filled_db, "--study", "kept", "--quiet", "--max-time", "0.3")
    assert r.returncode != 0
    err_lines = [line for line in r.stderr.strip().splitlines() if line.strip()]
    assert needle in r.stderr or needle in r.stdout, r.stderr
    assert "Traceback" not in r.stderr
    if err_lines and err_lines[-1].startswith("Error:"):
        assert len(err_lines) == 1
    after = load_results(filled_db, "kept")
    assert after[["key", "created_at"]].equals(before[["key", "created_at"]])


def test_results_json_has_public_columns(filled_db):
    r = wb("results", "--study", "kept", "--db", filled_db, "--format", "json")
    rows = json.loads(r.stdout)
    assert len(rows) == 2
    for col in ("backend", "precision", "batch_size", "threads", "inter_op_threads", "streams", "cores", "instances",
                "concurrency", "latency_ms_p50", "latency_ms_p90", "latency_ms_p95", "latency_ms_p99",
                "latency_ms_mean", "throughput", "cpu_util", "rss_mb", "status", "error"):
        assert col in rows[0]


def test_results_csv_and_unknown_study(filled_db):
    r = wb("results", "--study", "kept", "--db", filled_db, "--format", "csv")
    assert r.stdout.splitlines()[0].startswith("study,key,backend")
    r = wb("results", "--study", "nope", "--db", filled_db)
    assert r.returncode == 2 and "No study named 'nope'" in r.stderr and "kept" in r.stderr


def test_missing_database_is_a_clear_error(tmp_path):
    r = wb("results", "--study", "x", "--db", tmp_path / "none.db")
    assert r.returncode == 2 and "does not exist" in r.stderr


@pytest.mark.slow
def test_acceptance_sweep_tensorflow_and_openvino(lenet_dir, db):
    """The issue's acceptance sweep: both backends, threads 1,2, batch 1,8, cores none,0, every row ok."""
    r = wb("profile", "lenet-digits", "--backend", "tensorflow,openvino", "--threads", "1,2", "--batch", "1,8",
           "--cores", "none,0", "--db", db, "--max-time", "0.6", "--window", "0.2", "--quiet")
    assert r.returncode == 0, r.stderr
    rows = json.loads(wb("results", "--study", "lenet-digits", "--db", db, "--format", "json").stdout)
    assert len(rows) == 16 and all(row["status"] == "ok" for row in rows)
    tf = [row for row in rows if row["backend"] == "tensorflow"]
    assert {row["executed_precision"] for row in tf} == {"f32"}
