"""`wb tune`: from a model file to a confirmed, exported recommendation within a time budget.

1. Search: the smart search over precision x batch x threads x streams, one round per configuration.
2. Leaders: extra interleaved rounds only for the leading configurations (and the runtime's own
   THROUGHPUT-hint configuration at their batch sizes, always a candidate), until their intervals
   separate or fall within +-3% (the `--ci` machinery).
3. Recommend (ties settled by those rounds; accuracy measured when data is at hand).
4. Confirm against the runtime's real defaults, with both ratios: what the variant buys and what
   tuning buys.
5. Export the recommendation as YAML, and say the answer in words.

Every phase is given a share of the budget; a phase that would overrun is cut short (the search is
cancelled at its share) and the answer says what was left out.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Callable
from pathlib import Path

from wb_core.backends.registry import get, ir_backend
from wb_core.config import MeasureSettings, RunConfig, SweepSpec, available_cpus
from wb_core.errors import ConfigError, Sentence, joined, setting

WORKER_START_S = 1.5  # an OpenVINO worker's start, model load and compile, on a small model
TF_START_S = 5.0  # a TensorFlow worker's import
SEARCH_SHARE = 0.35  # of the budget; the confirmation's time is kept back, the leaders get the rest
DEFAULT_SEQ_LEN = 128  # a text model's length when none is given
CONFIRM_CONFIGS = 6  # pick, runner-up, three OpenVINO defaults, the pick's variant under the hint
CONFIRM_OVERRUN = 0.1  # of the budget: how far the confirmation may run past it


@dataclasses.dataclass
class TuneResult:
    """What `tune` found: the answer in words, the recommendation, its confirmation and the export."""

    study: str
    answer: str
    recommended: dict | None = None
    recommendation: object = None  # wb_core.analysis.recommend.Recommendation
    confirmation: dict | None = None
    export_path: str | None = None
    elapsed_s: float = 0.0
    budget_s: float = 0.0
    notes: list[str] = dataclasses.field(default_factory=list)


def parse_time(text) -> float:
    """Seconds from `180`, `180s`, `3m`, `2m30s` or `1h`; one sentence for anything else."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = str(text).strip().lower()
        m = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?", s)
        if not s or not m or not any(m.groups()):
            raise ConfigError(f"The time budget '{text}' is not a duration; give seconds or minutes, like 180, 90s "
                              f"or 3m.")
        h, mi, sec = (float(g) if g else 0.0 for g in m.groups())
        value = h * 3600 + mi * 60 + sec
    if not value > 0 or value > 7 * 24 * 3600:
        raise ConfigError(f"The time budget must be more than 0 seconds and at most a week; got {text!r}.")
    return value


def round_cost(settings: MeasureSettings, fmt: str) -> float:
    """Seconds one round of one configuration takes: the worker's start, warm-up and measuring window."""
    return WORKER_START_S + settings.warmup_s + settings.max_time_s


def confirm_cost(cost: float, fmt: str, rounds: int = 2) -> float:
    """Seconds a confirmation takes: its configurations in `rounds` rounds (TensorFlow's default too)."""
    tf = fmt in ("savedmodel", "keras")
    return rounds * ((CONFIRM_CONFIGS + tf) * cost + (TF_START_S if tf else 0.0))


def confirm_fits(left: float, needed: float, budget: float) -> bool:
    """Whether the confirmation (about `needed` s) runs with `left` s of the budget left. It may run
    past the budget by up to CONFIRM_OVERRUN of it: an answer left unconfirmed for want of a few
    seconds throws away what the search found, and `needed` is an estimate with an error of its own."""
    return left + CONFIRM_OVERRUN * budget >= needed


def _ladder(n: int) -> list[int]:
    out, k = [], 1
    while k < n:
        out.append(k)
        k *= 2
    return out + [n]


