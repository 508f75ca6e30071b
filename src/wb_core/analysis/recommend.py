"""Turn a table of runs into a decision: efficiency columns, the Pareto front, and a recommendation.

Everything here works on the results DataFrame (`wb_core.store.load_results`) and never measures.
Accuracy columns (`accuracy`, `accuracy_drop`) are used when a study has them, never required.

Cores a run used (`cores_used`): the CPUs it was pinned to (`n_cores`), or every CPU available
when it was not pinned; fewer when it ran fewer threads than that, since a thread can keep at
most one core busy. Throughput per core and percent of peak FLOP/s are computed against it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from wb_core.analysis.words import run_name
from wb_core.errors import ConfigError, Sentence, WorkbenchError, counted, joined, setting, were
from wb_core.precisions import NAMES, baseline
from wb_core.stats import Ratio, ratio
from wb_core.variants.guard import guard_failed_runs

OBJECTIVES = ("throughput", "latency", "throughput_per_core")
EQUIVALENCE = 0.03  # runs whose ratio's 95% interval lies within +-3% are equivalent: simplicity decides
OBJECTIVE_WORDS = {"throughput": "the highest throughput", "latency": "the lowest p99 latency",
                   "throughput_per_core": "the highest throughput per core"}

class NoRunMeetsConstraints(WorkbenchError):
    """Every successful run breaks at least one constraint."""


@dataclass(frozen=True)
class Constraints:
    """Limits a recommended run must respect; None means no limit."""

    max_p99_ms: float | None = None
    max_accuracy_drop: float | None = None  # a fraction: 0.01 is one point of accuracy
    max_memory_mb: float | None = None
    max_cores: int | None = None

    def __post_init__(self):
        _positive(self.max_p99_ms, "Maximum p99 latency (ms)")
        _positive(self.max_memory_mb, "Maximum memory (MB)")
        d = self.max_accuracy_drop
        if d is not None and (not _is_number(d) or d < 0 or d > 1):
            raise ConfigError(f"Maximum accuracy drop must be a fraction between 0 and 1 (0.01 is one point); "
                              f"got {d!r}.")
        c = self.max_cores
        if c is not None and (isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 1):
            raise ConfigError(f"Maximum cores must be a whole number of at least 1; got {c!r}.")

    def is_empty(self) -> bool:
        return all(v is None for v in (self.max_p99_ms, self.max_accuracy_drop, self.max_memory_mb, self.max_cores))

    def describe(self) -> str:
        parts = []
        if self.max_p99_ms is not None:
            parts.append(f"p99 latency ≤ {_num(self.max_p99_ms)} ms")
        if self.max_accuracy_drop is not None:
            parts.append(f"accuracy drop ≤ {_num(self.max_accuracy_drop)}")
        if self.max_memory_mb is not None:
            parts.append(f"memory ≤ {_num(self.max_memory_mb)} MB")
        if self.max_cores is not None:
            parts.append(f"cores ≤ {self.max_cores}")
        return " and ".join(parts) if parts else "no constraints"

    def misses(self, run: pd.Series | dict) -> list[tuple[str, float]]:
        """The constraints a run breaks: (one phrase, how far over the limit as a fraction)."""
        out = []
        g = run.get
        if self.max_p99_ms is not None:
            v = _float(g("latency_ms_p99"))
            if v is None or v > self.max_p99_ms:
                out.append(_miss("p99 latency", v, self.max_p99_ms, "ms"))
        if self.max_accuracy_drop is not None:
            v = _float(g("accuracy_drop"))
            if v is None:
                out.append(("the accuracy limit: its accuracy drop was not measured", math.inf))
            elif v > self.max_accuracy_drop:
                out.append(_miss("accuracy drop", v, self.max_accuracy_drop, ""))
        if self.max_memory_mb is not None:
            v = _float(g("rss_mb"))
            if v is None or v > self.max_memory_mb:
                out.append(_miss("memory", v, self.max_memory_mb, "MB"))
        if self.max_cores is not None:
            v = _float(g("cores_used"))
            if v is None or v > self.max_cores:
                out.append(_miss("cores", v, self.max_cores, ""))
        return out

    def allows(self, run) -> bool:
        return not self.misses(run)


@dataclass
class Recommendation:
    """The best run under the constraints, why it won, and the runs that came next."""

    best: dict
    reason: str
    runners_up: list[dict] = field(default_factory=list)
    objective: str = "throughput"
    constraints: Constraints = field(default_factory=Constraints)
    candidates: int = 0
    tied: list[dict] = field(default_factory=list)  # runs within noise of the best, the pick among them
    margin: Ratio | None = None  # the pick over the next run beyond noise (B/A of the objective's value)
    notes: list[str] = field(default_factory=list)  # ties, margins, accuracy not measured: also in `reason`
    per_length: dict = field(default_factory=dict)  # seq_len -> Recommendation, for a study of several lengths
    seq_len: int | None = None  # the length this recommendation is for
    busy: list[str] = field(default_factory=list)  # labels of the compared runs measured on a busy machine
    busy_sentence: str | None = None  # what the reason says about them (also in `notes`)

    @property
    def key(self) -> str:
        return self.best["key"]


# ---------------------------------------------------------------- efficiency columns


def with_efficiency(df: pd.DataFrame, hardware: dict | None = None,
                    flops_per_sample: float | None = None) -> pd.DataFrame:
    """A copy of the results with cores_used, throughput_per_core, gflops, pct_peak_flops, oversubscribed.

    `hardware` is the study's hardware dict (for the CPUs available and the peak FLOP/s);
    without it this machine's is used. `flops_per_sample` comes from `wb_core.analysis.flops`; without it
    the FLOP columns stay empty.
    """
    if hardware is None:
        from wb_core.hardware import detect

        hardware = detect().to_dict()
    out = df.copy()
    if out.empty:
        for col in ("cores_given", "cores_used", "throughput_per_core", "gflops", "pct_peak_flops"):
            out[col] = pd.Series(dtype=float)
        out["oversubscribed"] = pd.Series(dtype=bool)
        return out
    available = len(hardware.get("available_cpus") or []) or int(hardware.get("logical_cores") or 1)
    n_cores = _col(out, "n_cores")
    given = n_cores.where(n_cores.notna() & (n_cores > 0), available).astype(float)
    threads = effective_threads(out)
    used = np.fmin(given, threads.where(threads > 0))  # fmin ignores NaN: unknown threads -> given
    instances = _col(out, "instances").fillna(1).clip(lower=1)
    out["cores_given"] = given
    out["cores_used"] = used
    out["throughput_per_core"] = _col(out, "throughput") / used
    out["oversubscribed"] = (threads.fillna(0) * instances) > given
    peak_total = hardware.get("peak_gflops") or {}
    physical = float(hardware.get("physical_cores") or available)
    if flops_per_sample:
        out["gflops"] = _col(out, "throughput") * flops_per_sample / 1e9
        peak_per_core = out["precision"].map(
            lambda p: (peak_total.get(str(p) if str(p) in NAMES else baseline()) or 0) / physical)
        peak = peak_per_core.astype(float) * used
        out["pct_peak_flops"] = (100 * out["gflops"] / peak).where(peak > 0)
    else:
        out["gflops"] = np.nan
        out["pct_peak_flops"] = np.nan
    return out


def effective_threads(df: pd.DataFrame) -> pd.Series:
    """Threads a run computed with: the setting, else what the runtime reported, else NaN."""
    t = _col(df, "threads")
    for reported in ("ov_threads", "tf_intra_op"):
        if reported in df.columns:
            r = _col(df, reported)
            t = t.where(t.notna(), r.where(r > 0))
    return t


# ---------------------------------------------------------------- Pareto front


def uses_accuracy(df: pd.DataFrame) -> bool:
    """Accuracy joins the front only when every successful run has it (else runs would not compare)."""
    ok = successful(df)
    return "accuracy" in ok.columns and not ok.empty and bool(ok["accuracy"].notna().all())


def pareto_mask(df: pd.DataFrame, with_accuracy: bool | None = None) -> pd.Series:
    """True for runs no other run beats: lower-or-equal p99, higher-or-equal throughput (and accuracy).

    Failed or skipped runs are never on the front. With `with_accuracy=None`, accuracy counts
    when every successful run has it.
    """
    mask = pd.Series(False, index=df.index)
    ok = successful(df)
    ok = ok[ok["latency_ms_p99"].notna() & ok["throughput"].notna()]
    if ok.empty:
        return mask
    if with_accuracy is None:
        with_accuracy = uses_accuracy(df)
    # Minimise every column: latency, -throughput, -accuracy.
    cols = [ok["latency_ms_p99"].astype(float).to_numpy(), -ok["throughput"].astype(float).to_numpy()]
    if with_accuracy:
        cols.append(-ok["accuracy"].astype(float).to_numpy())
    pts = np.stack(cols, axis=1)
    keep = np.ones(len(pts), dtype=bool)
    for i in range(len(pts)):
        others = np.delete(pts, i, axis=0)
        dominated = np.any(np.all(others <= pts[i], axis=1) & np.any(others < pts[i], axis=1))
        keep[i] = not dominated
    mask.loc[ok.index[keep]] = True
    return mask


def pareto_front(df: pd.DataFrame, with_accuracy: bool | None = None) -> pd.DataFrame:
    """The Pareto-optimal runs, sorted by p99 latency."""
    return df[pareto_mask(df, with_accuracy)].sort_values("latency_ms_p99")


# ---------------------------------------------------------------- recommendation


def successful(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty or "status" not in df.columns:
        return df.iloc[0:0]
    return df[df["status"] == "ok"]


def check_objective(objective: str) -> str:
    o = str(objective).strip().lower().replace("-", "_")
    if o not in OBJECTIVES:
        raise ConfigError(f"Unknown objective '{objective}'; choose from {', '.join(OBJECTIVES)}.")
    return o


def rank(df: pd.DataFrame, objective: str) -> pd.DataFrame:
    """Runs best-first for an objective; ties go to lower p99, then higher throughput, then fewer cores."""
    objective = check_objective(objective)
    view = df.assign(_p99=df["latency_ms_p99"].astype(float), _thr=df["throughput"].astype(float),
                     _cores=_col(df, "cores_used").fillna(math.inf))
    if objective == "throughput":
        order, asc = ["_thr", "_p99", "_cores"], [False, True, True]
    elif objective == "latency":
        order, asc = ["_p99", "_thr", "_cores"], [True, False, True]
    else:
        view = view.assign(_tpc=_col(df, "throughput_per_core"))
        order, asc = ["_tpc", "_p99", "_cores"], [False, True, True]
    ranked = view.sort_values(order, ascending=asc, na_position="last", kind="mergesort")
    return ranked.drop(columns=[c for c in ranked.columns if c.startswith("_")])


def recommend(df: pd.DataFrame, constraints: Constraints | None = None, objective: str = "throughput",
              runners_up: int = 3, hardware: dict | None = None,
              allow_unmeasured_accuracy: bool = False, seq_mix=None, seq_len: int | None = None,
              equivalence: float = EQUIVALENCE) -> Recommendation:
    """The best successful run under `constraints` for `objective`, with a one-sentence reason.

    Noise: runs measured in repeated rounds carry 95% intervals; runs whose intervals overlap the
    best's are tied within noise, and the simplest of them is picked (fewest cores, then runtime
    defaults: auto threads, no pinning, auto streams; then the better other metric). The reason
    says so, and states the pick's margin over the next run beyond noise with its interval.

    Accuracy: a reduced precision (bf16, int8) whose accuracy was never measured is not picked
    while a run of known accuracy is available, unless `allow_unmeasured_accuracy`; the reason
    says what was passed over, or that the pick's accuracy is not measured.

    Raises WorkbenchError for a study without successful runs, and NoRunMeetsConstraints (naming
    the closest run and what it misses) when no run meets the constraints.

    `seq_mix` ("128:0.8,384:0.2" or {128: 0.8, 384: 0.2}) weighs each configuration over the
    sequence lengths of the mix (see wb_core.analysis.seq_mix): the pick is a configuration, its
    figures the mix's; configurations missing a length are left out, with a note.

    Sequence length is the workload, not a setting: runs at different lengths are never ranked
    against each other. A study of several lengths gets one recommendation per length
    (`per_length`); the returned one is for `seq_len`, by default the longest.

    Ties are settled by measuring: runs whose intervals overlap the best's are equivalent only when
    the paired ratio's interval lies within +-`equivalence` (3%); only then is the simplest picked.
    Overlapping runs not shown equivalent leave the higher median picked, and a note asks for more
    rounds (`--ci`). Runs whose accuracy guard failed are never recommended; a note says which.
    """
    from wb_core.errors import check_kind

    check_kind(df, (pd.DataFrame, type(None)), "The runs to recommend from", "api.results gives them")
    check_kind(constraints, (Constraints, type(None)), "The constraints", "api.Constraints(max_p99_ms=...)")
    constraints = constraints or Constraints()
    objective = check_objective(objective)
    if df is None or df.empty:
        raise WorkbenchError("The study has no runs yet; profile the model first with `wb profile`.")
    if seq_mix is None:
        lengths = _lengths(df)
        if seq_len is not None:
            if seq_len not in lengths:
                raise ConfigError(f"The study has no runs at sequence length {seq_len}"
                                  + (f"; its lengths: {', '.join(map(str, lengths))}." if lengths else "."))
            df = df[_col(df, "seq_len") == seq_len]
        elif len(lengths) > 1:
            return _per_length(df, lengths, constraints=constraints, objective=objective, runners_up=runners_up,
                               hardware=hardware, allow_unmeasured_accuracy=allow_unmeasured_accuracy,
                               equivalence=equivalence)
    mix_notes: list[str] = []
    if seq_mix is not None:
        from wb_core.analysis.seq_mix import describe_mix, mix_lengths, parse_seq_mix

        mix = parse_seq_mix(seq_mix)
        df, mix_notes = mix_lengths(df, mix)
        mix_notes.insert(0, f"Figures are for the sequence-length mix {describe_mix(mix)}: mean and p50 latency "
                            f"and time per sample weighed over the lengths, p99 the worst length's.")
    ok = successful(df)
    ok = ok[ok["throughput"].notna() & ok["latency_ms_p99"].notna()]
    if ok.empty:
        done = successful(df)
        if not done.empty:  # they ran, but give no figure to choose by: saturated arrival-rate points
            saturated = "saturated" in done.columns and done["saturated"].fillna(False).astype(bool).all()
            raise WorkbenchError(
                f"No run of the study can be chosen: its {counted(len(done), 'successful run')} "
                f"{'has' if len(done) == 1 else 'have'} no p99 latency"
                + (" (saturated: requests arrived faster than they were served); measure lower arrival rates "
                   f"({setting('rates', 'Arrival rate')}), or on a quieter machine." if saturated else
                   "; see `wb results`."))
        counts = df["status"].value_counts().to_dict() if "status" in df.columns else {}
        detail = ", ".join(f"{n} {s}" for s, n in counts.items()) or "none"
        raise WorkbenchError(f"The study has no successful runs to choose from ({detail}); "
                             f"see `wb results` for the errors.")
    if "cores_used" not in ok.columns or "throughput_per_core" not in ok.columns:
        ok = with_efficiency(ok, hardware)
    if constraints.max_accuracy_drop is not None and _col(ok, "accuracy_drop").isna().all():
        raise NoRunMeetsConstraints("This study has no accuracy measurements, so the accuracy-drop limit cannot be "
                                    "checked; measure accuracy when profiling, or leave the limit out.")
    ok, guard_notes = _without_failed_guard(ok)
    if ok.empty:
        raise NoRunMeetsConstraints(" ".join(guard_notes) + " No other run succeeded.")
    allowed = ok[[constraints.allows(r) for _, r in ok.iterrows()]]
    if allowed.empty:
        raise NoRunMeetsConstraints(_nothing_meets(ok, constraints))
    notes: list[str] = list(mix_notes) + guard_notes
    unmeasured = _accuracy_unknown(allowed)
    if unmeasured.any() and not allow_unmeasured_accuracy and not unmeasured.all():
        top = rank(allowed, objective).iloc[0]
        if bool(unmeasured.loc[top.name]):
            notes.append(Sentence(f"{run_name(top)} would give {_objective_value(top, objective)}, but the accuracy "
                                  f"of its {top['precision']} variant was never measured (without "
                                  f"{setting('data', 'data')} it is quantized on random calibration data); runs of "
                                  f"known accuracy are preferred: measure accuracy with {setting('data', 'data')}, "
                                  f"or allow unmeasured accuracy."))
        allowed = allowed[~unmeasured]
    ranked = rank(allowed, objective)
    tied = _tied(ranked, objective)
    top = ranked.loc[tied[0]]
    equivalent = [tied[0]] + [i for i in tied[1:] if _equivalent(top, ranked.loc[i], objective, equivalence)]
    pm = f"+-{100 * equivalence:g}%"
    if len(equivalent) > 1:
        pick = min(equivalent, key=lambda i: _simplicity(ranked.loc[i], objective))
        notes.append(f"{len(equivalent)} runs are tied within noise and equivalent within {pm} (the interval of "
                     f"their ratio to the best, {run_name(top)} at {_objective_value(top, objective)}, lies within "
                     f"{pm}); the simplest of them is picked: fewest cores, then the runtime's defaults.")
        ranked = pd.concat([ranked.loc[[pick]], ranked.drop(index=pick)])
    unsettled = [i for i in tied if i not in equivalent]
    if unsettled:
        notes.append(Sentence(f"{counted(len(unsettled), 'run')} overlap{'s' if len(unsettled) == 1 else ''} the best "
                              f"within noise but {'is' if len(unsettled) == 1 else 'are'} not shown equivalent "
                              f"within {pm}: the highest median is kept; measure more rounds (an interval target such "
                              f"as {setting('ci', 'Interval target')} 3%) to settle it."))
    best = ranked.iloc[0]
    margin = None
    beyond = [i for i in ranked.index if i not in tied]
    if beyond and _has_rounds(best):
        nxt = ranked.loc[beyond[0]]
        margin = _margin(best, nxt, objective)
        if margin is not None:
            if objective == "latency":
                text = f"{run_name(nxt)}, the next run beyond noise, has a p99 {margin.percent()} higher"
            else:
                text = f"It beats {run_name(nxt)}, the next run beyond noise, by {margin.percent()}"
            notes.append(text + ("." if margin.clear else ", which is within noise."))
    busy, busy_sentence = _busy_words(ranked, tied)
    if busy_sentence:
        notes.append(busy_sentence)
    if bool(_accuracy_unknown(ranked.iloc[[0]]).iloc[0]):
        notes.append(Sentence(f"Accuracy not measured: the {best['precision']} variant's accuracy was never checked "
                              f"(measure it with {setting('data', 'data')} before relying on it)."))
    rest = ranked.iloc[1:1 + max(0, runners_up)]
    reason = _reason(best, ranked, top, objective, constraints, len(allowed), len(ok), len(equivalent))
    if notes:
        reason = joined([reason, *notes])
    return Recommendation(best=_record(best), reason=reason, runners_up=[_record(r) for _, r in rest.iterrows()],
                          objective=objective, constraints=constraints, candidates=len(allowed),
                          tied=[_record(ranked.loc[i]) for i in equivalent] if len(equivalent) > 1 else [],
                          margin=margin,
                          notes=notes, busy=busy, busy_sentence=busy_sentence)


def is_busy(run) -> bool:
    """The run was measured on a busy machine (its point, or any of its rounds, says `busy`)."""
    v = run.get("busy")
    return v is not None and not _isnan(v) and bool(v) and v in (True, 1)


def _busy_words(ranked: pd.DataFrame, tied: list) -> tuple[list[str], str | None]:
    """The compared runs measured on a busy machine, and a sentence saying what the pick rests on:
    a busy pick or tie may read faster or slower than it is, and a busy runner may be the true best."""
    flagged = [i for i in ranked.index if is_busy(ranked.loc[i])]
    if not flagged:
        return [], None
    best = ranked.index[0]
    parts = []
    if best in flagged:
        parts.append(f"the pick, {run_name(ranked.loc[best])}, was measured on a busy machine (other processes "
                     f"used its cores)")
    ties = [i for i in flagged if i in tied and i != best]
    if ties:
        parts.append(f"{counted(len(ties), 'run')} it is tied with {were(len(ties))} too "
                     f"({', '.join(run_name(ranked.loc[i]) for i in ties)})")
    others = [i for i in flagged if i not in tied and i != best]
    if others:
        parts.append(f"{counted(len(others), 'other run')} it was compared with {were(len(others))} measured on a busy "
                     f"machine and may be faster than {'it reads' if len(others) == 1 else 'they read'} "
                     f"({', '.join(run_name(ranked.loc[i]) for i in others[:3])}"
                     f"{', ...' if len(others) > 3 else ''})")
    text = "; ".join(parts)
    sentence = Sentence(f"This pick rests on points measured on a busy machine: {text}; measure them again on a "
                        f"quiet machine ({setting('remeasure_busy', 'remeasure_busy=True')}) before relying on it.")
    return [run_name(ranked.loc[i]) for i in flagged], sentence


def _accuracy_unknown(df: pd.DataFrame) -> pd.Series:
    """Runs of a reduced precision whose accuracy was never measured."""
    reduced = df["precision"].astype(str).str.lower() != baseline()
    return reduced & _col(df, "accuracy").isna() & _col(df, "accuracy_drop").isna()


def _interval(run, objective) -> tuple[float, float] | None:
    """The 95% interval of a run's objective value, when it was measured in rounds."""
    name = "latency_ms_p99" if objective == "latency" else "throughput"
    lo, hi = _float(run.get(f"{name}_ci_low")), _float(run.get(f"{name}_ci_high"))
    if lo is None or hi is None:
        return None
    if objective == "throughput_per_core":
        cores = _float(run.get("cores_used"))
        if not cores:
            return None
        lo, hi = lo / cores, hi / cores
    return lo, hi


