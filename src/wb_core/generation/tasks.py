"""The worker side of a generation study: describe a GenAI folder, compress its weights, measure
one configuration, and check a variant's quality against the uncompressed model.

Order matters as for inference: pin the cores, THEN import OpenVINO (its CPU plugin sizes its
pools from the affinity it sees). Greedy decoding with a fixed output length (`ignore_eos`), so
every request of a point makes the same number of tokens. A request is measured the way
openvino_genai's own `benchmark_genai` measures one: its prompt given as text (tokenized inside
the request's time, no chat template), prefix caching off (each prompt's prefill is computed,
never read back from an earlier request's cache).
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import time
from pathlib import Path

from wb_core.precisions import baseline, ov_hint
from wb_core.proc.channel import emit

MODEL_XML = "openvino_model.xml"


def _apply(task: dict) -> None:
    """Affinity and memory limit, as every worker sets them, before openvino_genai is imported."""
    from wb_core.proc.worker import apply_process_settings

    apply_process_settings({"cores": task.get("cores")}, task.get("memory_limit_mb"))


def plugin_properties(task: dict) -> dict:
    """The CPU plugin's properties for a point: precision always explicit (a BF16-capable CPU would
    otherwise run "fp32" as bf16), threads and KV-cache precision only when set."""
    props = {"INFERENCE_PRECISION_HINT": ov_hint(task.get("inference_precision") or baseline())}
    if task.get("threads"):
        props["INFERENCE_NUM_THREADS"] = int(task["threads"])
    if task.get("kv_cache_precision"):
        props["KV_CACHE_PRECISION"] = task["kv_cache_precision"]
    return props


# ---- describe ----

def _weight_precisions(model) -> dict[str, int]:
    """Element types of the weight constants (those of at least 256 values), by count of values."""
    counts: dict[str, int] = {}
    for op in model.get_ops():
        if op.get_type_name() != "Constant":
            continue
        shape = op.get_output_partial_shape(0)
        if not shape.is_static:
            continue
        n = 1
        for d in shape.to_shape():
            n *= int(d)
        if n >= 256:
            t = str(op.get_output_element_type(0).get_type_name())
            counts[t] = counts.get(t, 0) + n
    return counts


def task_describe(task: dict) -> None:
    """Inputs, vocabulary size, KV-cache layout and weight precision of a GenAI folder's model; and
    whether the CPU plugin takes each KV-cache precision asked for (what it reports back)."""
    import openvino as ov

    from wb_core.errors import ModelError

    core = ov.Core()
    folder = Path(task["folder"])
    try:
        model = core.read_model(str(folder / MODEL_XML))
    except Exception as e:
        raise ModelError(f"OpenVINO cannot read '{folder / MODEL_XML}': {str(e).strip().splitlines()[0][:200]}") from None
    inputs = [{"name": i.get_any_name(), "shape": str(i.get_partial_shape()), "dtype": i.get_element_type().get_type_name()}
              for i in model.inputs]
    names = {i["name"] for i in inputs}
    if "input_ids" not in names or not any(o.get_any_name() == "logits" for o in model.outputs):
        raise ModelError(f"'{folder}' holds a model without input_ids and logits ({', '.join(sorted(names))}): "
                         f"it is not a text-generation model.")
    logits = next(o for o in model.outputs if o.get_any_name() == "logits").get_partial_shape()
    vocab = int(logits[2].get_length()) if logits.rank.get_length() == 3 and logits[2].is_static else None
    states = [op for op in model.get_ops() if op.get_type_name() == "ReadValue"]
    kv = {"states": len(states), "stateful": bool(states)}
    if states:
        shape = states[0].get_output_partial_shape(0)
        kv.update(layout="[batch, kv_heads, sequence, head_size]", shape=str(shape),
                  kv_heads=int(shape[1].get_length()) if shape[1].is_static else None,
                  head_size=int(shape[3].get_length()) if shape.rank.get_length() == 4 and shape[3].is_static else None,
                  dtype=states[0].get_output_element_type(0).get_type_name())
    accepted = {}
    for p in task.get("kv_cache_precisions") or []:
        try:
            compiled = core.compile_model(model, "CPU",
                                          {"KV_CACHE_PRECISION": p, "INFERENCE_PRECISION_HINT": ov_hint(baseline())})
            said = compiled.get_property("KV_CACHE_PRECISION")
            accepted[p] = said.get_type_name() if hasattr(said, "get_type_name") else str(said)
        except Exception as e:
            accepted[p] = "refused: " + str(e).strip().splitlines()[0][:160]
    emit({"type": "result", "inputs": inputs, "vocab_size": vocab, "kv_cache": kv,
          "weights": _weight_precisions(model), "kv_cache_accepted": accepted})


# ---- compress ----

def task_compress(task: dict) -> None:
    """`nncf.compress_weights` of the folder's model into `out` (tokenizer, detokenizer and configs copied)."""
    import nncf
    import openvino as ov

    src, out = Path(task["folder"]), Path(task["out"])
    out.mkdir(parents=True, exist_ok=True)
    model = ov.Core().read_model(str(src / MODEL_XML))
    modes = {"int8_asym": nncf.CompressWeightsMode.INT8_ASYM, "int4_sym": nncf.CompressWeightsMode.INT4_SYM,
             "int4_asym": nncf.CompressWeightsMode.INT4_ASYM}
    kwargs = {"mode": modes[task["weight_format"]]}
    if task["weight_format"].startswith("int4"):
        kwargs.update(group_size=int(task["group_size"]), ratio=float(task["ratio"]))
    compressed = nncf.compress_weights(model, **kwargs)
    ov.save_model(compressed, str(out / MODEL_XML), compress_to_fp16=False)
    for f in src.iterdir():
        if f.is_file() and not f.name.startswith("openvino_model."):
            shutil.copy2(f, out / f.name)
    emit({"type": "result", "weights": _weight_precisions(compressed)})


