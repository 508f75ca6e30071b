"""The settings that are not sweep axes, named once: how the CLI and the dashboard call each.

A core message names a setting with `errors.setting(field, words)`, never with a CLI flag; each face
words it (`axes.setting_flag` for the CLI, `axes.setting_label` for the dashboard), reading the
axes table first and this table after it. A new setting that a message names gets its line here;
`tests/test_setting_words.py` fails on a core message that names a `--flag`, on a `setting()` whose
field is in neither table, and on a flag here that no `wb` command has.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Option:
    """A setting outside the axes table: its name in messages, its CLI flag, its dashboard label."""

    field: str  # what a message names it by (`errors.setting(field, ...)`); often the API keyword
    flag: str  # the `wb` option that sets it
    label: str  # what the dashboard calls it (its control's label, or plain words where it has none)


OPTIONS: tuple[Option, ...] = (
    # inputs and data
    Option("data", "--data", "Data"),
    Option("text", "--text", "Text file"),
    Option("tokenizer", "--tokenizer", "Tokenizer"),
    Option("data_inputs", "--data-input", "the data's array for each input"),
    Option("int_ranges", "--int-range", "Integer input range"),
    Option("batch_axes", "--batch-axis", "Batch axis"),
    Option("output", "--output", "the output accuracy reads"),
    Option("decode", "--decode", "the output's decoding"),
    Option("subset_size", "--calib-size", "Calibration samples"),
    Option("rounds", "--rounds", "Rounds"),
    Option("image_size", "--image-size", "Image size"),
    Option("channels", "--channels", "Channels"),
    Option("layout", "--layout", "Layout"),
    Option("queue_depth", "--queue-depth", "Queue depth"),
    # how a study measures
    Option("search", "--search", "How to search"),
    Option("budget", "--budget", "Budget"),
    Option("ci", "--ci", "Interval target"),
    Option("max_rounds", "--max-rounds", "Extra-round budget"),
    Option("max_time_s", "--max-time", "Measuring time"),
    Option("timeout_s", "--timeout", "Worker timeout"),
    Option("remeasure_busy", "--remeasure-busy", "Re-measure busy points"),
    Option("time_budget", "--time", "Time budget"),
    # reading results
    Option("at_seq_len", "--seq-len", "Sequence length"),
    Option("seq_mix", "--seq-mix", "Sequence-length mix"),
    Option("target_rate", "--target-rate", "Target (requests/s)"),
    Option("max_p99_ms", "--max-p99-ms", "Planned p99 limit (ms)"),
    Option("p99_ms", "--p99-ms", "p99 target (ms)"),
    Option("machine_cores", "--machine-cores", "Machine cores"),
    Option("iterations", "--iterations", "Layer profile iterations"),
    Option("precision_layers", "--layers", "Layers tab"),
    Option("run", "--run", "Run"),
    # where things are
    Option("db", "--db", "Database"),
    Option("study", "--study", "Study name"),
    Option("model", "--model", "Model path"),
    Option("out", "--out", "Output file"),
    Option("serving_name", "--name", "Model name"),
    Option("tritonserver", "--tritonserver", "Tritonserver path"),
    Option("port", "--port", "Port"),
    # fleets
    Option("cluster", "--cluster", "Cluster"),
    Option("hosts", "--hosts", "Hosts"),
    Option("ship_model", "--ship-model", "Ship the model to each host"),
)

_BY_FIELD = {o.field: o for o in OPTIONS}


def option(field: str) -> Option | None:
    """The declaration of a setting outside the axes table, or None."""
    return _BY_FIELD.get(field)