def _tied(ranked: pd.DataFrame, objective: str) -> list:
    """Index of the runs whose interval overlaps the best's (the best first); [best] without intervals."""
    head = ranked.index[0]
    top = _interval(ranked.iloc[0], objective)
    if top is None:
        return [head]
    out = [head]
    for i, run in ranked.iloc[1:].iterrows():
        iv = _interval(run, objective)
        if iv is not None and iv[0] <= top[1] and top[0] <= iv[1]:
            out.append(i)
    return out


def tied_with_best(df: pd.DataFrame, objective: str = "throughput") -> pd.Series:
    """Per run: "best" for the best successful run of `objective`, "yes" for runs whose 95%
    interval overlaps the best's (tied within noise), "no" for runs with an interval beyond it,
    and None where nothing is known (no interval, or not ok)."""
    out = pd.Series([None] * len(df), index=df.index, dtype=object)
    ok = successful(df)
    if ok.empty:
        return out
    ok = ok[ok["throughput"].notna()] if objective != "latency" else ok[ok["latency_ms_p99"].notna()]
    if ok.empty:
        return out
    if objective == "throughput_per_core" and "throughput_per_core" not in ok.columns:
        objective = "throughput"
    ranked = rank(ok, objective)
    tied = set(_tied(ranked, objective))
    top = _interval(ranked.iloc[0], objective)
    for i, run in ranked.iterrows():
        if i == ranked.index[0]:
            out[i] = "best"
        elif i in tied:
            out[i] = "yes"
        elif top is not None and _interval(run, objective) is not None:
            out[i] = "no"
    return out