def task_convert_hf(task: dict) -> None:
    """A Hugging Face folder exported by optimum-intel as an OpenVINO GenAI folder (FP32 weights)."""
    from wb_core.optimum_export import export_to_openvino_genai

    export_to_openvino_genai(task["folder"], task["out"])
    emit({"type": "result", "out": task["out"]})


# ---- prompts ----

def prompt_ids(tokenizer, lines: list[str], prompt_len: int, count: int) -> list[list[int]]:
    """`count` prompts of exactly `prompt_len` tokens: windows over the text's tokens, start to end,
    the text repeated when it holds fewer tokens than the prompts need."""
    import numpy as np

    ids: list[int] = []
    for line in lines:
        enc = tokenizer.encode(line, add_special_tokens=False)
        ids.extend(int(x) for x in np.asarray(enc.input_ids.data).ravel())
        if len(ids) >= prompt_len * count:
            break
    if not ids:
        from wb_core.errors import ConfigError

        raise ConfigError("The prompt text gives no tokens through the model's tokenizer.")
    while len(ids) < prompt_len * count:
        ids = ids + ids
    return [ids[i * prompt_len:(i + 1) * prompt_len] for i in range(count)]


def prompt_texts(tokenizer, prompts: list[list[int]]) -> list[str] | None:
    """Each prompt as the text users would pass, when the pipeline's own tokenization of that text
    (special tokens added, as `generate` adds them) gives back exactly its tokens; None when any
    does not (the prompts then go as token ids, so their length still holds)."""
    import numpy as np

    texts = []
    for ids in prompts:
        text = tokenizer.decode(ids)
        back = np.asarray(tokenizer.encode(text, add_special_tokens=True).input_ids.data).ravel()
        if [int(x) for x in back] != list(ids):
            return None
        texts.append(text)
    return texts


