"""Text-generation studies on the demo generator (a real OpenVINO GenAI folder built here once per
session: a 2-layer Llama with random weights, exported by optimum-intel).

The numbers checked are ones the test knows without the code under test: the tokenizer's size
read with the tokenizers package, tokens counted from the settings, openvino_genai's own
PerfMetrics, and a variant broken on purpose.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from wb_core.api import (
    ConfigError,
    ModelError,
    generate_profile,
    generation_quality,
    inspect_model,
    recommend_generation,
)


@pytest.fixture(scope="session")
def generator_copy(generator, tmp_path_factory) -> Path:
    """The demo's GenAI files in a private folder (tests may damage the copy)."""
    d = tmp_path_factory.mktemp("gen") / "model"
    shutil.copytree(generator, d, ignore=shutil.ignore_patterns("hf"))
    return d


def test_inspect_reads_a_genai_folder(generator):
    from tokenizers import Tokenizer

    desc = inspect_model(generator)
    facts = dict(desc.facts())
    cfg = json.loads((generator / "config.json").read_text())
    vocab = Tokenizer.from_file(str(generator / "tokenizer.json")).get_vocab_size(with_added_tokens=True)
    assert facts["format"] == "OpenVINO GenAI text-generation folder"
    assert desc.vocab_size == cfg["vocab_size"] == vocab
    assert desc.layers == cfg["num_hidden_layers"] == 2
    assert desc.kv_cache["states"] == 2 * cfg["num_hidden_layers"]  # a key and a value state per layer
    assert desc.kv_cache["kv_heads"] == cfg["num_key_value_heads"]
    assert desc.kv_cache["head_size"] == cfg["hidden_size"] // cfg["num_attention_heads"]
    assert "input_ids" in facts["inputs"] and "beam_idx" in facts["inputs"]
    assert facts["weights"].startswith("f32")  # exported with FP32 weights


def test_ttft_and_tpot_agree_with_the_pipelines_own_metrics(generator, tmp_path):
    df = generate_profile(generator, db=tmp_path / "g.db", study="g", threads="1", cores="0", prompt_lens="16",
                          output_lens="8", requests=4)
    (row,) = df.to_dict("records")
    assert row["status"] == "ok"
    assert row["cores_given"] == 1  # pinned to CPU 0 before OpenVINO loaded
    assert row["output_tokens"] == 4 * 8  # requests x output length: greedy, end of sequence ignored
    assert row["requests"] == 4
    # Ours come from the runtime's raw token timestamps; PerfMetrics' own summary of the same requests
    # must agree to rounding (both read one set of timestamps, so load on the machine cannot part them).
    assert row["ttft_ms_mean"] == pytest.approx(row["genai_ttft_ms"], rel=1e-3, abs=1e-3)
    assert row["tpot_ms_mean"] == pytest.approx(row["genai_tpot_ms"], rel=1e-3, abs=1e-3)
    # The first token plus the 7 gaps after it all happen inside the request's wall-clock span.
    assert 0 < row["ttft_ms_mean"] + 7 * row["tpot_ms_mean"] <= row["e2e_ms_mean"] + 1e-3
    assert row["ttft_p50_ms"] <= row["ttft_p90_ms"] <= row["ttft_p99_ms"]
    assert row["ran_threads"] == "1" and row["ran_inference_precision"] == "f32" and row["pipeline"] == "LLMPipeline"
    assert row["requests_per_s"] == pytest.approx(row["requests"] / row["measure_s"], rel=1e-6)
    assert row["peak_rss_mb"] > 10


def test_requests_in_flight_run_through_continuous_batching(generator, tmp_path):
    df = generate_profile(generator, db=tmp_path / "g.db", study="g", threads="1", prompt_lens="8", output_lens="4",
                          concurrency="2", kv_cache_precisions="u8", requests=4)
    (row,) = df.to_dict("records")
    assert row["status"] == "ok" and row["concurrency"] == 2
    assert row["output_tokens"] == 4 * 4
    assert row["ran_kv_cache_precision"] == "u8"
    assert row["pipeline"] == "ContinuousBatchingPipeline" and row["ran_max_num_seqs"] >= 2
    # TPOT per request from each handle's PerfMetrics. TTFT from our clock, before add_request, as
    # `generate` counts it: the handle's own clock starts after the prompt is tokenized, so it reads less.
    assert row["ttft_ms_mean"] > row["genai_ttft_ms"] > 0
    assert row["tpot_ms_mean"] == pytest.approx(row["genai_tpot_ms"], rel=1e-3, abs=1e-3)
    assert 0 < row["ttft_ms_mean"] + 3 * row["tpot_ms_mean"] <= row["e2e_ms_mean"] + 1e-3
    # Rerun: every point is stored, nothing is measured again.
    again = generate_profile(generator, db=tmp_path / "g.db", study="g", threads="1", prompt_lens="8", output_lens="4",
                             concurrency="2", kv_cache_precisions="u8", requests=4, return_frame=False)
    assert again.skipped_done == 1 and again.ok == 0


