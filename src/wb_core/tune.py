"""`wb tune`: from a model file to a confirmed, exported recommendation within a time budget.

The plan (`plan_variants`, `plan_time`) looks where the gain usually is first:

1. Variants: every precision the CPU and the data allow (INT8 with its accuracy guard when there is
   calibration data, BF16 where the CPU runs it natively, FP32), each under the runtime's
   THROUGHPUT hint at two batch sizes (`probe_configs`). Preparing them settles the guard before
   any finer setting is measured.
2. Search: the smart search over threads x streams x batch around the best variant that passed.
3. Leaders: the leading configurations (and the runtime's own THROUGHPUT-hint configuration at
   their batch sizes, always a candidate) side by side in one worker until the stopping rule
   separates them or finds them equivalent within +-3%; where they cannot share a worker, extra
   interleaved rounds (the `--ci` machinery), the busy ones measured again once.
4. Recommend (ties settled by those rounds; accuracy measured when data is at hand).
5. Confirm against the runtime's real defaults, with both ratios: what the variant buys and what
   tuning buys, side by side in one worker (until the stopping rule decides every ratio against
   +-3%, each interval within +-2%, or the time kept is spent); a default that cannot share that
   worker (TensorFlow's) is left out for time, and named. Its share of the budget is kept from the
   start; when the full confirmation does not fit it, a smaller one (fewer configurations, less
   time) runs instead.
6. Export the recommendation as YAML, and say the answer in words, naming every variant that was
   not measured and why.
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
from wb_core.precisions import from_data, narrowest_first

WORKER_START_S = 1.5  # an OpenVINO worker's start, model load and compile, on a small model
DEFAULT_SEQ_LEN = 128  # a text model's length when none is given
CONFIRM_SHARE = 0.4  # of the budget, kept for the confirmation from the start
SEARCH_SHARE = 0.6  # of the rest: the variants and the search; the leaders' rounds get the remainder
CONFIRM_CONFIGS = 6  # pick, runner-up, three OpenVINO defaults, the pick's variant under the hint
MIN_CONFIRM_CONFIGS = 3  # pick, the THROUGHPUT-hint default, the pick's variant under the hint
MAX_CONFIRM_ROUNDS = 5
LOAD_S = 1.0  # one configuration's load, compile and warm-up in the side-by-side worker
PAIRED_ROUND_S = 8.0  # side-by-side measuring a confirmation plans for each round it is given
CONFIRM_OVERRUN = 0.1  # of the budget: how far the confirmation may run past it
PROBE_HINT = "throughput"


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
    variants: dict = dataclasses.field(default_factory=dict)  # precision -> what became of it (`variant_outcomes`)
    plan: TimePlan | None = None  # how the budget was split


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


def confirm_cost(cost: float, fmt: str, rounds: int = 2, configs: int = CONFIRM_CONFIGS) -> float:
    """Seconds a confirmation takes: one worker loading `configs` configurations side by side
    (LOAD_S each) and measuring them for `rounds` x PAIRED_ROUND_S (the stopping rule often ends it
    sooner). A default that cannot share the pick's worker (TensorFlow's, for a TensorFlow model) is
    left out of tune's confirmation for time: fresh rounds of it would cost more than the rest, and
    give a far wider interval."""
    return WORKER_START_S + configs * LOAD_S + rounds * PAIRED_ROUND_S


def paired_confirm_time(left: float) -> float:
    """Seconds the confirmation's side-by-side worker may take, its loads included: what is left, less
    the worker's start (the stopping rule usually ends it sooner)."""
    return max(3.0, left - WORKER_START_S)


def confirm_fits(left: float, needed: float, budget: float) -> bool:
    """Whether the confirmation (about `needed` s) runs with `left` s of the budget left. It may run
    past the budget by up to CONFIRM_OVERRUN of it: an answer left unconfirmed for want of a few
    seconds throws away what the search found, and `needed` is an estimate with an error of its own."""
    return left + CONFIRM_OVERRUN * budget >= needed