def _tensor(ids):
    import numpy as np
    import openvino as ov

    return ov.Tensor(np.array([ids], dtype=np.int64))


def _config(output_len: int):
    import openvino_genai as og

    cfg = og.GenerationConfig()
    cfg.max_new_tokens = int(output_len)
    cfg.ignore_eos = True  # the fixed length; no min_new_tokens beside it (a logit transform every step)
    cfg.do_sample = False
    cfg.apply_chat_template = False  # a text prompt goes in as written, not wrapped in the model's chat template
    return cfg


def llm_pipeline(folder: str, props: dict):
    """LLMPipeline as openvino_genai's benchmark opens it: the paged-attention backend with prefix
    caching off and prefill never split. The pipeline's own default turns prefix caching on, so a
    prompt seen before (text shorter than the prompts need is repeated) would skip its prefill."""
    import openvino_genai as og

    sched = og.SchedulerConfig()
    sched.enable_prefix_caching = False
    sched.max_num_batched_tokens = sys.maxsize
    return og.LLMPipeline(folder, "CPU", scheduler_config=sched, **props), sched


def _request_input(prompt):
    """What `generate` / `add_request` take: the text as it is, or the token ids as a tensor."""
    return prompt if isinstance(prompt, str) else _tensor(prompt)


# ---- measure ----

def request_stats(perf_metrics, t0: float, t_end: float, t_first: float | None = None) -> dict:
    """One request's TTFT, TPOT (ms) and tokens from the runtime's own raw timing, by openvino_genai's
    definitions; end-to-end latency (ms) and output tokens/s from our wall clock around the request.

    TTFT: the runtime's time from the request's start to its first token (`m_times_to_first_token`;
    with a text prompt given to `generate` the start is before its tokenization, as in
    `PerfMetrics.get_ttft()`). A request added with `add_request` is timed by the runtime from after
    its tokenization, so there `t_first` (our clock at the end of the step that gave its first token)
    is read instead, from `t0` taken before `add_request`, as `generate` counts it.
    TPOT: the mean gap between consecutive token timestamps (`m_new_token_times`), each gap divided
    by the tokens it brought (`m_batch_sizes`), the first token's prefill excluded: what
    `PerfMetrics.get_tpot()` reports. The runtime stamps tokens as it makes them, so a callback
    run late or in bursts on another thread cannot skew them.
    """
    raw = perf_metrics.raw_metrics
    # Milliseconds on the steady clock (the binding's help says microseconds; the values, set beside
    # time.monotonic(), are milliseconds). m_times_to_first_token is in microseconds.
    times = [float(t) for t in raw.m_new_token_times]
    sizes = [int(b) for b in raw.m_batch_sizes]
    firsts = [float(t) for t in raw.m_times_to_first_token]
    n = sum(sizes)
    gaps = [(times[i] - times[i - 1]) / sizes[i] for i in range(1, len(times)) if sizes[i]]
    e2e = (t_end - t0) * 1e3
    tokenization = float(perf_metrics.get_tokenization_duration().mean)  # -1 when the prompt came as ids
    ttft = (t_first - t0) * 1e3 if t_first is not None else firsts[0] / 1e3 if firsts else None
    return {"ttft_ms": ttft, "tpot_ms": sum(gaps) / len(gaps) if gaps else None,
            "e2e_ms": e2e, "tokens": n, "tokens_per_s": n / (t_end - t0) if t_end > t0 else None,
            "input_tokens": int(perf_metrics.get_num_input_tokens()),
            "tokenization_ms": tokenization if tokenization >= 0 else None,
            # PerfMetrics' own summary of the same request, stored beside ours as a check.
            "genai_ttft_ms": float(perf_metrics.get_ttft().mean), "genai_tpot_ms": float(perf_metrics.get_tpot().mean)}


