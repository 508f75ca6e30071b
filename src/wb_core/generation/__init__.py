"""Text-generation models on the CPU: time to first token, time per output token and tokens/s.

- `folder`: what makes a folder an OpenVINO GenAI model (or a Hugging Face one to convert), read
  without a runtime;
- `spec`: the sweep of a generation study (its axes are declared in `axes.GENERATION`);
- `tasks`: the worker side (describe, compress weights, measure, quality), where openvino_genai runs;
- `quality`: the guard against the uncompressed model, as numbers;
- `study`: the parent side: variants cached by content hash, one worker per point, the store;
- `analysis`: the rows' recommendation under TTFT, TPOT and latency limits.
"""