def _simplicity(run, objective) -> tuple:
    """Sort key among tied runs: fewer cores, runtime defaults (auto threads, no pinning, auto
    streams, no hint), then the better other metric."""
    g = run.get
    other = _float(g("latency_ms_p99")) if objective != "latency" else -(_float(g("throughput")) or 0.0)
    return (_float(g("cores_used")) or math.inf, _float(g("threads")) is not None, bool(_float(g("n_cores"))),
            _float(g("streams")) is not None, isinstance(g("hint"), str) and bool(g("hint")),
            other if other is not None else math.inf)


def _has_rounds(run) -> bool:
    v = run.get("round_throughput")
    return isinstance(v, (list, tuple)) and len(v) > 1


def _margin(best, other, objective) -> Ratio | None:
    """How much better `best` is than `other` on the objective, paired by round when possible."""
    if not _has_rounds(other):
        return None
    ids_b, ids_o = best.get("round_ids"), other.get("round_ids")
    if objective == "latency":  # lower is better: other's p99 over best's
        return ratio(best["round_p99"], other["round_p99"], ids_b, ids_o)
    r = ratio(other["round_throughput"], best["round_throughput"], ids_o, ids_b)
    if r is not None and objective == "throughput_per_core":
        cb, co = _float(best.get("cores_used")) or 1.0, _float(other.get("cores_used")) or 1.0
        f = co / cb
        r = Ratio(r.ratio * f, r.low * f, r.high * f, r.n, r.paired)
    return r