def _single(pipe, prompts, cfg) -> list[dict]:
    """Requests one after another through LLMPipeline, timed by the result's PerfMetrics (no streamer:
    a Python callback per token would add its own cost to every token). A text goes in a list: the
    pipeline then returns its results with their PerfMetrics, not a bare string."""
    out = []
    for prompt in prompts:
        arg = [prompt] if isinstance(prompt, str) else _tensor(prompt)
        t0 = time.perf_counter()
        res = pipe.generate(arg, cfg)
        t_end = time.perf_counter()
        out.append(request_stats(res.perf_metrics, t0, t_end))
        emit({"type": "heartbeat"})  # a long request on a large model is not a hang
    return out


def _batched(pipe, prompts, cfg, concurrency: int) -> list[dict]:
    """Closed loop through ContinuousBatchingPipeline: `concurrency` requests in flight, the next
    added as one finishes. TTFT and TPOT from each request handle's own PerfMetrics (the runtime
    times a request from `add_request`); end-to-end latency from our clock, from `add_request` to the step that
    finished it."""
    queue = list(enumerate(prompts))
    live: dict[int, dict] = {}
    out = []

    def add():
        rid, prompt = queue.pop(0)
        arg = _request_input(prompt)
        t0 = time.perf_counter()
        live[rid] = {"handle": pipe.add_request(rid, arg, cfg), "t0": t0}

    while queue and len(live) < concurrency:
        add()
    while live:
        now, done = _step(pipe, live)
        for r in done:
            out.append(request_stats(r["handle"].get_perf_metrics(), r["t0"], now, r.get("first")))
            emit({"type": "heartbeat"})
            if queue:
                add()
    return out


def _step(pipe, live: dict) -> tuple[float, list[dict]]:
    """One step of the continuous-batching scheduler: when it ended, and the requests it finished
    (taken out of `live`, request id -> {"handle": ..., ...}); a request's "first" is when the step
    that gave its first token ended."""
    import openvino_genai as og

    pipe.step()
    now = time.perf_counter()
    done = []
    for rid in list(live):
        h = live[rid]["handle"]
        # Looked at only until its first token: Python run between steps lengthens every step (TPOT),
        # and the tokens themselves are not needed here.
        if "first" not in live[rid] and h.can_read():
            live[rid]["first"] = now
        if h.get_status() != og.GenerationStatus.RUNNING:
            done.append(live.pop(rid))
    return now, done


def _poisson(pipe, prompts, cfg, rate: float, in_flight: int, seed: int = 0) -> list[dict]:
    """Open loop through ContinuousBatchingPipeline: requests arrive at random (Poisson, `rate` per
    second, the arrival times drawn beforehand from `seed`), at most `in_flight` of them are run at
    once, and the others wait in arrival order. A request's TTFT and end-to-end latency count from
    its arrival, so they hold the time it waited to be added, which is where a server that cannot
    keep up shows it."""
    import numpy as np

    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=len(prompts))
    start = time.perf_counter() + 0.01
    arrivals = start + np.cumsum(gaps) - gaps[0]  # the first request arrives at the start
    waiting: list[int] = []
    live: dict[int, dict] = {}
    out: list[dict] = []
    nxt = 0
    while nxt < len(prompts) or waiting or live:
        now = time.perf_counter()
        while nxt < len(prompts) and arrivals[nxt] <= now:
            waiting.append(nxt)
            nxt += 1
        while waiting and len(live) < in_flight:
            rid = waiting.pop(0)
            added = time.perf_counter()
            live[rid] = {"handle": pipe.add_request(rid, _request_input(prompts[rid]), cfg),
                         "arrival": float(arrivals[rid]), "added": added}
        if not live:  # nothing to run until the next arrival: sleep, not spin (the CPUs serve the model)
            time.sleep(max(0.0, min(float(arrivals[nxt]) - time.perf_counter(), 0.05)))
            continue
        now, done = _step(pipe, live)
        for r in done:
            stats = request_stats(r["handle"].get_perf_metrics(), r["arrival"], now, r.get("first"))
            out.append({**stats, "queue_ms": (r["added"] - r["arrival"]) * 1e3})
            emit({"type": "heartbeat"})
    return out