def test_bf16_runs_only_where_the_cpu_has_it(generator, tmp_path):
    from cpu_flags import bf16_native

    # Two threads: OpenVINO 2026.4 dies of SIGFPE compiling this decoder for BF16 on one thread on AMX
    # CPUs (the point is then stored as failed, with the signal named); two threads compile.
    df = generate_profile(generator, db=tmp_path / "g.db", study="g", threads="2", prompt_lens="8", output_lens="4",
                          inference_precisions="bf16", requests=2)
    (row,) = df.to_dict("records")
    if bf16_native():
        assert row["status"] == "ok" and row["ran_inference_precision"] == "bf16", row
    else:
        assert row["status"] == "skipped" and "bf16" in row["error"], row


BREAK = """
import sys, numpy as np, openvino as ov, openvino.opset13 as ops
src, out = sys.argv[1], sys.argv[2]
m = ov.Core().read_model(src)
rng = np.random.default_rng(1)
for op in list(m.get_ops()):
    if op.get_type_name() == "Constant" and op.get_output_element_type(0) == ov.Type.f32:
        shape = list(op.get_output_shape(0))
        if int(np.prod(shape)) >= 4096:
            noise = ops.constant(rng.standard_normal(shape).astype(np.float32))
            for t in list(op.output(0).get_target_inputs()):
                t.replace_source_output(noise.output(0))
ov.save_model(m, out, compress_to_fp16=False)
"""


def test_quality_guard_passes_the_model_itself_and_fails_a_broken_variant(generator, generator_copy):
    same = generation_quality(generator, generator_copy, prompt_len=8, output_len=8, prompts=2)
    assert same["top1_agreement"] == 1.0 and same["greedy_agreement"] == 1.0
    assert same["first_divergence"] is None and same["mean_kl"] == pytest.approx(0.0, abs=1e-9)
    broken = generator_copy.parent / "broken"
    shutil.copytree(generator_copy, broken)
    subprocess.run([sys.executable, "-c", BREAK, str(generator_copy / "openvino_model.xml"),
                    str(broken / "openvino_model.xml")], check=True, capture_output=True)
    q = generation_quality(generator, broken, prompt_len=8, output_len=8, prompts=2)
    from wb_core.generation.quality import DEFAULT_MIN_TOP1, verdict

    assert q["top1_agreement"] < DEFAULT_MIN_TOP1 and q["mean_kl"] > 0.01
    assert verdict(q)[0] == "failed" and "quality failed" in verdict(q)[1]


def test_a_quality_failed_run_is_never_recommended(tmp_path):
    from wb_core.store import Store

    db = tmp_path / "r.db"
    rows = [("fast-but-broken", "int4_sym", 900.0, "failed"), ("good", "int8_asym", 600.0, "passed"),
            ("slow", "none", 300.0, None)]
    with Store(db) as s:
        s.ensure_study("r", "m", "openvino", "fp", {}, "hw", {}, {}, [])
        for key, fmt, tps, guard in rows:
            metrics = {"output_tokens_per_s": tps, "ttft_p99_ms": 5.0, "tpot_p99_ms": 1000 / tps, "e2e_p99_ms": 50.0,
                       "throughput": tps, "latency_ms_p99": 50.0, "variant": fmt}
            if guard:
                metrics["accuracy_guard"] = guard
            if guard == "failed":
                metrics["accuracy_guard_note"] = "quality failed: below the limit"
            s.add_run("r", key, {"weight_format": fmt, "concurrency": 1, "study_kind": "generation"}, "ok", metrics)
    rec = recommend_generation("r", db)
    assert rec["best"]["variant"] == "int8_asym"
    assert any("quality failed" in n for n in rec["notes"])
    tight = recommend_generation("r", db, max_tpot_ms=2.0)  # 1000/600 = 1.67 ms; 1000/300 = 3.3 ms
    assert tight["best"]["variant"] == "int8_asym"
    from wb_core.api import NoRunMeetsConstraints

    with pytest.raises(NoRunMeetsConstraints, match="time per output token within 1 ms"):
        recommend_generation("r", db, max_tpot_ms=1.0)