def tuning_space(fmt: str, hw, has_data: bool, batch_sizes=None) -> tuple[SweepSpec, list[str]]:
    """The configurations worth searching on this machine, and what was left out and why."""
    from wb_core.sweep.context import infeasible_reason

    notes = []
    precisions = ["fp32"]
    if infeasible_reason(RunConfig(ir_backend(), precision="bf16"), fmt, hw) is None:
        precisions.append("bf16")
    else:
        notes.append("BF16 left out: this CPU has no native BF16.")
    if has_data:
        precisions.append("int8")
    else:
        notes.append(Sentence(f"INT8 left out: quantizing needs calibration data ({setting('data', 'Data')}, or "
                              f"{setting('text', 'Text file')} with {setting('tokenizer', 'Tokenizer')})."))
    n = len(available_cpus())
    spec = SweepSpec(backends=ir_backend(), precisions=",".join(precisions),
                     batch_sizes=batch_sizes or "1,4,8,16", threads=",".join(map(str, _ladder(n))),
                     streams=",".join(map(str, _ladder(min(n, 4)))))
    return spec, notes


def tune(model, *, time_budget="3m", db=None, study: str | None = None, data=None, text=None, tokenizer=None,
         dynamic_size: int | None = None, batch_sizes=None, settings: MeasureSettings | None = None,
         export_dir=None, on_progress: Callable[[str], None] | None = None, calib_size: int = 300,
         progress: bool = False) -> TuneResult:
    """See `wb_core.api.tune`."""
    from wb_core import hardware
    from wb_core.analysis.recommend import recommend, run_label, with_efficiency
    from wb_core.config import InputOptions
    from wb_core.demo import resolve_model
    from wb_core.demo_catalog import default_study_name, demo_dir, demo_name_of, demo_sample_text
    from wb_core.models import detect_format
    from wb_core.paths import default_db
    from wb_core.store import Store, load_results
    from wb_core.sweep.local import run_sweep
    from wb_core.sweep.search import run_search
    from wb_core.variants.description import describe_model
    from wb_core.variants.planner import PrecisionOptions

    t0 = time.monotonic()
    budget = parse_time(time_budget)
    path = resolve_model(model)
    study = study or f"{default_study_name(path)}-tune"
    export_dir = export_dir or _export_folder(study)  # a study name that becomes a folder, checked before any work
    fmt = detect_format(path)
    settings = settings or MeasureSettings()
    cost = round_cost(settings, fmt)
    if budget < cost:
        raise ConfigError(f"A time budget of {budget:g} s is too small for one round of one configuration (about "
                          f"{cost:.0f} s each here); give at least {cost:.0f} s ({setting('time_budget', 'Time budget')}), "
                          f"e.g. 3m.")
    say = on_progress or (lambda _msg: None)
    described = describe_model(path)  # read once: every sweep below measures this description
    db = db or default_db()
    demo = demo_name_of(path)
    if text is None and tokenizer is None and data is None and demo:
        own = demo_sample_text(demo)
        if own:
            text, tokenizer = own
    has_data = data is not None or text is not None or bool(demo and (demo_dir(demo) / "data.npz").exists())
    hw = hardware.detect()
    spec, notes = tuning_space(fmt, hw, has_data, batch_sizes)
    if text is not None and dynamic_size is None and _dynamic_length(described):
        dynamic_size = DEFAULT_SEQ_LEN
        notes.append(Sentence(f"Sequence length {DEFAULT_SEQ_LEN} (text is padded or truncated to it): give your "
                              f"workload's length ({setting('seq_lens', 'Sequence length')})."))
    inputs = InputOptions(dynamic_size=dynamic_size, text=None if text is None else str(text),
                          tokenizer=None if tokenizer is None else str(tokenizer))
    prec = PrecisionOptions(data=data, subset_size=calib_size)
    left = lambda: budget - (time.monotonic() - t0)  # noqa: E731 - read at each phase

    # 1. Search, one round per configuration, cancelled at its share of the budget.
    n_search = max(1, int(budget * SEARCH_SHARE / cost))
    say(f"Searching up to {n_search} of {len(spec.expand())} configurations, one round each "
        f"({budget * SEARCH_SHARE:.0f} s of the {budget:.0f} s budget).")
    points: list[float] = []  # when each point arrived
    # Preparing the variants (conversion, quantization) comes first: the search stops at its share
    # of the budget, but never before one configuration is measured.
    stop = Deadline(time.monotonic() + budget * SEARCH_SHARE, lambda: bool(points))
    summary = run_search(described, spec, db, study, search="smart", budget=n_search, settings=settings, inputs=inputs,
                         precision=prec, cancel=stop, progress=progress,
                         on_point=lambda _p: points.append(time.monotonic()))
    notes += [n for n in summary.notes if n not in notes]
    df = load_results(db, study)
    ok = df[df["status"] == "ok"] if not df.empty else df
    if ok.empty:
        answer = (f"No configuration of {path.name} ran successfully in {time.monotonic() - t0:.0f} s; "
                  f"the results of study '{study}' say why.")
        return TuneResult(study=study, answer=answer, elapsed_s=time.monotonic() - t0, budget_s=budget, notes=notes)
    # What a round really costs on this machine now, from the time between points (preparing the
    # variants came before the first): a busy machine takes longer than the estimate, and a point
    # that settles early takes far less than its time limit, which the estimate assumes.
    if len(points) > 1:
        cost = (points[-1] - points[0]) / (len(points) - 1)
    say(f"Searched {len(ok)} configuration(s); the best so far: {run_label(ok.loc[ok['throughput'].idxmax()])} "
        f"({ok['throughput'].max():,.0f} samples/s).")

    # 2. The runtime's own THROUGHPUT hint (untouched) at the leaders' batch sizes is always a
    # candidate: measured once like the searched ones, then in rounds beside the leaders.
    needed = confirm_cost(cost, fmt)
    with Store(db, readonly=True) as store:
        top = [store.run_config(study, k) for k in _leaders(ok, 2)]
    runtime = ir_backend()
    hints = [RunConfig(runtime, batch_size=b, **get(runtime).variant_default, seq_len=n or None)
             for b, n in sorted({(c.batch_size, c.seq_len or 0) for c in top})]
    run_sweep(described, SweepSpec(), db, study, settings=settings, inputs=inputs, precision=prec, configs=hints,
              progress=progress)
    ok = load_results(db, study).query("status == 'ok'")
    leaders = _leaders(ok, 2)
    with Store(db, readonly=True) as store:
        configs = [store.run_config(study, k) for k in leaders]
    configs += [h for h in hints if h.key not in leaders]
    rounds_time = left() - needed
    per_round = len(configs) * cost
    if rounds_time >= 2 * per_round:  # the --ci machinery starts from 3 rounds: 2 more than the search's
        extra = max(1, int(rounds_time / per_round) - 2)
        say(f"Measuring the {len(leaders)} leader(s) and the THROUGHPUT hint in rounds until they separate or "
            f"fall within +-3% (at most {2 + extra} more rounds).")
        s2 = run_sweep(described, SweepSpec(repeats=3), db, study, settings=settings, inputs=inputs, precision=prec,
                       configs=configs, ci_target=0.03, max_rounds=max(1, extra),
                       cancel=Deadline(time.monotonic() + rounds_time), progress=progress)
        notes += [n for n in s2.notes if n not in notes]
    else:
        notes.append("No time left for extra rounds on the leaders: the recommendation rests on one round each.")

    # 3. Recommend.
    with Store(db, readonly=True) as store:
        info = store.get_study(study)
        df = store.to_frame(study)
    rec = recommend(with_efficiency(df, info.get("hardware")), hardware=info.get("hardware"), runners_up=3)
    say(f"Recommended: {run_label(rec.best)}.")

    # 4. Confirm against the real defaults.
    conf = None
    rounds = max(2, min(5, int(2 * left() / needed)))
    if confirm_fits(left(), needed, budget):
        from wb_core.analysis.confirm import confirm_study

        say(f"Confirming against the runtime's defaults in {rounds} interleaved rounds.")
        conf = confirm_study(study, db, rounds=rounds, settings=settings, progress=progress,
                             allow_unmeasured_accuracy=False)
    else:
        notes.append(f"No time left to confirm against the runtime's defaults ({left():.0f} s left, "
                     f"about {needed:.0f} s needed): confirm study '{study}' when there is time.")

    # 5. Export and answer.
    final = conf["recommended"] if conf and conf.get("recommended") is not None else rec.best
    final_study = conf["study"] if conf and conf.get("recommended") is not None else study
    export_path = _export_yaml(db, final_study, final["key"], export_dir)
    answer = _answer(path, final, rec, conf, export_path, time.monotonic() - t0, budget)
    say(answer)
    return TuneResult(study=study, answer=answer, recommended=final, recommendation=rec, confirmation=conf,
                      export_path=str(export_path) if export_path else None, elapsed_s=time.monotonic() - t0,
                      budget_s=budget, notes=notes)


