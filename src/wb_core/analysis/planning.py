"""Core allocation and capacity planning from measured points.

`plan_allocation`: from the throughput one instance reaches on k pinned cores, the split of a
machine's cores into instances x cores per instance with the most total throughput. Core counts
beyond what was measured are extrapolated (linear per core from the largest measured k) and
labelled as such.

`capacity`: from a target request rate and a p99 target, how many instances (and replicas of a
given machine size) serve it, and the CPU requests of each.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

import pandas as pd

from wb_core.axes import with_role
from wb_core.errors import ConfigError, WorkbenchError, counted, setting
from wb_core.limits import within_p99


@dataclass
class Allocation:
    instances: int
    cores_per_instance: int
    predicted_throughput: float
    per_instance_throughput: float
    extrapolated: bool
    source_key: str | None
    config: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        tag = " (extrapolated from fewer cores)" if self.extrapolated else ""
        return (f"{counted(self.instances, 'instance')} x {counted(self.cores_per_instance, 'core')}: "
                f"{self.predicted_throughput:,.1f} samples/s predicted{tag}")


def single_instance_curve(df: pd.DataFrame, p99_ms: float | None = None) -> pd.DataFrame:
    """Best single-instance throughput per number of pinned cores (ok, closed-loop points only)."""
    ok = df[(df.status == "ok") & (df.instances.fillna(1) == 1)]
    if "rate" in ok:
        ok = ok[ok.rate.isna()]
    ok = ok[ok.n_cores.notna()] if "n_cores" in ok else ok.iloc[0:0]
    if p99_ms is not None:
        ok = ok[[within_p99(v, p99_ms) for v in ok.latency_ms_p99]]
    if ok.empty:
        raise WorkbenchError(f"No pinned single-instance points to plan from; profile with {setting('cores', 'Cores')} "
                             "first1,first2,... "
                             + ("under the p99 target." if p99_ms is not None else "."))
    best = ok.sort_values("throughput", ascending=False).groupby(ok.n_cores.astype(int)).head(1)
    best = best.assign(k=best.n_cores.astype(int)).set_index("k").sort_index()
    return best


def plan_allocation(df: pd.DataFrame, machine_cores: int | None = None, p99_ms: float | None = None,
                    top: int = 5) -> list[Allocation]:
    """Candidate splits of `machine_cores` (default: this machine's) ranked by predicted throughput."""
    from wb_core.hardware import detect

    check_plan_inputs(machine_cores, p99_ms)
    machine_cores = machine_cores or len(detect().available_cpus)
    curve = single_instance_curve(df, p99_ms)
    k_max = int(curve.index.max())
    per_core_at_max = curve.loc[k_max, "throughput"] / k_max
    out = []
    for k in range(1, machine_cores + 1):
        n = machine_cores // k
        if k in curve.index:
            thr, extra, row = float(curve.loc[k, "throughput"]), False, curve.loc[k]
        elif k > k_max:
            thr, extra, row = per_core_at_max * k, True, curve.loc[k_max]
        else:
            continue  # an unmeasured size inside the measured range: measure it rather than guess
        out.append(Allocation(instances=n, cores_per_instance=k, predicted_throughput=n * thr,
                              per_instance_throughput=thr, extrapolated=extra, source_key=row["key"],
                              config=_config(row)))
    out.sort(key=lambda a: a.predicted_throughput, reverse=True)
    return out[:top]


def _config(row) -> dict:
    """The settings of the point a plan comes from: every axis with the "identity" role, as plain values
    (placement aside: the plan sets instances, cores per instance and cores itself)."""
    return {c: _plain(row.get(c)) for c in with_role("identity") if c not in PLACEMENT}


# What a plan decides itself: how many instances, each on how many cores, pinned where.
PLACEMENT = ("instances", "cores_per_instance", "cores")


def allocation_spec(alloc: Allocation) -> dict:
    """SweepSpec fields that run an allocation: the source point's every setting (each axis named by its
    SweepSpec field; unset ones as the runtime's choice), with the plan's instances on disjoint cores."""
    from wb_core.axes import axis

    out = {}
    for name, value in alloc.config.items():
        a = axis(name)
        if isinstance(value, float) and value.is_integer():  # a count read back from a results frame
            value = int(value)
        out[a.spec] = [a.default if value is None else value]
    out.update(instances=[alloc.instances], cores_per_instance=[alloc.cores_per_instance],
               cores=f"first{alloc.instances * alloc.cores_per_instance}")
    return out


def verify_allocation(model, alloc: Allocation, db, study: str, settings=None) -> dict:
    """Run the allocation for real (instances started together on disjoint cores)."""
    from wb_core.config import SweepSpec
    from wb_core.store import load_results
    from wb_core.sweep.local import run_sweep

    spec = SweepSpec(**allocation_spec(alloc))
    run_sweep(model, spec, db, study, settings=settings)
    df = load_results(db, study)
    keys = {cfg.key for cfg in spec.expand()}
    row = df[df.key.isin(keys)].iloc[-1]
    return {"measured_throughput": row.throughput, "predicted_throughput": alloc.predicted_throughput,
            "ratio": row.throughput / alloc.predicted_throughput if alloc.predicted_throughput else float("nan"),
            "status": row.status, "key": row.key}


@dataclass
class CapacityPlan:
    target_rate: float
    p99_ms: float | None  # None: planned without a latency limit
    per_instance_rate: float
    instances: int
    cores_per_instance: int
    instances_per_machine: int
    replicas: int
    cpu_request: int
    headroom: float
    source_key: str
    basis: str
    config: dict = field(default_factory=dict)
    served: bool = False  # planned from a serve check's served figures, not in-process ones

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def instances_per_replica(self) -> int:
        """Instances each replica runs when the instances are spread evenly over the replicas."""
        return math.ceil(self.instances / self.replicas)

    @property
    def total_cpus(self) -> int:
        """CPUs requested in all: every replica alike, each instance pinned to its own cores."""
        return self.replicas * self.instances_per_replica * self.cores_per_instance

    def sentence(self) -> str:
        """The plan as one sentence a non-coder can act on (every face says it so)."""
        from wb_core.analysis.words import plural, rounded

        limit = f" with p99 ≤ {rounded(self.p99_ms)} ms" if self.p99_ms is not None else ""
        return (f"To serve {rounded(self.target_rate)} requests/s{limit} you need {plural(self.replicas, 'replica')} "
                f"of {plural(self.instances_per_replica, 'instance')} × {plural(self.cores_per_instance, 'core')}: "
                f"{plural(self.total_cpus, 'CPU')}.")

    def describe(self) -> str:
        """The plan in full: its sentence, then where its figures come from."""
        from wb_core.analysis.words import p99_limit_words

        return (f"{self.sentence()} {counted(self.instances, 'instance')} of {counted(self.cores_per_instance, 'core')} "
                f"serve{'s' if self.instances == 1 else ''} "
                f"{self.target_rate:g} req/s {p99_limit_words(self.p99_ms)} ({self.per_instance_rate:,.1f} req/s each, "
                f"{self.headroom:.0%} "
                f"headroom, {self.basis}); {counted(self.replicas, 'machine')} or replica"
                f"{'' if self.replicas == 1 else 's'} of {counted(self.instances_per_machine, 'instance')}; CPU request "
                f"= limit = {self.cpu_request} per instance.")


def same_run_columns() -> tuple[str, ...]:
    """What makes two points the same serving configuration: every axis with the "identity" role (a
    Poisson point differs only in `rate`, which has none) and the model file it ran."""
    return (*with_role("identity"), "variant_path")


def same_settings(df: pd.DataFrame, run_key: str) -> pd.DataFrame:
    """The points of `df` measured with the settings of run `run_key` (itself, and Poisson points of it)."""
    from wb_core.analysis.recommend import find_run

    row = find_run(df, run_key)
    mask = pd.Series(True, index=df.index)
    for col in same_run_columns():
        if col not in df:
            continue
        v = row.get(col)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            mask &= df[col].isna()
        else:
            mask &= df[col].astype(object) == v
    return df[mask | (df.key == row["key"])]


MAX_MACHINE_CORES = 65536  # the most cores a plan splits (every split is weighed, so it must stay countable)


def check_plan_inputs(machine_cores=None, p99_ms=None) -> None:
    """A core allocation's inputs finite and in range: cores [1, MAX_MACHINE_CORES], p99 (0, 1e7] ms or None."""
    from wb_core.config import check_number

    if machine_cores is not None:
        check_number(machine_cores, setting("machine_cores", "Machine cores"), 1, MAX_MACHINE_CORES, integer=True)
    if p99_ms is not None:
        check_number(p99_ms, setting("p99_ms", "The p99 target (ms)"), 0, 1e7, low_open=True)


def check_capacity_inputs(target_rate, p99_ms, headroom, machine_cores=None) -> None:
    """Capacity inputs finite and in range: rate (0, 1e9] req/s, p99 (0, 1e7] ms or None (no limit), headroom [0, 1),
    cores [1, 65536]."""
    from wb_core.config import check_number

    check_number(target_rate, "The target rate (requests/s)", 0, 1e9, low_open=True)
    if p99_ms is not None:
        check_number(p99_ms, "The p99 target (ms)", 0, 1e7, low_open=True)
    check_number(headroom, "Headroom", 0, 0.99)
    if machine_cores is not None:
        check_number(machine_cores, "Machine cores", 1, MAX_MACHINE_CORES, integer=True)


def capacity(df: pd.DataFrame, target_rate: float, p99_ms: float | None, headroom: float = 0.2,
             machine_cores: int | None = None, run_key: str | None = None,
             serve_checks: list[dict] | None = None) -> CapacityPlan:
    """Instances and replicas needed to serve `target_rate` requests/s with p99 under `p99_ms`
    (None: no latency limit, the fastest measured point per core).

    Prefers open-loop (Poisson) points, whose latency includes queueing; falls back to
    closed-loop points, whose rate at concurrency 1 is 1000 / mean latency (an optimistic bound,
    said so in `basis`).

    `run_key` plans from that run's settings only (the run itself and Poisson points measured
    with its settings): what an export needs, since its replicas must serve with the settings it
    exports. When those points cannot meet the target, it refuses and names the run the plan
    would otherwise come from.

    `serve_checks` (`wb_core.export.servecheck.load_serve_checks`): a run with a successful serve
    check is planned from its served figures (its rate and p99 scaled by served/in-process), and
    `basis` says so; other runs' figures are in-process upper bounds, and `basis` says that too,
    with the serving overhead this study measured, if any.
    """
    check_capacity_inputs(target_rate, p99_ms, headroom, machine_cores)
    if run_key is not None:
        from wb_core.analysis.recommend import find_run

        row = find_run(df, run_key)
        own = same_settings(df, run_key)
        try:
            return capacity(own, target_rate, p99_ms, headroom, machine_cores, serve_checks=serve_checks)
        except WorkbenchError as e:
            try:
                other = capacity(df, target_rate, p99_ms, headroom, machine_cores, serve_checks=serve_checks)
            except WorkbenchError:
                raise e from None
            p99 = row.get("latency_ms_p99")
            why = (f"keeps p99 at {p99:.3g} ms, above the {p99_ms:g} ms target" if p99 == p99 and p99 is not None
                   and p99_ms is not None and p99 > p99_ms else "has no point the capacity plan can use")
            if (row.get("instances") or 1) > 1:
                why = f"ran {int(row['instances'])} instances, and capacity is planned from single-instance points"
            raise WorkbenchError(f"Run {row['key']} {why}, so a capacity plan for it would come from another run "
                                 f"({other.source_key}); export that run ({setting('run', 'Run')} {other.source_key}), or relax "
                                 "the p99 target.") from None
    from wb_core.hardware import detect

    if target_rate <= 0:
        raise ConfigError(f"The target rate must be above 0 requests/s; got {target_rate}.")
    if p99_ms is not None and p99_ms <= 0:
        raise ConfigError(f"The p99 target must be above 0 ms; got {p99_ms}.")
    if not 0 <= headroom < 1:
        raise ConfigError(f"Headroom must be between 0 and 1; got {headroom}.")
    checks = _served_ratios(serve_checks)
    df = _with_served(df, checks)
    saturated = df.saturated.fillna(False) if "saturated" in df else pd.Series(False, index=df.index)
    limits = [p99_ms] * len(df)
    if p99_ms is None and "search" in df:
        # A rate search's probe counts as sustained only under the limit it was searched for, as the
        # search's own answer says: a probe over it was what the search turned down.
        limits = [search_limit(s) for s in df["search"]]
    kept = [within_p99(p, lim, s) for p, lim, s in zip(df.latency_ms_p99, limits, saturated)]
    ok = df[(df.status == "ok") & (df.instances.fillna(1) == 1) & pd.Series(kept, index=df.index, dtype=bool)]
    if ok.empty:
        if p99_ms is None:
            raise WorkbenchError("No successful single-instance point to plan from; profile the model first.")
        raise WorkbenchError(f"No measured point keeps p99 under {p99_ms:g} ms; relax the target or profile more.")
    ok = ok.copy()
    open_loop = ok[ok.rate.notna()] if "rate" in ok else ok.iloc[0:0]
    if not open_loop.empty:
        ok, basis = open_loop, "open-loop Poisson points"
        ok["req_rate"] = ok.apply(sustained_rate, axis=1)
    else:
        basis = "closed-loop points (optimistic: no queueing)"
        ok["req_rate"] = ok.throughput / ok.batch_size / ok.instances.fillna(1)
    cores = len(detect().available_cpus)
    ok["k"] = ok.n_cores.fillna(cores).astype(int) if "n_cores" in ok else cores
    ok["per_core"] = ok.req_rate / ok.k
    best = ok.sort_values("per_core", ascending=False).iloc[0]
    served = str(best.key) in checks
    if served:
        r = checks[str(best.key)]
        basis += (f"; served figures: a serve check of this run delivered {r['throughput']:.0%} of its in-process "
                  f"throughput" + (f" at {r['latency_ms_p99']:.2g}x its p99" if r.get("latency_ms_p99") else ""))
    else:
        basis += "; in-process figures, an upper bound on what a server delivers"
        if checks:
            k, r = next(iter(checks.items()))
            basis += f" (this study's serve check of run {k} delivered {r['throughput']:.0%} of in-process)"
        else:
            basis += " (no serve check of this study: run `wb serve-check` to measure the serving overhead)"
    usable = best.req_rate * (1 - headroom)
    n = max(1, math.ceil(target_rate / usable))
    k = int(best.k)
    per_machine = max(1, (machine_cores or cores) // k)
    return CapacityPlan(target_rate=target_rate, p99_ms=p99_ms, per_instance_rate=float(best.req_rate), instances=n,
                        cores_per_instance=k, instances_per_machine=per_machine,
                        replicas=math.ceil(n / per_machine), cpu_request=k, headroom=headroom,
                        source_key=str(best.key), basis=basis, served=served,
                        config=_config(best))


def search_limit(search) -> float | None:
    """The p99 limit (ms) a rate search's probe was measured under (its `search` column,
    "max-rate p99<10ms"), or None for a point of no rate search."""
    m = re.fullmatch(r"max-rate p99<([0-9.e+-]+)ms", str(search or ""))
    return float(m.group(1)) if m else None


def sustained_rate(point) -> float:
    """Requests/s an open-loop (Poisson) point sustains: the arrival rate it was offered, as the
    rate search reports its answer, or what it achieved when that fell short (random arrivals give
    a window a few more or fewer requests than offered; a surplus is luck, not capacity). A
    point served from a serve check keeps its served (scaled) achieved rate."""
    offered, achieved = point.get("rate"), point.get("achieved_rate")
    if offered is None or offered != offered:
        return float(achieved)
    scaled = point.get("served_scaled")
    if scaled is not None and scaled == scaled and bool(scaled):  # NaN: not a served run
        return float(achieved)
    return float(min(offered, achieved)) if achieved == achieved and achieved is not None else float(offered)


def within_noise(value: float, low: float | None, high: float | None) -> bool | None:
    """Whether `value` lies within a figure's 95% interval [low, high]: True or False when the
    interval was measured, None when there is none (one round), so no claim of noise can be made."""
    if any(v is None or v != v for v in (low, high)) or value is None or value != value:
        return None
    return bool(low <= value <= high)


def _served_ratios(checks: list[dict] | None) -> dict[str, dict]:
    """Run key -> served/in-process ratios of its newest successful serve check."""
    out: dict[str, dict] = {}
    for c in checks or []:  # newest first
        r = c.get("ratio") or {}
        if c.get("status") == "ok" and r.get("throughput") and c.get("run_key") not in out:
            out[str(c["run_key"])] = r
    return out


def _with_served(df: pd.DataFrame, checks: dict[str, dict]) -> pd.DataFrame:
    """The rows of runs with a serve check carry their served rate and p99 instead of the in-process ones."""
    if not checks or df.empty:
        return df
    df = df.copy()
    for key, r in checks.items():
        m = df.key == key
        if not m.any():
            continue
        for col in ("throughput", "achieved_rate"):
            if col in df:
                df.loc[m, col] = df.loc[m, col] * r["throughput"]
        df.loc[m, "served_scaled"] = True
        if r.get("latency_ms_p99"):
            df.loc[m, "latency_ms_p99"] = df.loc[m, "latency_ms_p99"] * r["latency_ms_p99"]
    return df


def _plain(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if hasattr(v, "item"):
        return v.item()
    return v