def test_bad_input_is_refused_in_one_sentence_before_measuring(generator, generator_copy, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "openvino_model.xml").write_text("<net/>")
    with pytest.raises(ModelError, match="not a text-generation model folder: it has no openvino_tokenizer.xml"):
        generate_profile(plain, db=tmp_path / "x.db")
    for axes, words in (({"prompt_lens": "1020", "output_lens": "8"}, "more than the model's context of 1024"),
                        ({"weight_formats": "int4_sym", "group_sizes": "48"}, "does not divide the model's hidden size 64"),
                        ({"output_lens": "0"}, "Output length")):
        with pytest.raises(ConfigError, match=words):
            generate_profile(generator, db=tmp_path / "x.db", **axes)
    assert not (tmp_path / "x.db").exists()  # refused before any study was opened
    wrong = generator_copy.parent / "wrong-tokenizer"
    shutil.copytree(generator_copy, wrong)
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    tok.train_from_iterator(["a b c"], trainers.BpeTrainer(vocab_size=2000, special_tokens=[f"<x{i}>" for i in range(1500)]))
    tok.save(str(wrong / "tokenizer.json"))
    with pytest.raises(ModelError, match="do not belong together"):
        inspect_model(wrong)


def test_context_and_hidden_size_are_read_under_gpt2s_names_too(generator_copy, tmp_path):
    # GPT-2's config.json says n_embd, n_positions and n_layer where Llama's says hidden_size,
    # max_position_embeddings and num_hidden_layers: the checks that need them must still hold.
    gpt2 = generator_copy.parent / "gpt2-names"
    shutil.copytree(generator_copy, gpt2)
    cfg = json.loads((gpt2 / "config.json").read_text())
    renamed = {"hidden_size": "n_embd", "max_position_embeddings": "n_positions", "num_hidden_layers": "n_layer"}
    cfg = {renamed.get(k, k): v for k, v in cfg.items()}
    (gpt2 / "config.json").write_text(json.dumps(cfg))
    desc = inspect_model(gpt2)
    assert (desc.hidden_size, desc.context, desc.layers) == (64, 1024, 2)
    for axes, words in (({"prompt_lens": "1020", "output_lens": "8"}, "more than the model's context of 1024"),
                        ({"weight_formats": "int4_sym", "group_sizes": "48"}, "does not divide the model's hidden size 64")):
        with pytest.raises(ConfigError, match=words):
            generate_profile(gpt2, db=tmp_path / "x.db", **axes)
    assert not (tmp_path / "x.db").exists()


def test_the_model_call_sweep_sends_a_generator_to_its_own_verb(generator, tmp_path):
    from wb_core.api import profile

    with pytest.raises(ModelError, match="is a text-generation model.*generate_profile"):
        profile(generator, db=tmp_path / "p.db")


def test_a_hugging_face_folder_needs_the_hf_extra(generator, monkeypatch):
    from wb_core.generation import folder

    real = folder.importlib.util.find_spec
    monkeypatch.setattr(folder.importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith(("optimum", "torch")) else real(name, *a))
    with pytest.raises(ConfigError, match=r"needs the hf extra.*cpu-inference-workbench\[hf\]"):
        inspect_model(generator / "hf")  # the demo's own Hugging Face folder


def test_a_generation_folder_needs_the_genai_extra(generator, monkeypatch):
    from wb_core.generation import folder

    real = folder.importlib.util.find_spec
    monkeypatch.setattr(folder.importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("openvino_genai") else real(name, *a))
    with pytest.raises(ConfigError, match=r"needs the genai extra.*cpu-inference-workbench\[genai\]"):
        inspect_model(generator)


def test_a_kv_cache_precision_the_plugin_refuses_stops_the_study(generator):
    from wb_core.generation.spec import GenPoint
    from wb_core.generation.study import check_points, describe_generator

    desc = describe_generator(generator, kv_cache_precisions=["u8"])
    assert desc.kv_cache_accepted == {"u8": "u8"}  # asked of the CPU plugin, and read back
    desc.kv_cache_accepted["f16"] = "refused: Unsupported KV cache precision"  # what a refusal is stored as
    with pytest.raises(ConfigError, match="The CPU plugin refuses KV-cache precision f16"):
        check_points(desc, [GenPoint(kv_cache_precision="f16")])


@pytest.mark.slow
def test_a_hugging_face_folder_is_converted_once(generator):
    desc = inspect_model(generator / "hf")
    assert desc.vocab_size == 1024 and desc.layers == 2
    assert inspect_model(generator / "hf").path == desc.path  # cached by content