def task_generate(task: dict) -> None:
    """Measure one configuration: load, warm up (not counted), run the requests, emit a point."""
    _apply(task)
    import openvino_genai as og

    from wb_core.generation.quality import percentile

    folder = task["folder"]
    props = plugin_properties(task)
    concurrency = int(task.get("concurrency") or 1)
    rate = float(task["rate"]) if task.get("rate") else None
    t_load = time.perf_counter()
    if concurrency > 1 or rate:  # requests overlap: the continuous-batching pipeline schedules them
        sched = og.SchedulerConfig()
        if task.get("cache_size_gb"):
            sched.cache_size = int(task["cache_size_gb"])
        sched.max_num_seqs = max(sched.max_num_seqs, concurrency)
        pipe = og.ContinuousBatchingPipeline(folder, sched, "CPU", props)
        ran = {"pipeline": "ContinuousBatchingPipeline", "ran_cache_size_gb": int(sched.cache_size),
               "ran_max_num_seqs": int(sched.max_num_seqs)}
    else:
        pipe, sched = llm_pipeline(folder, props)  # one request at a time: the cache size axis is unused
        ran = {"pipeline": "LLMPipeline"}
    ran["ran_prefix_caching"] = bool(sched.enable_prefix_caching)
    load_s = time.perf_counter() - t_load
    emit({"type": "loaded", "load_s": load_s})
    cfg = _config(task["output_len"])
    requests = max(int(task.get("requests") or 8), concurrency)
    warmup = max(1, int(task.get("warmup") or 1)) * concurrency
    prompts = prompt_ids(pipe.get_tokenizer(), task["lines"], int(task["prompt_len"]), requests + warmup)
    texts = prompt_texts(pipe.get_tokenizer(), prompts)
    ran["prompt_input"] = "text" if texts is not None else "token ids"
    prompts = texts if texts is not None else prompts
    run = (lambda ps: _batched(pipe, ps, cfg, concurrency)) if concurrency > 1 or rate else (
        lambda ps: _single(pipe, ps, cfg))
    run(prompts[:warmup])  # warm-up back to back, arrivals or not
    cpu0, t0 = time.process_time(), time.perf_counter()  # CPU time of every thread, nanosecond clock
    stats = _poisson(pipe, prompts[warmup:], cfg, rate, concurrency) if rate else run(prompts[warmup:])
    wall = time.perf_counter() - t0
    busy = time.process_time() - cpu0
    metrics: dict = {"study_kind": "generation", "requests": len(stats), "load_s": load_s, "measure_s": wall}
    for name in ("ttft_ms", "tpot_ms", "e2e_ms", "tokens_per_s"):
        values = [s[name] for s in stats if s.get(name) is not None]
        for q in (50, 90, 99):
            metrics[f"{name[:-3] if name.endswith('_ms') else name}_p{q}" + ("_ms" if name.endswith("_ms") else "")] = \
                percentile(values, q) if values else None
        metrics[f"{name}_mean"] = sum(values) / len(values) if values else None
    if rate:  # the arrivals asked for, those served per second, and how long requests waited to start
        waits = [s["queue_ms"] for s in stats]
        metrics.update(target_rate=rate, achieved_rate=len(stats) / wall, queue_p99_ms=percentile(waits, 99),
                       queue_ms_mean=sum(waits) / len(waits))
    for name in ("genai_ttft_ms", "genai_tpot_ms", "tokenization_ms"):
        values = [s[name] for s in stats if s.get(name) is not None]
        metrics[name if name.startswith("genai") else f"{name}_mean"] = sum(values) / len(values) if values else None
    metrics["input_tokens_min"] = min(s["input_tokens"] for s in stats)
    metrics["input_tokens_max"] = max(s["input_tokens"] for s in stats)
    tokens = sum(s["tokens"] for s in stats)
    metrics.update(output_tokens=tokens, output_tokens_per_s=tokens / wall, requests_per_s=len(stats) / wall,
                   peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                   cpu_util=busy / wall, cores_given=len(os.sched_getaffinity(0)))
    # The workbench's common columns, so the study's rows read like any other's.
    metrics.update(throughput=metrics["output_tokens_per_s"], latency_ms_p50=metrics["e2e_p50_ms"],
                   latency_ms_p90=metrics["e2e_p90_ms"], latency_ms_p99=metrics["e2e_p99_ms"],
                   latency_ms_mean=metrics["e2e_ms_mean"])
    metrics.update(ran, **_ran(folder, props))
    emit({"type": "point", "metrics": metrics})