def plan_confirmation(seconds: float, cost: float, fmt: str,
                      max_rounds: int = MAX_CONFIRM_ROUNDS) -> tuple[int, int] | None:
    """The largest confirmation that fits in `seconds`, as (configurations, rounds): every
    configuration when two rounds of them fit, else fewer (the runner-up, then the defaults the
    objective does not favour are left out, down to MIN_CONFIRM_CONFIGS); then as many rounds as fit,
    up to `max_rounds`. None when not even the smallest fits."""
    for configs in range(CONFIRM_CONFIGS, MIN_CONFIRM_CONFIGS - 1, -1):
        if confirm_cost(cost, fmt, 2, configs) <= seconds:
            rounds = 2
            while rounds < max_rounds and confirm_cost(cost, fmt, rounds + 1, configs) <= seconds:
                rounds += 1
            return configs, rounds
    return None


@dataclasses.dataclass(frozen=True)
class TimePlan:
    """How a budget is split, in seconds from the start: the variants and the search end at
    `search_until`, the leaders' rounds at `leaders_until`, and `confirm_s` is kept for the
    confirmation of `confirm_configs` configurations in `confirm_rounds` rounds (None: none fits)."""

    budget: float
    cost: float
    search_until: float
    leaders_until: float
    confirm_s: float
    confirm_configs: int | None
    confirm_rounds: int | None


def plan_time(budget: float, cost: float, fmt: str) -> TimePlan:
    """The budget's split, planned before anything runs: CONFIRM_SHARE of it is kept for the
    confirmation (the largest that fits there, see `plan_confirmation`; when not even the smallest
    fits its share, what the smallest needs, as long as half the budget is left for the rest);
    of the rest, SEARCH_SHARE goes to the variants and the search, the remainder to the leaders."""
    confirm_s = CONFIRM_SHARE * budget
    fit = plan_confirmation(confirm_s, cost, fmt)
    if fit is None:
        smallest = confirm_cost(cost, fmt, 2, MIN_CONFIRM_CONFIGS)
        fit, confirm_s = ((MIN_CONFIRM_CONFIGS, 2), smallest) if smallest <= budget / 2 else (None, 0.0)
    rest = budget - confirm_s
    return TimePlan(budget=budget, cost=cost, search_until=SEARCH_SHARE * rest, leaders_until=rest,
                    confirm_s=confirm_s, confirm_configs=fit[0] if fit else None,
                    confirm_rounds=fit[1] if fit else None)


def _ladder(n: int) -> list[int]:
    out, k = [], 1
    while k < n:
        out.append(k)
        k *= 2
    return out + [n]


def plan_variants(fmt: str, hw, has_data: bool) -> tuple[list[str], dict[str, str]]:
    """The precision variants measured first, narrowest first (`precisions.narrowest_first`): those this CPU runs natively (read
    from `hw`, a `wb_core.hardware.Hardware`) and, for INT8, only with calibration data; and each
    one left out, with why."""
    from wb_core.sweep.context import infeasible_reason

    planned, left_out = [], {}
    for precision in narrowest_first():
        if precision in from_data() and not has_data:
            left_out[precision] = Sentence(
                # No parentheses: the answer's list of variants not reached puts this one in its own.
                f"quantizing needs calibration data, from {setting('data', 'Data')} or {setting('text', 'Text file')} "
                f"with {setting('tokenizer', 'Tokenizer')}")
            continue
        why = infeasible_reason(RunConfig(ir_backend(), precision=precision), fmt, hw)
        if why:
            left_out[precision] = why.split(": ", 1)[-1]  # "bf16 skipped: this CPU has ..." -> the reason
        else:
            planned.append(precision)
    return planned, left_out