def test_the_ovms_llm_graph_follows_its_schemas(tmp_path):
    from wb_core.api import export_generation

    run = {"variant": "int4_sym-g32-r1", "inference_precision": "fp32", "kv_cache_precision": "u8", "threads": 2,
           "concurrency": 4, "cache_size_gb": 1, "prompt_len": 32, "output_len": 16, "tpot_p99_ms": 3.0}
    files = export_generation(run, tmp_path / "deploy", name="demo")
    config = json.loads(files["config.json"])
    _check_ovms_config(config)
    assert config["mediapipe_config_list"] == [{"name": "demo", "base_path": "demo"}]
    options = _parse_llm_options(files["demo/graph.pbtxt"])
    assert options.models_path == "./" and options.device == "CPU"
    assert options.max_num_seqs == 4 and options.cache_size == 1
    assert json.loads(options.plugin_config) == {"KV_CACHE_PRECISION": "u8", "INFERENCE_NUM_THREADS": "2",
                                                 "INFERENCE_PRECISION_HINT": "f32"}
    import yaml

    dep = yaml.safe_load((tmp_path / "deploy" / "deployment.yaml").read_text())
    assert dep["generation"] == {"prompt_tokens": 32, "max_new_tokens": 16, "do_sample": False}


# OVMS's config.json schema for a graph (src/schema.cpp, MODELS_CONFIG_SCHEMA: mediapipe_config).
MEDIAPIPE_CONFIG = {"type": "object", "required": ["name"], "additionalProperties": False,
                    "properties": {"name": {"type": "string"}, "base_path": {"type": "string"},
                                   "graph_path": {"type": "string"}, "subconfig": {"type": "string"}}}


def _check_ovms_config(config: dict) -> None:
    import jsonschema

    jsonschema.validate(config, {"type": "object", "required": ["model_config_list"],
                                 "properties": {"model_config_list": {"type": "array"},
                                                "mediapipe_config_list": {"type": "array", "items": MEDIAPIPE_CONFIG}}})


# The scalar fields of OVMS's LLMCalculatorOptions (src/llm/llm_calculator.proto): name, number, type.
LLM_OPTIONS = [("models_path", 1, "string"), ("max_num_batched_tokens", 2, "uint64"), ("cache_size", 3, "uint64"),
               ("max_num_seqs", 4, "uint64"), ("dynamic_split_fuse", 5, "bool"), ("device", 6, "string"),
               ("plugin_config", 7, "string"), ("best_of_limit", 8, "uint32"), ("max_tokens_limit", 9, "uint32"),
               ("enable_prefix_caching", 10, "bool"), ("draft_models_path", 11, "string"), ("draft_device", 12, "string")]