def _ran(folder: str, props: dict) -> dict:
    """What the CPU plugin resolves these properties to, read back from a model compiled with them."""
    import openvino as ov

    compiled = ov.Core().compile_model(str(Path(folder) / MODEL_XML), "CPU", props)
    out = {}
    for key, col in (("KV_CACHE_PRECISION", "ran_kv_cache_precision"), ("INFERENCE_PRECISION_HINT", "ran_inference_precision"),
                     ("INFERENCE_NUM_THREADS", "ran_threads")):
        try:
            v = compiled.get_property(key)
            out[col] = v.get_type_name() if hasattr(v, "get_type_name") else str(v)
        except Exception:  # a property this plugin version does not report
            out[col] = None
    return out


# ---- quality ----

def _greedy(folder: str, prompts, output_len: int, props: dict) -> list[list[int]]:
    import openvino_genai as og

    pipe = og.LLMPipeline(folder, "CPU", **props)
    cfg = _config(output_len)
    return [[int(t) for t in pipe.generate(_tensor(ids), cfg).tokens[0]] for ids in prompts]


def _teacher_forced_logits(folder: str, sequences, props: dict):
    """The model's logits over each whole sequence in one pass (the stateful model, its state reset)."""
    import numpy as np
    import openvino as ov

    compiled = ov.Core().compile_model(str(Path(folder) / MODEL_XML), "CPU", props)
    names = {i.get_any_name() for i in compiled.inputs}
    req = compiled.create_infer_request()
    out = []
    for seq in sequences:
        req.reset_state()
        n = len(seq)
        feed = {"input_ids": np.array([seq], np.int64)}
        if "attention_mask" in names:
            feed["attention_mask"] = np.ones((1, n), np.int64)
        if "position_ids" in names:
            feed["position_ids"] = np.arange(n, dtype=np.int64)[None]
        if "beam_idx" in names:
            feed["beam_idx"] = np.zeros(1, np.int32)
        out.append(np.array(req.infer(feed)["logits"][0], np.float32))
    return out


def task_quality(task: dict) -> None:
    """Each candidate against the reference on the same prompts: greedy token agreement and first
    divergence, and teacher-forced top-1 agreement and mean KL on the reference's continuation."""
    _apply(task)
    import openvino_genai as og

    from wb_core.generation import quality

    props = {"INFERENCE_PRECISION_HINT": ov_hint(baseline())}
    ref = task["reference"]
    tok = og.Tokenizer(ref)
    prompts = prompt_ids(tok, task["lines"], int(task["prompt_len"]), int(task.get("prompts") or 4))
    n_out = int(task["output_len"])
    ref_tokens = _greedy(ref, prompts, n_out, props)
    seqs = [p + r for p, r in zip(prompts, ref_tokens)]
    ref_logits = _teacher_forced_logits(ref, seqs, props)
    results = {}
    for name, folder in task["candidates"].items():
        cand_tokens = _greedy(folder, prompts, n_out, props)
        cand_logits = _teacher_forced_logits(folder, seqs, props)
        results[name] = quality.compare(prompts, ref_tokens, cand_tokens, ref_logits, cand_logits)
    emit({"type": "result", "quality": results})
