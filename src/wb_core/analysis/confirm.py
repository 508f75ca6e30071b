"""Confirm a recommendation: measure it again beside what the runtime gives untouched.

The pick, its runner-up and the runtime's real defaults run in interleaved rounds (study
`<study>-confirm`) with everything the study used: its model file (checked unchanged), data,
calibration size, text and tokenizer, input shapes and sequence length, measuring settings, and the
variant file it measured (the INT8 IR itself). The model is checked by content, every file it reads
(an IR's .bin, an ONNX model's external data, a SavedModel's variables), not by file name. The
verdict gives what tuning is worth over the best default, and splits it in two where it can: what
the precision variant buys (that variant under the runtime's THROUGHPUT hint, against the best
default) and what tuning buys on top (the pick against that same variant under the hint).
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

from wb_core.config import InputOptions, MeasureSettings, RunConfig, SweepSpec
from wb_core.errors import ConfigError, setting
from wb_core.precisions import baseline, from_data, hinted
from wb_core.precisions import precision as declared
from wb_core.stats import UNDECIDED, Ratio, ratio

SAME_VARIANT = "the same variant under OpenVINO's THROUGHPUT hint"


def default_configs(backends, batch_size: int = 1, seq_len: int | None = None,
                    shape: str | None = None) -> dict[str, RunConfig]:
    """What a user gets without tuning, by name: each backend's declared defaults (the registry's
    `defaults`; for OpenVINO: untouched, so it picks the precision, BF16 on BF16 CPUs, and its
    LATENCY and THROUGHPUT hints with as many requests in flight as it asks for)."""
    from wb_core.backends.registry import get

    same = {"batch_size": batch_size, "seq_len": seq_len, "shape": shape}
    return {label: RunConfig(name, **settings, **same) for name in backends for label, settings in get(name).defaults}


def same_variant_with_hint(tuned: RunConfig) -> RunConfig | None:
    """The pick's model file under the runtime's own choices (OpenVINO's THROUGHPUT hint), when its
    backend declares them (`variant_default`)."""
    from wb_core.backends.registry import get

    chosen = get(tuned.backend).variant_default
    if not chosen:
        return None
    # Untouched, a BF16 run is the FP32 model left to the runtime: one and the same config.
    precision = baseline() if tuned.precision in hinted() and chosen.get("untouched") else tuned.precision
    return RunConfig(tuned.backend, precision=precision, batch_size=tuned.batch_size, seq_len=tuned.seq_len,
                     shape=tuned.shape, **chosen)


def check_model_unchanged(info: dict, model: str | Path | None, study: str) -> Path:
    """The model the study measured, still there and with the same content in every file it reads, or
    one sentence saying otherwise (naming the file that changed). Content is compared, not names: a
    renamed or moved identical copy is the same model."""
    from wb_core.errors import ModelError
    from wb_core.models import changed_files, fingerprint

    path = Path(model or info["model_path"])
    if model is not None and path.is_dir() and not Path(info["model_path"]).is_dir():
        raise ConfigError(f"The model given ({setting('model', 'Model path')}) '{path}' is a folder, but study "
                          f"'{study}' measured a file ({Path(info['model_path']).name}); give the file.")
    if not path.exists():
        raise ConfigError(f"The model file {path} that study '{study}' measured is no longer there; give its new "
                          f"place ({setting('model', 'Model path')}).")
    try:
        same = fingerprint(path) == info.get("model_fingerprint")
    except ModelError as e:  # a file it reads is missing or out of its folder
        raise ConfigError(f"The model at {path} cannot be checked against study '{study}': {e}") from None
    if same:
        return path
    stored = (info.get("spec") or {}).get("model_files")
    changed = changed_files(stored, path) if stored else []
    if changed:
        files = ", ".join(f"'{name}'" for name in changed)
        raise ConfigError(f"The model at {path} has changed since study '{study}' measured it: its "
                          f"file{'s' if len(changed) > 1 else ''} {files} "
                          f"{'differ' if len(changed) > 1 else 'differs'}; profile it again in a new study.")
    raise ConfigError(f"The model at {path} has changed since study '{study}' measured it (its content differs); "
                      f"profile it again in a new study.")


def study_precision_options(spec: dict, frame, keys: list[str]):
    """The study's data and quantization settings, with the variant files its runs loaded."""
    from wb_core.variants.planner import PrecisionOptions

    rec = dict(spec.get("precision") or {})
    variants = {}
    rows = frame.set_index("key", drop=False) if "key" in frame.columns else frame
    for k in keys:
        if k in rows.index and "variant_path" in rows.columns:
            row = rows.loc[k]
            path = row.get("variant_path")
            if isinstance(path, str) and path and Path(path).exists() and row.get("precision") in from_data():
                variants[f"{row['backend']}/{row['precision']}"] = path
    kw = {"data": rec.get("data"), "output": rec.get("output"), "input_map": rec.get("input_map") or {},
          "max_accuracy_drop": rec.get("max_accuracy_drop"), "accuracy": rec.get("accuracy", True),
          "variants": variants}
    if rec.get("subset_size"):
        kw["subset_size"] = int(rec["subset_size"])
    if rec.get("metric"):
        kw["metric"] = rec["metric"]
    for name in ("guard", "int8_recipe", "fallback_budget_s", "decode"):  # the guard, INT8 recipe, decoding it used
        if rec.get(name) is not None:
            kw[name] = rec[name]
    if rec.get("image"):
        from wb_core.data import ImageOptions

        img = dict(rec["image"])
        if img.get("size"):
            img["size"] = tuple(img["size"])
        kw["image"] = ImageOptions(**img)
    return PrecisionOptions(**kw), rec


def confirm_study(study: str, db, *, rounds: int = 5, objective: str = "throughput", constraints=None,
                  settings: MeasureSettings | None = None, allow_unmeasured_accuracy: bool = False,
                  model=None, progress: bool = False, precision_options=None, seq_len: int | None = None,
                  max_configs: int | None = None, remeasure_busy: bool = True, design: str = "auto",
                  max_s: float | None = None, margin: float | None = None, until: float | None = None,
                  side_by_side_only: bool = False) -> dict:
    """See `wb_core.api.confirm`. `max_configs` plans a smaller confirmation (`smaller`);
    `remeasure_busy` measures the rounds stored as busy once more before the verdict (else the
    verdict says they were not). `design`: "auto" measures the pick side by side in one worker with
    every configuration that can share one (`wb_core.sweep.paired`), the rest in fresh rounds;
    "paired" the same; "rounds" fresh rounds for all. `max_s`: seconds the side-by-side worker may
    take, its loads included; `margin`: its equivalence band (0.03: +-3%); `until`: a
    time.monotonic() by which the whole confirmation should end (the fresh rounds run first, the
    side-by-side worker takes what is left); `side_by_side_only`: the defaults that cannot share the
    pick's worker are left out for time (the verdict names them)."""
    from wb_core.analysis.recommend import recommend, with_efficiency
    from wb_core.analysis.side_by_side import check_margin, check_max_s
    from wb_core.backends.registry import backend_formats, names
    from wb_core.store import Store, load_results
    from wb_core.sweep.context import MAX_REPEATS
    from wb_core.sweep.local import run_sweep

    if design not in DESIGNS:
        raise ConfigError(f"The comparison design must be one of {', '.join(DESIGNS)}; got {design!r}.")
    check_margin(margin)
    check_max_s(max_s)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 2 <= rounds <= MAX_REPEATS:
        raise ConfigError(f"{setting('rounds', 'The rounds')} of a confirmation must be a whole number from 2 (an "
                          f"interval needs two) to {MAX_REPEATS}; got {rounds!r}.")
    with Store(db, readonly=True) as store:
        info = store.get_study(study)
        if info is None:
            raise ConfigError(f"No study named '{study}' in {db}.")
        df = store.to_frame(study)
    if df.empty or not (df.get("status") == "ok").any():
        raise ConfigError(f"Study '{study}' has no successful runs to confirm; profile the model first "
                          f"(its results show what happened).")
    path = check_model_unchanged(info, model, study)
    hw = info.get("hardware")
    rec = recommend(with_efficiency(df, hw), constraints, objective, runners_up=1, hardware=hw,
                    allow_unmeasured_accuracy=allow_unmeasured_accuracy, seq_len=seq_len)
    with Store(db, readonly=True) as store:  # the configs as stored (rows hold cores as text)
        tuned = store.run_config(study, rec.key)
        configs = {"tuned": tuned}
        if rec.runners_up:
            configs["runner-up"] = store.run_config(study, rec.runners_up[0]["key"])
    fmt = info.get("model_format")
    backends = [b for b in names() if fmt in backend_formats(b)]
    defaults = default_configs(backends, tuned.batch_size, tuned.seq_len, tuned.shape)
    configs.update(defaults)
    hinted = same_variant_with_hint(tuned)
    if hinted is not None:
        configs[SAME_VARIANT] = hinted
    configs, left_out = smaller(configs, set(defaults), objective, max_configs)
    if side_by_side_only:  # for time: what would need fresh rounds of its own is left out
        from wb_core.sweep.paired import worker_conflict

        for label in [k for k, c in configs.items() if k in defaults and worker_conflict(configs["tuned"], c)]:
            configs.pop(label)
            left_out.append(label)
    spec = info.get("spec") or {}
    stored = spec.get("settings") or {}
    if settings is None:
        settings = MeasureSettings(**stored) if stored else MeasureSettings()
    inputs = _study_inputs(spec)
    prec, rec_opts = study_precision_options(spec, df, [c.key for c in configs.values()])
    if precision_options is not None:
        prec = dataclasses.replace(precision_options, variants={**prec.variants, **precision_options.variants})
    if tuned.precision in from_data() and not prec.variants and prec.data is None \
            and rec_opts.get("data_in_memory") and not inputs.text:
        raise ConfigError(f"The {declared(tuned.precision).label} model study '{study}' measured is no longer in the "
                          f"cache and its data was given in memory; pass the same data again "
                          f"(precision_options=PrecisionOptions(data=...)).")
    name = f"{study}-confirm"
    shared, fresh_why = split_by_worker(configs, design)
    if len({configs[label].key for label in shared}) < 2:
        fresh_why.update({label: "it is the pick itself" for label in shared if label != "tuned"})
        shared = []
    rounds_name = f"{name}-rounds" if shared else name
    busy: set[str] = set()

    def fresh_rounds(labels: list[str]) -> set[str]:
        """Interleaved fresh rounds of `labels` (the pick among them); the keys stored busy."""
        unique: dict[str, RunConfig] = {}
        for label in labels:
            unique.setdefault(configs[label].key, configs[label])
        run_sweep(path, SweepSpec(repeats=rounds), db, rounds_name, settings=settings, inputs=inputs,
                  configs=list(unique.values()), progress=progress, precision=prec)
        with Store(db, readonly=True) as store:
            found = store.busy_keys(rounds_name) & set(unique)
        if found and remeasure_busy:  # once: a verdict should not rest on rounds others disturbed
            run_sweep(path, SweepSpec(repeats=rounds), db, rounds_name, settings=settings, inputs=inputs,
                      configs=[unique[k] for k in unique if k in found], progress=progress, precision=prec,
                      remeasure_busy=True)
        return found

    # Fresh rounds beside the pick for what needs them, first: their cost is fixed, and the side-by-side
    # comparison then takes the time left. For all when none is side by side (a pick that is a default
    # itself is then measured alone, as it is).
    fresh = [label for label in configs if label not in shared or label == "tuned"]
    fresh = fresh if len({configs[label].key for label in fresh}) >= 2 or not shared else []
    if fresh:
        busy |= fresh_rounds(fresh)
    paired_out = None
    if shared:
        from wb_core.sweep.paired import MARGIN, MAX_S, run_paired

        order = list(dict.fromkeys(configs[label].key for label in shared))
        by_key = {configs[label].key: configs[label] for label in shared}
        index = {k: i for i, k in enumerate(order)}
        pairs = comparison_pairs({label: index[configs[label].key] for label in shared}, set(defaults))
        # A time given counts the worker's loads too; `until` is when the whole confirmation must end.
        if until is not None:
            whole = max(3.0, until - time.monotonic())
            limit = min(max_s, whole) if max_s else whole
        else:
            whole, limit = max_s, max_s or paired_time(rounds, len(order), settings, MAX_S)
        paired_out = run_paired(path, db, name, [by_key[k] for k in order], pairs, settings=settings, inputs=inputs,
                                precision=prec, progress=progress, metric=_metric(objective),
                                margin=margin or MARGIN, deadline_s=whole, max_s=limit)
        if paired_out.fallback:  # nothing measured side by side: every configuration gets fresh rounds
            fresh_why = {label: paired_out.fallback for label in configs if label != "tuned"}
            fresh, shared = list(configs), []
            busy |= fresh_rounds(fresh)
    studies = {}
    if shared:
        studies[PAIRED_DESIGN] = (name, shared)
    if fresh:
        studies[ROUNDS_DESIGN] = (rounds_name, fresh)
    measured, frames = {}, []
    for kind, (study_name, labels) in studies.items():
        res = load_results(db, study_name).set_index("key", drop=False)
        frames.append(res.reset_index(drop=True))
        measured[kind] = {label: {**res.loc[configs[label].key].to_dict(), "study": study_name}
                          for label in labels if configs[label].key in res.index}
    import pandas as pd

    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    out = verdict(measured, set(defaults), objective, name if shared else rounds_name, frame,
                  remeasured=bool(busy) and remeasure_busy, paired=paired_out)
    if isinstance(out.get("recommended"), dict) and out["recommended"].get("study"):
        out["study"] = out["recommended"]["study"]  # where the recommended run is stored (for an export)
    out["design"] = "+".join(studies) or ROUNDS_DESIGN
    out["paired"] = paired_out
    out["design_sentence"] = design_sentence(paired_out, fresh_why, shared)
    out["verdict"] += " " + out["design_sentence"]
    if left_out:
        out["left_out"] = left_out
        out["verdict"] += (f" Left out of this confirmation for time: {', '.join(left_out)} "
                           f"({len({c.key for c in configs.values()})} configurations measured).")
    return out


DESIGNS = ("auto", "paired", "rounds")
PAIRED_DESIGN, ROUNDS_DESIGN = "paired", "rounds"


def paired_time(rounds: int, configs: int, settings: MeasureSettings, most: float) -> float:
    """Seconds a paired comparison may measure when none are given: what `rounds` fresh rounds of
    `configs` configurations would spend measuring, at least 3 s and at most `most`."""
    return min(most, max(3.0, rounds * configs * (settings.warmup_s + settings.max_time_s)))


def _metric(objective: str) -> str:
    return "latency_ms_p99" if objective == "latency" else "throughput"


def split_by_worker(configs: dict[str, RunConfig], design: str) -> tuple[list[str], dict[str, str]]:
    """Which labels are measured side by side with the pick in one worker, and why each other one
    keeps fresh rounds (`design` "rounds": all of them)."""
    from wb_core.sweep.paired import worker_conflict

    if design == ROUNDS_DESIGN:
        return [], {label: "fresh rounds were asked for" for label in configs if label != "tuned"}
    tuned = configs["tuned"]
    shared, why = ["tuned"], {}
    for label, c in configs.items():
        if label == "tuned":
            continue
        conflict = worker_conflict(tuned, c)
        if conflict is None:
            shared.append(label)
        else:
            why[label] = conflict
    return shared, why


def comparison_pairs(index: dict[str, int], default_labels: set[str]) -> list[tuple[int, int]]:
    """The (base, new) pairs the stopping rule decides: the pick over each other configuration, and
    the pick's variant under the hint over each default (what the precision buys)."""
    t = index["tuned"]
    pairs = [(i, t) for label, i in index.items() if i != t]
    hinted = index.get(SAME_VARIANT)
    if hinted is not None and hinted != t:
        pairs += [(index[d], hinted) for d in default_labels if d in index and index[d] not in (hinted, t)]
    return list(dict.fromkeys(pairs))


def design_sentence(paired, fresh_why: dict[str, str], shared: list[str]) -> str:
    """How the confirmation was measured, and why a configuration kept fresh rounds."""
    parts = []
    if shared:
        others = [label for label in shared if label != "tuned"]
        parts.append(f"{paired.sentence()} Beside the pick there: {', '.join(others)}.")
    if fresh_why:
        rest = "; ".join(f"{label} ({why})" for label, why in fresh_why.items() if label not in shared)
        if rest:
            parts.append(f"In fresh interleaved rounds, each in its own worker, beside the pick: {rest}.")
    return " ".join(parts)


def smaller(configs: dict[str, RunConfig], default_labels: set[str], objective: str,
            max_configs: int | None) -> tuple[dict[str, RunConfig], list[str]]:
    """At most `max_configs` of the confirmation's configurations: the runner-up is left out first,
    then the defaults whose hint the objective does not favour (for throughput: those without the
    THROUGHPUT hint), those that cannot share the pick's worker before the others (each needs fresh
    rounds); the pick, the best-suited default and the pick's variant under the hint stay.
    Labels naming one and the same configuration count once."""
    def count(cs) -> int:  # configurations measured: one label may name the same one as another
        return len({c.key for c in cs.values()})

    if max_configs is None or count(configs) <= max_configs:
        return configs, []
    from wb_core.sweep.paired import worker_conflict

    favoured = "latency" if objective == "latency" else "throughput"
    unfavoured = [label for label in configs if label in default_labels and favoured.upper() not in label.upper()]
    # Those that cannot share the pick's worker first: each costs fresh rounds of its own.
    tuned = configs.get("tuned")
    unfavoured.sort(key=lambda label: tuned is None or worker_conflict(tuned, configs[label]) is None)
    order = ["runner-up"] + unfavoured
    kept, left_out = dict(configs), []
    for label in order:
        if count(kept) <= max_configs:
            break
        if label in kept:
            kept.pop(label)
            left_out.append(label)
    return kept, left_out


def _study_inputs(spec: dict) -> InputOptions:
    d = dict(spec.get("inputs") or {})
    if d.get("text"):
        d.pop("samples", None)  # tokenized again, at the lengths confirmed, from the same text and tokenizer
    elif d.get("samples") and not Path(d["samples"]).exists():
        d.pop("samples")
    return InputOptions.from_dict(d)


def _rounds_of(row: dict, objective: str, drop: set[int]) -> dict[int, float]:
    """Round -> the objective's value of one row, rounds in `drop` left out."""
    name = "round_p99" if objective == "latency" else "round_throughput"
    ids, values = row.get("round_ids"), row.get(name)
    if not isinstance(ids, (list, tuple)) or not isinstance(values, (list, tuple)) or len(ids) != len(values):
        return {}
    return {int(i): float(v) for i, v in zip(ids, values)
            if int(i) not in drop and v is not None and v == v and float(v) > 0}


def _gain(base: dict, new: dict, objective: str, drop: set[int] = frozenset(), paired: bool = True) -> Ratio | None:
    """How many times better `new` is than `base` on the objective, paired by round (`paired`: the two
    rows' rounds are the same cycles or rounds; else they are compared unpaired); rounds in `drop` are
    left out (cycles measured busy)."""
    a, b = _rounds_of(base, objective, drop), _rounds_of(new, objective, drop)
    if not a or not b:
        return None
    if objective == "latency":  # lower is better: base's p99 over new's
        a, b = b, a
    if not paired:
        return ratio(list(a.values()), list(b.values()))
    return ratio(list(a.values()), list(b.values()), list(a), list(b))


def _decision(base: dict, new: dict, objective: str, drop: set[int], looks: int, margin: float,
              precision: float | None):
    """The stopping rule's answer (wb_core.stats.decide) on the same paired log ratios as `_gain`."""
    from wb_core.stats import decide

    a, b = _rounds_of(base, objective, drop), _rounds_of(new, objective, drop)
    if objective == "latency":
        a, b = b, a
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        return None
    return decide([math.log(b[r] / a[r]) for r in common], margin, looks, precision)


def _guard_failed(row: dict) -> bool:
    from wb_core.variants.guard import FAILED

    return row.get("accuracy_guard") == FAILED


def _requests(row: dict) -> str:
    n = row.get("requests_in_flight")
    from wb_core.analysis.words import plural

    return f", {plural(int(n), 'request')} in flight as the runtime asks" if n == n and n else ""


def _executed(row: dict) -> str:
    p = row.get("executed_precision")
    return f" (it executed in {str(p).upper()})" if isinstance(p, str) and p not in ("", "unknown") else ""


def verdict(rows: dict[str, dict], default_labels: set[str], objective: str, name: str, frame,
            remeasured: bool = False, paired=None, margin: float | None = None) -> dict:
    """The confirmation's figures and its verdict in words, from the measured rows by label (or by
    design, "paired" and "rounds", then by label: the pick is in both when both were measured).
    `remeasured`: the busy rounds were measured once more already (the verdict says whether any
    stayed busy). `paired`: the side-by-side comparison's outcome (its looks and busy cycles)."""
    from wb_core.analysis.words import run_name
    from wb_core.sweep.paired import MARGIN, PRECISION

    margin = margin or MARGIN
    designs = rows if rows and set(rows) <= {PAIRED_DESIGN, ROUNDS_DESIGN} else {ROUNDS_DESIGN: rows}
    flat: dict[str, dict] = {}
    for kind in (PAIRED_DESIGN, ROUNDS_DESIGN):
        for label, r in designs.get(kind, {}).items():
            flat.setdefault(label, r)
    ok = {label: r for label, r in flat.items() if r.get("status") == "ok"}
    side = {label: kind for kind in (ROUNDS_DESIGN, PAIRED_DESIGN) for label in designs.get(kind, {})}
    paired_ok = {label: r for label, r in designs.get(PAIRED_DESIGN, {}).items() if r.get("status") == "ok"}
    # Side by side, the verdict reads this run's cycles (a confirmation run again adds new ones).
    stored_ids = {int(i) for r in paired_ok.values() for i in (r.get("round_ids") or [])}
    this_run = {int(i) for ids in (paired.rounds.values() if paired is not None else ()) for i in ids} or stored_ids
    busy_cycles = {int(i) for r in paired_ok.values() for i in (r.get("busy_rounds") or [])} & this_run
    drop = (stored_ids - this_run) | (busy_cycles if paired is not None and paired.quiet_only else set())

    def compare(base_label: str, new_label: str):
        """(gain, decision) of new over base, from the rows of one design where both were measured."""
        kind = next((k for k in (PAIRED_DESIGN, ROUNDS_DESIGN)
                     if base_label in designs.get(k, {}) and new_label in designs.get(k, {})), None)
        if kind is None:  # measured in different designs: compared unpaired, no stopping rule
            return _gain(ok[base_label], ok[new_label], objective, paired=False), None
        a, b = designs[kind][base_label], designs[kind][new_label]
        if a.get("status") != "ok" or b.get("status") != "ok":
            return None, None
        cut = drop if kind == PAIRED_DESIGN else set()
        looks = paired.looks if kind == PAIRED_DESIGN and paired is not None else 1
        prec = PRECISION if kind == PAIRED_DESIGN else None
        return _gain(a, b, objective, cut), _decision(a, b, objective, cut, looks, margin, prec)

    better_is_higher = objective != "latency"
    metric = "throughput" if better_is_higher else "latency_ms_p99"
    dflt = {label: r for label, r in ok.items() if label in default_labels}
    out = {"study": name, "tuned": ok.get("tuned"), "defaults": dflt, "gain": None, "tuned_is_better": False,
           "frame": frame, "same_variant_hint": ok.get(SAME_VARIANT), "precision_gain": None, "tuning_gain": None,
           "busy": [], "failed": {label: r.get("error") for label, r in flat.items() if r.get("status") != "ok"},
           "decisions": {}, "outcome": None, "measured_in": side, "left_out_cycles": sorted(drop)}
    if "tuned" not in ok or not dflt:
        out["recommended"] = ok.get("tuned")
        what = "the tuned configuration" if "tuned" not in ok else "every default"
        why = out["failed"].get("tuned") if "tuned" not in ok else "; ".join(
            f"{k}: {v}" for k, v in out["failed"].items() if k in default_labels)
        out["verdict"] = f"Nothing to compare: {what} failed to run again ({why or 'no result'})."
        return out
    pick = (max if better_is_higher else min)(dflt, key=lambda k: dflt[k][metric])
    best_default, t = dflt[pick], ok["tuned"]
    gain, decision = compare(pick, "tuned")
    out["gain"] = gain
    if decision is not None:
        out["decisions"]["gain"] = decision
        out["outcome"] = decision.outcome
    word = "throughput" if better_is_higher else "p99 latency"
    named = f"{pick}{_requests(best_default)}{_executed(best_default)}"
    same = next((label for label, r in dflt.items() if r["key"] == t["key"]), None)
    how_many = "cycles side by side" if side.get(pick) == PAIRED_DESIGN else "interleaved rounds"
    if same is not None and _guard_failed(t):
        out["recommended"] = None
        text = (f"The pick is a runtime default itself, {same}{_requests(t)}{_executed(t)}, and it fails the accuracy "
                f"guard here: {t.get('accuracy_guard_note') or 'see its accuracy'} Nothing is recommended; give the "
                f"precision explicitly and tune again.")
    elif same is not None:
        out["recommended"] = t
        text = (f"The pick is a runtime default itself, {same}{_requests(t)}{_executed(t)}: nothing beats it beyond "
                f"noise, and it is recommended as it is.")
    elif _guard_failed(best_default) and not _guard_failed(t):
        out["recommended"] = t
        how = gain.percent() if gain is not None else "unknown"
        why = str(best_default.get("accuracy_guard_note") or "see its accuracy").rstrip(".")
        text = (f"The default {named} fails the accuracy guard ({why}), so it is no choice: recommending the tuned "
                f"{run_name(t)}, which passes; against that default it differs by {how} on {word}.")
    elif gain is not None and gain.low > 1:
        out["tuned_is_better"] = True
        out["recommended"] = t
        # The 95% interval clears no change; the stopping rule, which looked several times, may not
        # have decided yet: then the claim is said as likely, and the rule's sentence follows.
        pays = "Tuning likely pays" if decision is not None and decision.outcome == UNDECIDED else "Tuning pays"
        text = (f"{pays}: {run_name(t)} beats the best default, {named}, on {word} by "
                f"{gain.percent()} over {gain.n} {how_many}.")
    else:
        out["recommended"] = best_default
        how = gain.percent() if gain is not None else "unknown"
        verdict_word = "is better beyond noise" if gain is not None and gain.high < 1 else "is as good within noise"
        text = (f"The default {named} {verdict_word}: the tuned {run_name(t)} differs by {how} "
                f"on {word}; recommending the default.")
    if decision is not None and same is None:
        text += " " + decision.sentence("The pick over the best default")
    hinted = ok.get(SAME_VARIANT)
    if hinted is not None and same is None:
        out["precision_gain"], d_prec = compare(pick, SAME_VARIANT)
        out["tuning_gain"], d_tune = compare(SAME_VARIANT, "tuned")
        for k, d in (("precision_gain", d_prec), ("tuning_gain", d_tune)):
            if d is not None:
                out["decisions"][k] = d
        prec = str(t.get("precision")).upper()
        if hinted["key"] == best_default["key"]:
            text += (f" The {prec} variant under OpenVINO's THROUGHPUT hint is that default itself"
                     f"{_executed(hinted)}, so tuning is all of the difference.")
        elif out["precision_gain"] is not None:
            text += (f" What the {prec} variant buys: under OpenVINO's THROUGHPUT hint it gives "
                     f"{out['precision_gain'].percent()} over the best default.")
        if out["tuning_gain"] is not None and hinted["key"] != best_default["key"]:
            text += f" What tuning buys on top: {out['tuning_gain'].percent()} over that same variant under the hint."
    untouched = ok.get("OpenVINO untouched")
    if untouched is not None and _executed(untouched):
        text += f" OpenVINO left untouched ran the FP32 model{_executed(untouched)}."
    fresh_busy = [label for label, r in ok.items() if side.get(label) == ROUNDS_DESIGN and r.get("busy") in (True, 1)]
    paired_busy = bool(busy_cycles) and not drop  # busy cycles that the decision could not leave out
    out["busy"] = fresh_busy + ([label for label in paired_ok if label not in fresh_busy] if paired_busy else [])
    sentences = []
    if fresh_busy:
        again = ("even after they were measured again once" if remeasured
                 else "and were not measured again")
        sentences.append(f"This verdict rests on rounds measured on a busy machine (other processes on their "
                         f"cores), of {', '.join(fresh_busy)}, {again}: confirm again when it is quieter.")
    if paired_busy:
        sentences.append(f"This verdict rests on cycles measured on a busy machine (other processes on these cores "
                         f"in {len(busy_cycles)} of {len(this_run)} cycles side by side, too many to leave out): "
                         f"confirm again when it is quieter.")
    if sentences:
        out["busy_sentence"] = " ".join(sentences)
        text += " " + out["busy_sentence"]
    out["verdict"] = text
    return out