def _parse_llm_options(graph: str):
    """The graph's LLMCalculatorOptions block parsed by protobuf's text format against that message."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

    kinds = {"string": 9, "uint64": 4, "bool": 8, "uint32": 13}
    fd = descriptor_pb2.FileDescriptorProto(name="llm_options_test.proto", package="t")
    msg = fd.message_type.add(name="LLMCalculatorOptions")
    for name, number, kind in LLM_OPTIONS:
        msg.field.add(name=name, number=number, type=kinds[kind], label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("t.LLMCalculatorOptions"))
    head = "[type.googleapis.com / mediapipe.LLMCalculatorOptions]: {"
    start = graph.index(head) + len(head)
    body = graph[start:graph.index("\n    }", start)]  # the block's closing brace, on a line of its own
    assert 'calculator: "HttpLLMCalculator"' in graph and 'input_side_packet: "LLM_NODE_RESOURCES:llm"' in graph
    return text_format.Parse(body, cls())


def test_cli_writes_the_demo_and_reports_a_generation_study(generator, tmp_path):
    from typer.testing import CliRunner

    from wb_core.cli import app

    res = CliRunner().invoke(app, ["demo-model", "text-generator", "--out", str(tmp_path)])
    assert res.exit_code == 0 and "OpenVINO GenAI folder" in res.output, res.output
    db = tmp_path / "c.db"
    res = CliRunner().invoke(app, ["generate", str(tmp_path / "text-generator"), "--db", str(db), "--study", "cli",
                                   "--threads", "1", "--prompt-len", "8", "--output-len", "4", "--requests", "2", "-q"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["results", "--study", "cli", "--db", str(db)])
    assert res.exit_code == 0, res.output
    header, row = res.output.splitlines()[:2]
    # The generation figures, by the generation study's own columns (not a classifier's batch size).
    assert header.split()[:2] == ["weights", "prec"] and "TTFT p99" in header and "TPOT p99" in header
    assert "batch_size" not in header and row.split()[0] == "none" and row.split()[-1] == "ok"
    res = CliRunner().invoke(app, ["report", "--study", "cli", "--db", str(db), "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    assert "Text generation: output tokens\\u002fs vs p99 time per output token" in (tmp_path / "r.html").read_text()
    res = CliRunner().invoke(app, ["generate-recommend", "--study", "cli", "--db", str(db), "--max-tpot-ms", "0.000001"])
    assert res.exit_code != 0 and "No run keeps the p99 time per output token within" in str(res.exception), res.output


def test_generation_plot_colours_by_weight_format():
    from wb_core.api import plots

    df = pd.DataFrame([{"status": "ok", "weight_format": f, "variant": f, "concurrency": 1, "threads": 1,
                        "tpot_p99_ms": t, "output_tokens_per_s": s, "accuracy_guard": g,
                        "throughput": s, "latency_ms_p99": 10 * t}  # the common columns every stored row has
                       for f, t, s, g in (("none", 2.0, 500.0, None), ("int8_asym", 1.0, 900.0, "passed"),
                                          ("int4_sym", 0.5, 1500.0, "failed"))])
    fig = plots.generation_pareto(df)
    names = [t.name for t in fig.data]
    # Named in words; the failed one is drawn apart.
    assert "the model's own" in names and "INT8" in names and "INT4 symmetric" not in names
    front = next(t for t in fig.data if t.name == "Pareto front")
    assert list(front.x) == [1.0]  # int8 beats the uncompressed run on both axes


def test_a_generation_run_is_named_by_its_own_settings_in_words():
    from wb_core.faces import run_name

    row = {"study_kind": "generation", "backend": "openvino-genai", "precision": "fp32", "batch_size": 1,
           "weight_format": "int4_sym", "group_size": 64, "ratio": 0.8, "inference_precision": "bf16",
           "kv_cache_precision": "u8", "threads": 2, "cores": None, "concurrency": 4, "prompt_len": 128,
           "output_len": 32, "cache_size_gb": None}
    assert run_name(row) == ("OpenVINO GenAI · INT4 symmetric weights · groups of 64 · INT4 share 0.8 · BF16 activations"
                             " · KV cache U8 · 128-token prompts · 32 tokens out · 2 threads · not pinned · 4 in flight")
    # The group size and ratio say nothing of INT8 or the model's own weights; a whole INT4 share goes unsaid.
    assert run_name({**row, "weight_format": "int8_asym", "concurrency": 1, "kv_cache_precision": None}) == (
        "OpenVINO GenAI · INT8 weights · BF16 activations · 128-token prompts · 32 tokens out · 2 threads · not pinned")
    assert "INT4 share" not in run_name({**row, "ratio": 1.0})
    assert run_name({**row, "weight_format": "none"}).startswith("OpenVINO GenAI · the model's own weights · BF16")


def test_poisson_arrivals_count_each_requests_wait_from_its_arrival(generator, tmp_path):
    # A rate no CPU keeps up with puts every request at the door at once: through one slot each waits
    # for those before it (the last for three services: 9.6 ms against 2.2 ms of a request's own work
    # here). At 2 a second they hardly wait at all.
    df = generate_profile(generator, db=tmp_path / "p.db", study="p", threads="1", prompt_lens="16", output_lens="8",
                          requests=4, rates="100000,2", concurrency="1")
    rows = {r["rate"]: r for r in df.to_dict("records")}
    flood, calm = rows[100000.0], rows[2.0]
    for r in (flood, calm):
        assert r["status"] == "ok" and r["requests"] == 4 and r["target_rate"] == r["rate"], r
        assert r["ttft_p99_ms"] >= r["queue_p99_ms"]  # the first token counts from the arrival
    # A request's own work, from the runtime's timing of the same point (so load on the machine hits
    # both sides): its first token (from add_request, not from arrival) and the steps after it. The
    # requests' own work is more (tokenizing, detokenizing): the flood's last waits about 3 of them.
    def service(r):
        return r["genai_ttft_ms"] + (r["output_len"] - 1) * r["tpot_p50_ms"]

    assert flood["queue_p99_ms"] > 2 * service(flood), (flood["queue_p99_ms"], service(flood))
    # At 2 a second a request waits only for the dispatcher to wake (no busy-waiting: about 0.5 ms here).
    assert calm["queue_ms_mean"] < service(calm), (calm["queue_ms_mean"], service(calm))
    from wb_core.faces import run_name

    assert run_name(flood).endswith("· 100000 req/s") and "in flight" not in run_name(flood)