def _dynamic_length(description) -> bool:
    """The model's token-ids input has a dynamic sequence dimension."""
    return any(description.text_roles.get(s.name) == "ids" and len(s.shape) == 2 and
               (s.shape[1] is None or s.shape[1] < 1) for s in description.inputs)


class Deadline:
    """A cancel flag (what sweeps poll with `is_set()`) that turns on at a time, once `ready()` holds."""

    def __init__(self, at: float, ready: Callable[[], bool] = lambda: True):
        self.at, self.ready = at, ready

    def is_set(self) -> bool:
        return time.monotonic() >= self.at and self.ready()

    def set(self) -> None:
        self.at = -math.inf


def _leaders(ok, k: int) -> list[str]:
    """Keys of the `k` runs of highest throughput."""
    return list(ok.sort_values("throughput", ascending=False)["key"].head(k))


def _export_folder(study: str) -> Path:
    """The default export folder, STUDY-deploy in the working folder: one folder name, checked before any work."""
    from wb_core.paths import check_path_component

    return Path(check_path_component(study, setting("study", "The study name"), folder=f"{study}-deploy",
                                     instead=f"choose another, or give the folder ({setting('out', 'Export folder')})"))


def _export_yaml(db, study: str, key: str, out) -> Path | None:
    from wb_core.export import deployment_for_study, export

    dep = deployment_for_study(db, study, run_key=key)
    res = export(dep, "yaml", out)
    files = [Path(out) / f for r in res.values() for f in r.files]
    return files[0] if files else Path(out)


def _interval(run: dict) -> str:
    lo, hi = run.get("throughput_ci_low"), run.get("throughput_ci_high")
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo == lo and hi == hi:
        return f" (95% CI {max(lo, 0):,.0f} to {hi:,.0f})"
    return " (one round: no interval)"


def _answer(path, final: dict, rec, conf, export_path, elapsed: float, budget: float) -> str:
    from wb_core.analysis.recommend import run_label

    text = (f"For {path.name} on this CPU, run {run_label(final)}: {final['throughput']:,.0f} samples/s"
            f"{_interval(final)}, p99 {final['latency_ms_p99']:.3g} ms.")
    if conf:
        text += " " + conf["verdict"]
    else:
        text = joined([text, rec.reason])
    if export_path:
        text = joined([text, f"The deployment settings are in {export_path}."])
    over = (f" (the confirmation ran {elapsed - budget:.0f} s past it, within the {CONFIRM_OVERRUN:.0%} it may "
            f"take rather than leave the answer unconfirmed)") if elapsed > budget + 0.5 else ""
    return joined([text, f"Tuning took {elapsed:.0f} s of the {budget:.0f} s budget{over}."])