def find_run(df: pd.DataFrame, key: str) -> pd.Series:
    """The run with this key, or a unique key prefix; a WorkbenchError names the choices otherwise."""
    key = str(key).strip()
    hits = df[df["key"].astype(str).str.startswith(key)] if key else df.iloc[0:0]
    if len(hits) == 1:
        return hits.iloc[0]
    if len(hits) > 1:
        raise ConfigError(f"Run key '{key}' matches {len(hits)} runs; give more characters.")
    sample = ", ".join(df["key"].astype(str).head(5))
    raise ConfigError(f"No run with key '{key}' in this study" + (f"; keys look like {sample}." if sample else "."))


# ---------------------------------------------------------------- helpers


def _reason(best, ranked, top, objective, constraints, n_allowed, n_ok, n_equivalent) -> str:
    """One sentence built from the figures it cites: the pick's value, the best value when the pick is
    not it, and the first run it is truly ahead of."""
    words = OBJECTIVE_WORDS[objective]
    # "the only successful run" rather than "all 1 successful runs": a count of one is no comparison.
    if not constraints.is_empty():
        pool = (f"as the only successful run that meets {constraints.describe()}" if n_allowed == 1
                else f"of the {n_allowed} successful runs that meet {constraints.describe()}")
    else:
        pool = "as the only successful run" if n_ok == 1 else f"of all {n_ok} successful runs"
    value = _objective_value(best, objective)
    other = (f"its p99 latency is {_num(best['latency_ms_p99'])} ms" if objective != "latency"
             else f"it serves {_num(best['throughput'])} samples/s")
    if best["key"] == top["key"] or _objective_number(top, objective) == _objective_number(best, objective):
        text = f"{run_name(best)} has {words} ({value}) {pool}; {other}"
    else:
        text = (f"{run_name(best)} gives {value}, equivalent to {words} {pool} ({run_name(top)}, "
                f"{_objective_value(top, objective)}), and is the simplest of the {n_equivalent} equivalent runs; "
                f"{other}")
    mine = _objective_number(best, objective)
    lower = objective == "latency"
    for _, run in ranked.iterrows():
        v = _objective_number(run, objective)
        if run["key"] != best["key"] and v is not None and mine is not None and (v > mine if lower else v < mine):
            text += f", ahead of {run_name(run)} ({_objective_value(run, objective)})"
            break
    return text + "."