def probe_batches(batch_sizes: list[int]) -> list[int]:
    """The two batch sizes each variant is first measured at: the smallest of the ladder and its
    middle rung (1 and 8 of 1,4,8,16)."""
    ladder = sorted(set(batch_sizes))
    return sorted({ladder[0], ladder[len(ladder) // 2]})


def probe_configs(precisions: list[str], batch_sizes: list[int], n_cpus: int) -> list[RunConfig]:
    """Each variant under the runtime's THROUGHPUT hint, its precision set (so that FP32 is FP32 on a
    BF16 CPU too), with as many requests in flight as there are CPUs (the hint's streams uncapped),
    at the two batch sizes of `probe_batches`."""
    return [RunConfig(ir_backend(), precision=p, batch_size=b, hint=PROBE_HINT, concurrency=max(1, n_cpus))
            for p in precisions for b in probe_batches(batch_sizes)]


def search_space(precision: str, batch_sizes: list[int], n_cpus: int) -> SweepSpec:
    """Threads x streams x batch around one variant."""
    return SweepSpec(backends=ir_backend(), precisions=precision, batch_sizes=",".join(map(str, batch_sizes)),
                     threads=",".join(map(str, _ladder(n_cpus))), streams=",".join(map(str, _ladder(min(n_cpus, 4)))))


def tuning_space(fmt: str, hw, has_data: bool, batch_sizes=None) -> tuple[SweepSpec, list[str]]:
    """Every configuration worth measuring on this machine (all variants x batch x threads x streams),
    and what was left out and why."""
    planned, left_out = plan_variants(fmt, hw, has_data)
    batches = _batch_list(batch_sizes)
    spec = search_space(",".join(planned), batches, len(available_cpus()))
    return spec, [Sentence(f"{p.upper()} left out: {why}.") for p, why in left_out.items()]


def _batch_list(batch_sizes) -> list[int]:
    if batch_sizes is None:
        return [1, 4, 8, 16]
    if isinstance(batch_sizes, str):
        return [int(b) for b in batch_sizes.replace(" ", "").split(",") if b]
    return [int(b) for b in batch_sizes]


def variant_outcomes(df, planned: list[str], left_out: dict[str, str]) -> dict[str, dict]:
    """What became of each variant after it was first measured, by precision: `state` one of
    measured, guard failed, failed, skipped, out of time, not planned; `why` in words; `best` its
    fastest probe row (ok and not failed by the guard)."""
    from wb_core.variants.guard import FAILED

    out: dict[str, dict] = {}
    for precision in narrowest_first():
        if precision in left_out:
            out[precision] = {"state": "not planned", "why": left_out[precision], "best": None}
            continue
        if precision not in planned:
            continue
        rows = df[(df["precision"] == precision) & (df["hint"] == PROBE_HINT)] if not df.empty else df
        if "untouched" in rows.columns:
            rows = rows[rows["untouched"] != True]  # noqa: E712 - the probes set their precision
        ok = rows[rows["status"] == "ok"] if not rows.empty else rows
        guard = ok["accuracy_guard"].astype(str) if "accuracy_guard" in ok.columns else None
        passing = ok[guard != FAILED] if guard is not None else ok
        if not passing.empty:
            best = passing.loc[passing["throughput"].astype(float).idxmax()].to_dict()
            out[precision] = {"state": "measured", "why": "", "best": best}
        elif not ok.empty:
            note = next((str(v) for v in ok.get("accuracy_guard_note", []) if isinstance(v, str) and v),
                        "its accuracy drop is over the guard's limit")
            out[precision] = {"state": "guard failed", "why": note.rstrip("."), "best": None}
        elif not rows.empty and (rows["status"] == "failed").any():
            err = next((str(v) for v in rows.get("error", []) if isinstance(v, str) and v), "its runs failed")
            out[precision] = {"state": "failed", "why": err.rstrip("."), "best": None}
        elif not rows.empty and (rows["status"] == "skipped").any():
            err = next((str(v) for v in rows.get("error", []) if isinstance(v, str) and v), "it cannot run here")
            out[precision] = {"state": "skipped", "why": err.rstrip("."), "best": None}
        else:
            out[precision] = {"state": "out of time", "why": "the variants' share of the budget ran out first",
                              "best": None}
    return out


def variants_sentence(outcomes: dict[str, dict]) -> Sentence:
    """The variants measured first and their figures, and each one not reached, with why."""
    def why(o) -> str:
        return str(getattr(o["why"], "template", o["why"]))

    measured = []
    for p, o in outcomes.items():
        if o["state"] == "measured":
            guard = o["best"].get("accuracy_guard")
            guard = f", accuracy guard {guard}" if isinstance(guard, str) and guard not in ("", "nan") else ""
            measured.append(f"{p.upper()} {o['best']['throughput']:,.0f} samples/s (batch "
                            f"{int(o['best']['batch_size'])}{guard})")
    missed = [f"{p.upper()} ({why(o)})" if o["state"] == "not planned" else f"{p.upper()} ({o['state']}: {why(o)})"
              for p, o in outcomes.items() if o["state"] != "measured"]
    parts = []
    if measured:
        parts.append(f"Variants under the {PROBE_HINT.upper()} hint: {', '.join(measured)}.")
    if missed:
        parts.append(f"Not reached: {'; '.join(missed)}.")
    return Sentence(" ".join(parts))


def best_variant(outcomes: dict[str, dict]) -> dict | None:
    """The fastest probe row of the variants that passed (the search goes on around it)."""
    rows = [o["best"] for o in outcomes.values() if o["state"] == "measured"]
    return max(rows, key=lambda r: float(r["throughput"])) if rows else None


def tune(model, *, time_budget="3m", db=None, study: str | None = None, data=None, text=None, tokenizer=None,
         dynamic_size: int | None = None, batch_sizes=None, settings: MeasureSettings | None = None,
         export_dir=None, on_progress: Callable[[str], None] | None = None, calib_size: int = 300,
         progress: bool = False, cancel=None) -> TuneResult:
    """See `wb_core.api.tune`."""
    from wb_core import hardware
    from wb_core.analysis.precision_loss import study_loss_notes
    from wb_core.analysis.recommend import recommend, with_efficiency
    from wb_core.analysis.words import plural, run_name
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
    from wb_core.variants.recipes import DEFAULT_BUDGET_S

    t0 = time.monotonic()
    budget = parse_time(time_budget)
    path = resolve_model(model)
    study = study or f"{default_study_name(path)}-tune"
    given = export_dir
    export_dir = check_outputs(path, db, study, export_dir)  # before anything runs: the export comes last
    if given is None:
        export_dir = _export_folder(study)  # a study name that becomes a folder: one safe folder name
    fmt = detect_format(path)
    settings = settings or MeasureSettings()
    cost = round_cost(settings, fmt)
    if budget < cost:
        raise ConfigError(f"A time budget of {budget:g} s is too small for one round of one configuration (about "
                          f"{cost:.0f} s each here); give at least {cost:.0f} s ({setting('time_budget', 'Time budget')}), "
                          f"e.g. 3m.")
    batches = _batch_list(batch_sizes)
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
    n_cpus = len(available_cpus())
    planned, left_out = plan_variants(fmt, hw, has_data)
    notes: list = []
    if text is not None and dynamic_size is None and _dynamic_length(described):
        dynamic_size = DEFAULT_SEQ_LEN
        notes.append(Sentence(f"Sequence length {DEFAULT_SEQ_LEN} (text is padded or truncated to it): give your "
                              f"workload's length ({setting('seq_lens', 'Sequence length')})."))
    inputs = InputOptions(dynamic_size=dynamic_size, text=None if text is None else str(text),
                          tokenizer=None if tokenizer is None else str(tokenizer))
    plan = plan_time(budget, cost, fmt)
    # INT8's fallback recipes (accuracy control) may take no more than the variants' share: the
    # guard is settled within the budget, and a variant that cannot pass in it is said not reached.
    prec = PrecisionOptions(data=data, subset_size=calib_size,
                            fallback_budget_s=min(DEFAULT_BUDGET_S, max(30.0, plan.search_until / 2)))
    left = lambda: budget - (time.monotonic() - t0)  # noqa: E731 - read at each phase
    points: list[float] = []  # when each point arrived
    cancelled = lambda: cancel is not None and cancel.is_set()  # noqa: E731 - read at each phase

    def on_point(_p):
        points.append(time.monotonic())

    def measured_cost() -> float:
        # What a round really costs on this machine now, from the time between points (preparing
        # the variants came before the first): a busy machine takes longer than the estimate, and
        # a point that settles early takes far less than its time limit, which the estimate assumes.
        # Points a worker measured together arrive together: no span is no measure (and no zero cost).
        span = points[-1] - points[0] if len(points) > 1 else 0.0
        return span / (len(points) - 1) if span > 0 else cost

    # 1. The variants first, each under the THROUGHPUT hint at two batch sizes: preparing them
    # (conversion, quantization, the accuracy guard) comes first, so the guard is settled before
    # any finer setting is measured. Cut at the search's share, never before one point is measured.
    probes = probe_configs(planned, batches, n_cpus)
    say(f"Measuring the variants first ({', '.join(p.upper() for p in planned)}) under the {PROBE_HINT.upper()} hint "
        f"at batch {' and '.join(map(str, probe_batches(batches)))}: {len(probes)} configurations; "
        f"{plan.confirm_s:.0f} s of the {budget:.0f} s budget are kept for the confirmation.")
    s1 = run_sweep(described, SweepSpec(), db, study, settings=settings, inputs=inputs, precision=prec, configs=probes,
                   cancel=Deadline(t0 + plan.search_until, lambda: bool(points), cancel=cancel), on_point=on_point,
                   progress=progress)
    notes += [n for n in s1.notes if n not in notes]
    df = load_results(db, study)
    outcomes = variant_outcomes(df, planned, left_out)
    best = best_variant(outcomes)
    say(variants_sentence(outcomes))

    # 2. Threads, streams and batch around the best variant that passed, one round each.
    if best is not None and not cancelled():
        spec = search_space(str(best["precision"]), batches, n_cpus)
        window = plan.search_until - (time.monotonic() - t0)
        n_search = min(int(window / measured_cost()), len(spec.expand()))
        if n_search >= 1:
            say(f"Searching threads, streams and batch of {str(best['precision']).upper()}: up to {n_search} of "
                f"{len(spec.expand())} configurations, one round each ({window:.0f} s).")
            summary = run_search(described, spec, db, study, search="smart", budget=n_search, settings=settings,
                                 inputs=inputs, precision=prec, cancel=Deadline(t0 + plan.search_until, cancel=cancel),
                                 progress=progress, on_point=on_point)
            notes += [n for n in summary.notes if n not in notes]
        else:
            notes.append(f"No time left to search threads, streams and batch of {str(best['precision']).upper()}: "
                         f"the variants took the search's share of the budget.")
    df = load_results(db, study)
    ok = df[df["status"] == "ok"] if not df.empty else df
    if ok.empty:
        answer = joined([f"No configuration of {path.name} ran successfully in {time.monotonic() - t0:.0f} s; "
                         f"the results of study '{study}' say why." if not cancelled() else
                         f"Cancelled after {time.monotonic() - t0:.0f} s, before any configuration of {path.name} was "
                         f"measured; nothing to recommend yet.", variants_sentence(outcomes)])
        return TuneResult(study=study, answer=answer, elapsed_s=time.monotonic() - t0, budget_s=budget, notes=notes,
                          variants=outcomes, plan=plan)
    cost = measured_cost()
    passing = _passing(ok)
    if not passing.empty:
        say(f"Measured {plural(len(ok), 'configuration')}; the best so far that passes the accuracy guard: "
            f"{run_name(passing.loc[passing['throughput'].idxmax()])} ({passing['throughput'].max():,.0f} samples/s).")

    # 3. The runtime's own THROUGHPUT hint (untouched) at the leaders' batch sizes is always a
    # candidate: measured once like the searched ones, then in rounds beside the leaders.
    with Store(db, readonly=True) as store:
        top = [store.run_config(study, k) for k in _leaders(ok, 2)]
    runtime = ir_backend()
    hints = [RunConfig(runtime, batch_size=b, **get(runtime).variant_default, seq_len=n or None)
             for b, n in sorted({(c.batch_size, c.seq_len or 0) for c in top})]
    if not cancelled():
        run_sweep(described, SweepSpec(), db, study, settings=settings, inputs=inputs, precision=prec, configs=hints,
                  progress=progress, cancel=cancel)
    ok = load_results(db, study).query("status == 'ok'")
    leaders = _leaders(ok, 2)
    with Store(db, readonly=True) as store:
        configs = [store.run_config(study, k) for k in leaders]
    configs += [h for h in hints if h.key not in leaders]
    rounds_time = plan.leaders_until - (time.monotonic() - t0)
    per_round = len(configs) * cost
    side_by_side = False
    if cancelled():
        pass
    elif len(configs) >= 2 and rounds_time >= 2 * cost and shares_one_worker(configs):
        notes += _leaders_side_by_side(described, db, study, configs, rounds_time, settings, inputs, prec, progress,
                                       cancel, say)
        side_by_side = not notes[-1].startswith("The leaders were not measured side by side")
    elif per_round > 0 and rounds_time >= 2 * per_round:  # no leaders, no rounds; --ci starts from 3 rounds
        extra = max(1, int(rounds_time / per_round) - 2)
        say(f"Measuring the {plural(len(leaders), 'leader')} and the THROUGHPUT hint in rounds until they separate or "
            f"fall within +-3% (at most {2 + extra} more rounds).")
        s2 = run_sweep(described, SweepSpec(repeats=3), db, study, settings=settings, inputs=inputs, precision=prec,
                       configs=configs, ci_target=0.03, max_rounds=max(1, extra),
                       cancel=Deadline(time.monotonic() + rounds_time, cancel=cancel), progress=progress)
        notes += [n for n in s2.notes if n not in notes]
    else:
        notes.append("No time left for extra rounds on the leaders: the recommendation rests on one round each.")
    if not side_by_side:  # side by side, busy cycles are left out of the decision, or it says it rests on them
        notes += _remeasure_busy_leaders(described, db, study, configs, plan, t0, cost, settings, inputs, prec,
                                         progress, say)

    # 4. Recommend.
    with Store(db, readonly=True) as store:
        info = store.get_study(study)
        df = store.to_frame(study)
    rec = recommend(with_efficiency(df, info.get("hardware")), hardware=info.get("hardware"), runners_up=3)
    say(f"Recommended: {run_name(rec.best)}.")
    # Why a reduced precision lost to FP32, from layer profiles stored with the runs; none are measured
    # here (the budget's rest belongs to the confirmation), so the sentence says how to see why.
    losses = study_loss_notes(db, study, df)

    # 5. Confirm against the real defaults: the largest confirmation that fits what is left (its
    # share was kept from the start), else the smallest when it fits within the overrun allowed.
    conf = None
    fit = plan_confirmation(left(), cost, fmt)
    if fit is None and confirm_fits(left(), confirm_cost(cost, fmt, 2, MIN_CONFIRM_CONFIGS), budget):
        fit = (MIN_CONFIRM_CONFIGS, 2)
    if cancelled():
        notes.append(f"Cancelled after {time.monotonic() - t0:.0f} s: the answer rests on what was measured by "
                     f"then, not confirmed against the runtime's defaults.")
    elif fit is not None:
        from wb_core.analysis.confirm import confirm_study

        n_configs, rounds = fit
        smaller = f", {n_configs} of its {CONFIRM_CONFIGS} configurations" if n_configs < CONFIRM_CONFIGS else ""
        say(f"Confirming against the runtime's defaults{smaller}, side by side in one worker where they can share "
            f"one, in {rounds} interleaved rounds where not (about {confirm_cost(cost, fmt, rounds, n_configs):.0f} s "
            f"of the {left():.0f} s left).")
        retry = _busy_retry_fits(left(), cost, fmt, rounds, n_configs, budget)
        conf = confirm_study(study, db, rounds=rounds, settings=settings, progress=progress,
                             allow_unmeasured_accuracy=False, max_configs=n_configs, remeasure_busy=retry,
                             max_s=paired_confirm_time(left()),
                             until=max(t0 + budget, time.monotonic() + confirm_cost(cost, fmt, 2, MIN_CONFIRM_CONFIGS)),
                             side_by_side_only=True)
        if conf.get("busy") and not retry:
            notes.append(f"The confirmation's busy rounds ({', '.join(conf['busy'])}) were not measured again: no "
                         f"time left in the budget.")
    else:
        needed = confirm_cost(cost, fmt, 2, MIN_CONFIRM_CONFIGS)
        notes.append(f"No time left to confirm against the runtime's defaults ({left():.0f} s left, "
                     f"about {needed:.0f} s needed for the smallest confirmation): confirm study '{study}' when "
                     f"there is time.")

    # 6. Export and answer.
    final = conf["recommended"] if conf and conf.get("recommended") is not None else rec.best
    final_study = conf["study"] if conf and conf.get("recommended") is not None else study
    export_path = _export_yaml(db, final_study, final["key"], export_dir or Path(f"{study}-deploy"),
                               busy_note=_busy_note(final, rec, conf))
    answer = _answer(path, final, rec, conf, export_path, time.monotonic() - t0, budget, outcomes, losses)
    if cancelled():
        answer = joined([answer, notes[-1]])
    say(answer)
    return TuneResult(study=study, answer=answer, recommended=final, recommendation=rec, confirmation=conf,
                      export_path=str(export_path) if export_path else None, elapsed_s=time.monotonic() - t0,
                      budget_s=budget, notes=notes, variants=outcomes, plan=plan)


def shares_one_worker(configs: list[RunConfig]) -> bool:
    """Whether the configurations differ only in what a compiled model or session is given."""
    from wb_core.sweep.paired import worker_conflict

    return all(worker_conflict(configs[0], c) is None for c in configs[1:])


def _leaders_side_by_side(described, db, study, configs, seconds, settings, inputs, prec, progress, cancel,
                          say) -> list[str]:
    """The leaders (and the runtime's THROUGHPUT hint) measured side by side in one worker, each cycle
    stored as a round of each, until the first leader's comparison with every other one is decided
    or the leaders' share of the budget is spent; the notes say what the stopping rule concluded."""
    from wb_core.analysis.words import plural
    from wb_core.sweep.paired import run_paired

    say(f"Measuring the {plural(len(configs), 'leading configuration')} side by side in one worker, in alternating blocks, "
        f"until they separate or fall within +-3% (at most {seconds:.0f} s).")
    out = run_paired(described, db, study, configs, [(0, j) for j in range(1, len(configs))], settings=settings,
                     inputs=inputs, precision=prec, progress=progress, cancel=cancel,
                     max_s=max(2.0, seconds - WORKER_START_S), deadline_s=max(2.0, seconds - WORKER_START_S))
    if out.fallback:
        return [f"The leaders were not measured side by side: {out.fallback}."]
    notes = [str(out.sentence())]
    for (_, j), d in out.decisions.items():
        if d is not None:
            notes.append(d.sentence(f"{configs[j].label()} over {configs[0].label()}"))
    return notes


def _busy_retry_fits(left: float, cost: float, fmt: str, rounds: int, configs: int, budget: float) -> bool:
    """Whether measuring a confirmation's busy rounds again (at most half of its rounds, about) still
    fits after it: the confirmation re-measures them only then, and says so otherwise."""
    return confirm_fits(left, confirm_cost(cost, fmt, rounds, configs) * 1.5, budget)


def _remeasure_busy_leaders(described, db, study, configs, plan, t0, cost, settings, inputs, prec, progress,
                            say) -> list[str]:
    """Measure the leaders' rounds stored as busy once more, before the recommendation rests on them;
    a note when some could not be (no time left) or stayed busy."""
    from wb_core.store import Store
    from wb_core.sweep.local import run_sweep

    keys = {c.key for c in configs}
    with Store(db, readonly=True) as store:
        busy = keys & store.busy_keys(study)
        counts = store.round_counts(study)
    if not busy:
        return []
    names = [c.label() for c in configs if c.key in busy]
    rounds = max(counts.get(k, 1) for k in busy)
    until = t0 + plan.leaders_until + 0.5 * plan.confirm_s  # it may take from the confirmation's slack
    if time.monotonic() + cost * len(busy) > until:
        return [f"Leader(s) measured on a busy machine, {', '.join(names)}: no time left to measure them again; "
                f"the recommendation says so."]
    say(f"Measuring again, once, the leader(s) measured on a busy machine: {', '.join(names)}.")
    run_sweep(described, SweepSpec(repeats=rounds), db, study, settings=settings, inputs=inputs, precision=prec,
              configs=[c for c in configs if c.key in busy], remeasure_busy=True, progress=progress,
              cancel=Deadline(until))
    with Store(db, readonly=True) as store:
        still = busy & store.busy_keys(study)
    if still:
        return [f"Leader(s) still measured on a busy machine after measuring them again once: "
                f"{', '.join(c.label() for c in configs if c.key in still)}; the recommendation says so."]
    return [f"Leader(s) measured on a busy machine were measured again on a quiet one: {', '.join(names)}."]


def _busy_note(final: dict, rec, conf) -> str | None:
    """What the exported deployment says when the decision rests on points measured busy."""
    if conf:
        if conf.get("busy"):
            return str(conf.get("busy_sentence") or f"The confirmation's rounds of {', '.join(conf['busy'])} ran on "
                                                      f"a busy machine.")
        return None
    note = getattr(rec, "busy_sentence", None)
    return str(note) if note else None  # a Sentence: plain text for the export


def check_outputs(path: Path, db, study: str | None, export_dir) -> Path:
    """Where tune will write, checked before any work: the export folder (the one given, else STUDY-deploy)
    can be written and its names fit the file system, and the store is a workbench one or can be made.
    Returns the export folder."""
    from wb_core.demo_catalog import default_study_name
    from wb_core.paths import check_output_file, check_output_folder, default_db
    from wb_core.store import Store
    from wb_core.store.sql import is_url

    target = db or default_db()
    if not is_url(target):
        if Path(target).is_file() and Path(target).stat().st_size > 0:
            with Store(target, readonly=True):  # another application's file is refused, and left untouched
                pass
        else:
            check_output_file(target, setting("db", "The results database"))
    if export_dir is not None:
        return check_output_folder(export_dir)
    name = study or f"{default_study_name(path)}-tune"
    return check_output_folder(Path(f"{name}-deploy"), f"The export folder named after the study "
                                                        f"({setting('study', 'Study name')})")


def _dynamic_length(description) -> bool:
    """The model's token-ids input has a dynamic sequence dimension."""
    return any(description.text_roles.get(s.name) == "ids" and len(s.shape) == 2 and
               (s.shape[1] is None or s.shape[1] < 1) for s in description.inputs)


class Deadline:
    """A cancel flag (what sweeps poll with `is_set()`) that turns on at a time, once `ready()` holds."""

    def __init__(self, at: float, ready: Callable[[], bool] = lambda: True, cancel=None):
        self.at, self.ready, self.cancel = at, ready, cancel  # `cancel`: the user's own flag, set at any time

    def is_set(self) -> bool:
        if self.cancel is not None and self.cancel.is_set():
            return True
        return time.monotonic() >= self.at and self.ready()

    def set(self) -> None:
        self.at = -math.inf


def _passing(ok):
    """The runs of `ok` the accuracy guard did not fail: the only ones a leader or the pick can be."""
    from wb_core.variants.guard import guard_failed_runs

    return ok[~guard_failed_runs(ok)]


def _leaders(ok, k: int) -> list[str]:
    """Keys of the `k` runs of highest throughput that the accuracy guard did not fail."""
    return list(_passing(ok).sort_values("throughput", ascending=False)["key"].head(k))


def _export_folder(study: str) -> Path:
    """The default export folder, STUDY-deploy in the working folder: one folder name, checked before any work."""
    from wb_core.paths import check_path_component

    return Path(check_path_component(study, setting("study", "The study name"), folder=f"{study}-deploy",
                                     instead=f"choose another, or give the folder ({setting('out', 'Export folder')})"))


def _export_yaml(db, study: str, key: str, out, busy_note: str | None = None) -> Path | None:
    from wb_core.export import deployment_for_study, export

    dep = deployment_for_study(db, study, run_key=key)
    if busy_note:
        dep.measurement.measured_on_busy_machine = True
        dep.measurement.busy_note = str(busy_note)  # a plain string: the YAML writer refuses str subclasses
    res = export(dep, "yaml", out)
    files = [Path(out) / f for r in res.values() for f in r.files]
    return files[0] if files else Path(out)


def _interval(run: dict) -> str:
    lo, hi = run.get("throughput_ci_low"), run.get("throughput_ci_high")
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo == lo and hi == hi:
        return f" (95% CI {max(lo, 0):,.0f} to {hi:,.0f})"
    return " (one round: no interval)"


def _answer(path, final: dict, rec, conf, export_path, elapsed: float, budget: float,
            outcomes: dict | None = None, losses=()) -> str:
    from wb_core.analysis.words import run_name
    from wb_core.demo_catalog import default_study_name

    # The model by its name: a demo's, or the folder above a generic file name (`saved_model`, `1`).
    text = (f"For {default_study_name(path)} on this CPU, run {run_name(final)}: {final['throughput']:,.0f} samples/s"
            f"{_interval(final)}, p99 {final['latency_ms_p99']:.3g} ms.")
    if conf:
        text += " " + conf["verdict"]
    else:
        text = joined([text, rec.reason])
    if outcomes:
        text = joined([text, variants_sentence(outcomes)])
    if losses:
        text = joined([text, *losses])
    if export_path:
        text = joined([text, f"The deployment settings are in {export_path}."])
    over = ""
    if elapsed > budget + 0.5:  # only a confirmation is allowed past the budget; anything else overran it
        over = (f" (the confirmation ran {elapsed - budget:.0f} s past it, within the {CONFIRM_OVERRUN:.0%} it may "
                f"take rather than leave the answer unconfirmed)" if conf else f" ({elapsed - budget:.0f} s past it)")
    return joined([text, f"Tuning took {elapsed:.0f} s of the {budget:.0f} s budget{over}."])
