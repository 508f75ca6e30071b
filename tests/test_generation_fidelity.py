"""A generation point is measured the way openvino_genai's own benchmark measures a request: every
prompt's prefill computed (prefix caching off), the prompt given as text exactly as long as asked
(no chat template around it), on the demo generator and copies of it changed on purpose.

The figures checked come from the runtime (PerfMetrics' input token count and tokenization time)
or from the model's cost (a long prefill against a short one), not from the code under test.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wb_core.api import generate_profile


def test_a_repeated_prompt_is_prefilled_again_not_read_from_the_cache(generator, tmp_path):
    from tokenizers import Tokenizer

    # One line whose token count divides the prompt length: every prompt (the warm-up's too) is
    # the same tokens. With prefix caching on, LLMPipeline's own default, every request after the
    # first would read its prefill back from the cache.
    line = "the cat sat on the mat"
    n = len(Tokenizer.from_file(str(generator / "tokenizer.json")).encode(line, add_special_tokens=False).ids)
    # As long as the demo's context allows (1024 positions, 8 of them for the output): the longer the
    # prefill, the further apart computed and cached first tokens lie.
    prompt_len = n * ((1024 - 8) // n)
    text = tmp_path / "one-line.txt"
    text.write_text(line + "\n", encoding="utf-8")
    df = generate_profile(generator, db=tmp_path / "g.db", study="g", text=text, threads="1",
                          prompt_lens=str(prompt_len), output_lens="8", requests=6)
    (row,) = df.to_dict("records")
    assert row["status"] == "ok", row
    assert row["input_tokens_min"] == row["input_tokens_max"] == prompt_len
    # The first token against one decoding step of the same requests (so load on the machine hits
    # both): computed, about 1000 tokens of prefill take 30-50 steps' time on AMD EPYC Zen 4, quiet
    # or busy (about 500 tokens took 9, and 6.7 on a busy machine); read from the cache (LLMPipeline
    # with prefix caching on, the same prompts), 3-4 steps'.
    assert row["ttft_p50_ms"] > 10 * row["tpot_p50_ms"], (row["ttft_p50_ms"], row["tpot_p50_ms"])


@pytest.fixture
def chat_generator(generator, tmp_path) -> Path:
    """The demo with a chat template in its tokenizer config (as instruction-tuned models ship):
    LLMPipeline wraps a text prompt in it unless told not to."""
    d = tmp_path / "chat"
    shutil.copytree(generator, d, ignore=shutil.ignore_patterns("hf"))
    cfg_path = d / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = "{% for m in messages %}<s>user says: {{ m['content'] }}</s>{% endfor %}assistant answers:"
    cfg_path.write_text(json.dumps(cfg))
    return d


def test_a_text_prompt_reaches_the_model_as_long_as_asked_even_with_a_chat_template(chat_generator, tmp_path):
    df = generate_profile(chat_generator, db=tmp_path / "g.db", study="g", threads="1", prompt_lens="24",
                          output_lens="4", requests=3)
    (row,) = df.to_dict("records")
    assert row["status"] == "ok", row
    assert row["prompt_input"] == "text"
    # The runtime's own count of the tokens it prefilled: the template would add a dozen and more.
    assert row["input_tokens_min"] == row["input_tokens_max"] == 24
    # Tokenized inside the request, as a user's call is: the runtime timed it.
    assert row["tokenization_ms_mean"] > 0
    assert row["output_tokens"] == 3 * 4