def _objective_number(run, objective) -> float | None:
    name = {"latency": "latency_ms_p99", "throughput_per_core": "throughput_per_core"}.get(objective, "throughput")
    return _float(run.get(name))


def _equivalent(top, other, objective, margin: float) -> bool:
    """The paired ratio of the two runs has its 95% interval within +-margin."""
    if not (_has_rounds(top) and _has_rounds(other)):
        return False
    r = _margin(top, other, objective)
    return r is not None and r.n > 1 and r.low >= 1 / (1 + margin) and r.high <= 1 + margin


def _lengths(df: pd.DataFrame) -> list[int]:
    if "seq_len" not in df.columns:
        return []
    ok = successful(df)
    return sorted({int(v) for v in _col(ok, "seq_len").dropna()})


def _per_length(df: pd.DataFrame, lengths: list[int], **kw) -> Recommendation:
    """One recommendation per sequence length; the longest is returned, holding them all."""
    per: dict[int, Recommendation] = {}
    failures: list[str] = []
    for n in lengths:
        try:
            per[n] = recommend(df, seq_len=n, **kw)
            per[n].seq_len = n
        except NoRunMeetsConstraints as e:
            failures.append(f"at length {n}: {e}")
    if not per:
        raise NoRunMeetsConstraints(" ".join(failures))
    main = per[max(per)]
    note = ("Sequence length is the workload, not a setting: runs at different lengths are not ranked against "
            "each other; one recommendation per length: "
            + "; ".join(f"length {n}: {run_name(r.best)} ({_objective_value(r.best, r.objective)})"
                        for n, r in per.items())
            + f". The figures above are for the longest, {max(per)}; choose a length "
              f"({setting('at_seq_len', 'Sequence length')}), or weigh a mix ({setting('seq_mix', 'Sequence-length mix')}).")
    if failures:
        note += " No run meets the constraints " + "; ".join(failures) + "."
    main.notes.append(Sentence(note))
    main.reason = joined([main.reason, note])
    main.per_length = per
    return main


