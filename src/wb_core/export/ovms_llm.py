"""`ovms-llm`: OpenVINO Model Server's LLM serving graph for a generation study's pick.

OVMS serves a text-generation model as a MediaPipe graph (`graph.pbtxt`) holding one
`HttpLLMCalculator` node, whose `LLMCalculatorOptions` (OVMS's `src/llm/llm_calculator.proto`)
carry the model folder, the device, the OpenVINO properties (`plugin_config`, a JSON string) and
the continuous-batching scheduler's settings (`cache_size` in GB, `max_num_seqs`). `config.json`
names the graph in `mediapipe_config_list`. The YAML beside them keeps the generation settings
that were measured (prompt and output lengths, greedy decoding).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from wb_core.export.common import ExportResult
from wb_core.precisions import baseline, ov_hint

FORMAT = "ovms-llm"
DESCRIPTION = "OpenVINO Model Server LLM graph: graph.pbtxt (HttpLLMCalculator) and config.json (mediapipe_config_list)"
IMAGE = "openvino/model_server:latest"


def _quoted(text: str) -> str:
    """A protobuf text-format string literal: single-quoted (as OVMS's documented graphs write a
    JSON `plugin_config`), so the JSON's double quotes need no escapes."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def plugin_config(run: dict) -> dict[str, str]:
    props = {"INFERENCE_PRECISION_HINT": ov_hint(run.get("inference_precision") or baseline())}
    if run.get("threads"):
        props["INFERENCE_NUM_THREADS"] = str(int(run["threads"]))
    if run.get("kv_cache_precision"):
        props["KV_CACHE_PRECISION"] = str(run["kv_cache_precision"])
    return props


def graph_pbtxt(run: dict, models_path: str = "./") -> str:
    options = [f"models_path: {_quoted(models_path)}", 'device: "CPU"',
               f"plugin_config: {_quoted(json.dumps(plugin_config(run), sort_keys=True))}",
               f"max_num_seqs: {max(1, int(run.get('concurrency') or 1))}"]
    if run.get("cache_size_gb"):
        options.append(f"cache_size: {int(run['cache_size_gb'])}")
    body = "\n".join(f"      {o}" for o in options)
    return f"""input_stream: "HTTP_REQUEST_PAYLOAD:input"
output_stream: "HTTP_RESPONSE_PAYLOAD:output"

node: {{
  name: "LLMExecutor"
  calculator: "HttpLLMCalculator"
  input_stream: "LOOPBACK:loopback"
  input_stream: "HTTP_REQUEST_PAYLOAD:input"
  input_side_packet: "LLM_NODE_RESOURCES:llm"
  output_stream: "LOOPBACK:loopback"
  output_stream: "HTTP_RESPONSE_PAYLOAD:output"
  input_stream_info: {{
    tag_index: "LOOPBACK:0",
    back_edge: true
  }}
  node_options: {{
    [type.googleapis.com / mediapipe.LLMCalculatorOptions]: {{
{body}
    }}
  }}
  input_stream_handler {{
    input_stream_handler: "SyncSetInputStreamHandler",
    options {{
      [mediapipe.SyncSetInputStreamHandlerOptions.ext] {{
        sync_set {{
          tag_index: "LOOPBACK:0"
        }}
      }}
    }}
  }}
}}
"""


def render_generation(run: dict, name: str = "model") -> ExportResult:
    """The files for one generation run (a results row as a dict): `name/graph.pbtxt`, `config.json`
    and `deployment.yaml` with the generation settings that were measured."""
    config = {"model_config_list": [], "mediapipe_config_list": [{"name": name, "base_path": name}]}
    notes = []
    if int(run.get("concurrency") or 1) == 1:
        notes.append("Measured with one request in flight (LLMPipeline); OVMS batches requests continuously, "
                     "so max_num_seqs 1 keeps that.")
    deployment = {"kind": "text-generation", "model": name, "server": "openvino-model-server", "image": IMAGE,
                  "variant": run.get("variant"), "plugin_config": plugin_config(run),
                  "scheduler": {"max_num_seqs": max(1, int(run.get("concurrency") or 1)),
                                "cache_size_gb": int(run["cache_size_gb"]) if run.get("cache_size_gb") else None},
                  "generation": {"prompt_tokens": int(run.get("prompt_len") or 0),
                                 "max_new_tokens": int(run.get("output_len") or 0), "do_sample": False},
                  "measured": {k: (float(run[k]) if run.get(k) is not None else None)
                               for k in ("ttft_p99_ms", "tpot_p99_ms", "e2e_p99_ms", "output_tokens_per_s")},
                  "cores": run.get("cores")}
    files = {f"{name}/graph.pbtxt": graph_pbtxt(run), "config.json": json.dumps(config, indent=2) + "\n",
             "deployment.yaml": yaml.safe_dump(deployment, sort_keys=False)}
    folder = run.get("model_folder")
    model_files = []
    if folder and Path(folder).is_dir():  # the measured variant's folder, served from beside the graph
        model_files = sorted(str(f) for f in Path(folder).iterdir() if f.is_file() and f.name != "done")
    return ExportResult(format=FORMAT, files=files, notes=notes, model_files=model_files)
