"""`wb recommend` and `wb export` on a text-generation study take the generation path (its limits, its
OVMS LLM graph); a quality-failed run is never recommended nor exported; a limit or format of the
other kind of study is refused in one sentence. Stores are written directly (no measuring: fast)."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from wb_core.cli import app

# key, weight format, tokens/s, quality guard
GEN_ROWS = [("fast-but-broken", "int4_sym", 900.0, "failed"), ("good", "int8_asym", 600.0, "passed"),
            ("slow", "none", 300.0, None)]


@pytest.fixture()
def gen_db(tmp_path):
    from wb_core.store import Store

    db = tmp_path / "g.db"
    with Store(db) as s:
        s.ensure_study("gen", "m", "openvino", "fp", {"kind": "generation"}, "hw", {}, {}, [])
        for key, fmt, tps, guard in GEN_ROWS:
            metrics = {"output_tokens_per_s": tps, "ttft_p99_ms": 5.0, "tpot_p99_ms": 1000 / tps, "e2e_p99_ms": 50.0,
                       "throughput": tps, "latency_ms_p99": 50.0, "variant": fmt, "threads": 2,
                       "inference_precision": "fp32", "kv_cache_precision": "u8", "prompt_len": 16, "output_len": 8}
            if guard:
                metrics["accuracy_guard"] = guard
            if guard == "failed":
                metrics["accuracy_guard_note"] = "quality failed: below the limit"
            s.add_run("gen", key, {"weight_format": fmt, "concurrency": 1, "study_kind": "generation"}, "ok", metrics)
        s.ensure_study("plain", "m", "openvino", "fp", {}, "hw", {}, {}, [])
        s.add_run("plain", "k1", {"backend": "openvino", "batch_size": 1, "threads": 1}, "ok",
                  {"throughput": 100.0, "latency_ms_p99": 10.0})
    return db


def _run(*args):
    res = CliRunner().invoke(app, [str(a) for a in args])
    return res, res.output + ("" if res.exception is None else str(res.exception))


def test_recommend_on_a_generation_study_takes_its_limits(gen_db):
    res, out = _run("recommend", "--study", "gen", "--db", gen_db)
    assert res.exit_code == 0, out
    # The failed 900 tokens/s one left out.
    assert out.startswith("OpenVINO GenAI · INT8 weights · FP32 activations") and "600 output tokens/s" in out
    assert "quality failed" in out
    res, out = _run("recommend", "--study", "gen", "--db", gen_db, "--max-tpot-ms", "2")  # 1000/600 = 1.67 ms
    assert res.exit_code == 0 and out.startswith("OpenVINO GenAI · INT8 weights"), out
    res, out = _run("recommend", "--study", "gen", "--db", gen_db, "--max-tpot-ms", "1")
    assert res.exit_code != 0 and "No run keeps the p99 time per output token within 1 ms" in out, out


def test_a_limit_of_the_other_kind_of_study_is_one_sentence(gen_db):
    res, out = _run("recommend", "--study", "gen", "--db", gen_db, "--max-p99-ms", "20")
    assert res.exit_code != 0 and "--max-p99-ms applies to a model study" in out and "--max-ttft-ms" in out, out
    res, out = _run("recommend", "--study", "plain", "--db", gen_db, "--max-ttft-ms", "20")
    assert res.exit_code != 0 and "study 'plain' measured a model" in out, out
    res, out = _run("recommend", "--study", "plain", "--db", gen_db)
    assert res.exit_code == 0 and "Best:" in out, out  # a model study keeps its own path


def test_export_writes_the_ovms_llm_graph_of_the_recommended_run(gen_db, tmp_path):
    for fmt in ("ovms-llm", "all"):
        out = tmp_path / fmt
        res, text = _run("export", "--study", "gen", "--db", gen_db, "--best", "--format", fmt, "--out", out,
                         "--name", "demo")
        assert res.exit_code == 0, text
        config = json.loads((out / "config.json").read_text())
        assert config["mediapipe_config_list"] == [{"name": "demo", "base_path": "demo"}]
        assert "LLMCalculatorOptions" in (out / "demo" / "graph.pbtxt").read_text()
        assert yaml.safe_load((out / "deployment.yaml").read_text())["variant"] == "int8_asym"


def test_a_quality_failed_run_is_never_exported(gen_db, tmp_path):
    res, out = _run("export", "--study", "gen", "--db", gen_db, "--run", "fast-but", "--format", "ovms-llm",
                    "--out", tmp_path / "bad")
    assert res.exit_code != 0 and "failed the quality guard" in out, out
    assert not (tmp_path / "bad" / "config.json").exists()
    res, out = _run("export", "--study", "gen", "--db", gen_db, "--run", "slow", "--format", "ovms-llm",
                    "--out", tmp_path / "ok")
    assert res.exit_code == 0, out
    assert yaml.safe_load((tmp_path / "ok" / "deployment.yaml").read_text())["variant"] == "none"


def test_a_format_of_the_other_kind_of_study_is_one_sentence(gen_db, tmp_path):
    res, out = _run("export", "--study", "gen", "--db", gen_db, "--best", "--format", "ovms", "--out", tmp_path / "a")
    assert res.exit_code != 0 and "'ovms' exports a model study" in out and "ovms-llm" in out, out
    res, out = _run("export", "--study", "plain", "--db", gen_db, "--best", "--format", "ovms-llm",
                    "--out", tmp_path / "b")
    assert res.exit_code != 0 and "'ovms-llm' exports a text-generation study" in out, out
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