def _without_failed_guard(ok: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The runs whose accuracy guard did not fail, and a sentence per precision left out, saying why."""
    if "accuracy_guard" not in ok.columns:
        return ok, []
    failed = guard_failed_runs(ok)
    notes = []
    for prec, group in ok[failed].groupby(ok.loc[failed, "precision"].astype(str), sort=True):
        why = next((str(v) for v in group.get("accuracy_guard_note", pd.Series(dtype=object))
                    if isinstance(v, str) and v), "they failed the accuracy guard")
        notes.append(f"{prec.upper()} runs were left out ({len(group)}): {why.rstrip('.')}.")
    return ok[~failed], notes


def _objective_value(run, objective) -> str:
    if objective == "latency":
        return f"p99 {_num(run['latency_ms_p99'])} ms"
    if objective == "throughput_per_core":
        return f"{_num(run['throughput_per_core'])} samples/s per core"
    return f"{_num(run['throughput'])} samples/s"


def _nothing_meets(ok: pd.DataFrame, constraints: Constraints) -> str:
    scored = []
    for _, r in ok.iterrows():
        misses = constraints.misses(r)
        scored.append((sum(min(m[1], 1e9) for m in misses), len(misses), r, misses))
    scored.sort(key=lambda t: (t[0], t[1]))
    _, _, run, misses = scored[0]
    what = "; ".join(m[0] for m in misses)
    return (f"No run meets {constraints.describe()}. The closest is {run_name(run)} (key {run['key']}), "
            f"which misses {what}.")


def _miss(name: str, value, limit, unit: str) -> tuple[str, float]:
    u = f" {unit}" if unit else ""
    if value is None:
        return f"the {name} limit: its {name} was not recorded", math.inf
    return f"the {name} limit: {_num(value)}{u} against {_num(limit)}{u}", (value - limit) / limit if limit else math.inf


def _record(row: pd.Series) -> dict:
    return {k: (None if _isnan(v) else v) for k, v in row.to_dict().items()}


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    if name not in df.columns:
        return pd.Series(np.nan, index=df.index, dtype=float)
    return pd.to_numeric(df[name], errors="coerce").astype(float)


def _positive(v, name):
    if v is not None and (not _is_number(v) or v <= 0):
        raise ConfigError(f"{name} must be a positive number; got {v!r}.")


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)


def _float(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _int(v) -> int | str:
    f = _float(v)
    return int(f) if f is not None else "?"


def _isnan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _num(v) -> str:
    """Numbers for sentences: 3 significant digits, thousands separated."""
    f = _float(v)
    if f is None:
        return "n/a"
    if abs(f) >= 1000:
        return f"{f:,.0f}"
    if abs(f) >= 100:
        return f"{f:.0f}"
    return f"{f:.3g}"
