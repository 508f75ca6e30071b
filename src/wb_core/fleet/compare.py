"""Host types side by side: the best configuration of each, throughput per core, cost per inference.

Works on a fleet study's results (`load_results`, with `hardware_fingerprint` per run) and the
hosts the store recorded (`Store.hosts`); it never measures.

Cost per million inferences of a host type, given its price per host-hour:

    host_throughput   = throughput x copies,  copies = max(1, usable CPUs // cores the run used)
    cost_per_million  = price_per_hour / (host_throughput x 3600) x 1e6

`copies` assumes the host is filled with independent copies of the configuration (as a
deployment would); memory bandwidth can make that optimistic, so measure `--instances` runs when
the difference matters.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from wb_core.analysis.recommend import Constraints, NoRunMeetsConstraints, recommend, with_efficiency
from wb_core.analysis.words import run_name
from wb_core.errors import ConfigError, WorkbenchError, setting

COMPARE_COLUMNS = ("hardware_fingerprint", "cpu_model", "hosts", "usable_cpus", "best_key", "best_config",
                   "throughput", "latency_ms_p99", "cores_used", "throughput_per_core", "copies_per_host",
                   "host_throughput", "price_per_hour", "cost_per_million", "runs_ok", "runs_failed", "note")


def host_types(hosts: list[dict]) -> pd.DataFrame:
    """One row per hardware type from the recorded hosts: its CPU, core counts, flags and host names."""
    rows: dict[str, dict] = {}
    for h in hosts:
        hw = h.get("hardware") or {}
        row = rows.setdefault(h["hardware_fingerprint"], {
            "hardware_fingerprint": h["hardware_fingerprint"], "cpu_model": hw.get("cpu_model"),
            "physical_cores": hw.get("physical_cores"), "usable_cpus": len(hw.get("available_cpus") or []) or None,
            "flags": " ".join(k for k, v in (hw.get("flags") or {}).items() if v), "hosts": []})
        row["hosts"].append(h["name"])
    out = pd.DataFrame(list(rows.values()))
    if not out.empty:
        out["hosts"] = out["hosts"].map(", ".join)
    return out


def parse_prices(items: list[str] | dict | None) -> dict[str, float]:
    """`["host-a=1.20", "d73c5ee9ed5c=0.8"]` (a host name, a hardware type or a CPU model) -> {name: USD/h}."""
    if not items:
        return {}
    if isinstance(items, dict):
        pairs = items.items()
    else:
        pairs = []
        for item in items:
            name, eq, value = str(item).rpartition("=")
            if not eq or not name.strip():
                raise ConfigError(f"A price looks like HOST_OR_TYPE=USD_PER_HOUR, e.g. host-a=1.20; got '{item}'.")
            pairs.append((name.strip(), value))
    out = {}
    for name, value in pairs:
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"The price for '{name}' must be a number of dollars per host-hour; got {value!r}.") from None
        if not v > 0 or math.isinf(v):
            raise ConfigError(f"The price for '{name}' must be a positive number; got {value!r}.")
        out[name] = v
    return out


def price_for(fingerprint: str, hosts: list[str], cpu_model: str | None, prices: dict[str, float]) -> float | None:
    """A type's price: given for the type itself, else for one of its hosts, else for its CPU model."""
    for name in (fingerprint, *hosts, cpu_model):
        if name in prices:
            return prices[name]
    return None


def cost_per_million(throughput: float | None, price_per_hour: float | None) -> float | None:
    if not price_per_hour or not throughput or throughput <= 0:
        return None
    return price_per_hour / (throughput * 3600) * 1e6


def compare_host_types(df: pd.DataFrame, hosts: list[dict], constraints: Constraints | None = None,
                       objective: str = "throughput", prices: dict[str, float] | None = None,
                       flops_per_sample: float | None = None) -> pd.DataFrame:
    """One row per hardware type: its best run under the constraints and what it costs.

    Types whose runs all fail, or that meet no constraint, get a row with a `note` saying why.
    """
    if "hardware_fingerprint" not in df.columns or df["hardware_fingerprint"].isna().all():
        raise WorkbenchError("This study was not measured on a fleet (its runs name no hardware type); "
                             f"profile on a cluster ({setting('cluster', 'Cluster')}) to compare hosts.")
    prices = prices or {}
    types = host_types(hosts).set_index("hardware_fingerprint") if hosts else pd.DataFrame()
    hw_of = {}
    for h in hosts:
        hw_of.setdefault(h["hardware_fingerprint"], h.get("hardware"))
    known = set(types.index) | set(df["hardware_fingerprint"].dropna())
    names = set(known) | {h["name"] for h in hosts} | {(h.get("hardware") or {}).get("cpu_model") for h in hosts}
    unused = [p for p in prices if p not in names]
    if unused:
        raise ConfigError(f"No host, hardware type or CPU model named {', '.join(unused)} in this study.")
    rows = []
    for fp in sorted(known):
        sub = df[df["hardware_fingerprint"] == fp]
        info = types.loc[fp].to_dict() if fp in types.index else {}
        host_names = [n for n in str(info.get("hosts") or "").split(", ") if n]
        row = {"hardware_fingerprint": fp, "cpu_model": info.get("cpu_model"), "hosts": ", ".join(host_names),
               "usable_cpus": info.get("usable_cpus"), "runs_ok": int((sub["status"] == "ok").sum()),
               "runs_failed": int((sub["status"] == "failed").sum()),
               "price_per_hour": price_for(fp, host_names, info.get("cpu_model"), prices), "note": None}
        try:
            eff = with_efficiency(sub, hw_of.get(fp), flops_per_sample)
            rec = recommend(eff, constraints, objective, runners_up=0, hardware=hw_of.get(fp))
        except (NoRunMeetsConstraints, WorkbenchError) as e:
            row["note"] = str(e)
            rows.append(row)
            continue
        best = rec.best
        used = best.get("cores_used") or None
        usable = row["usable_cpus"] or used or 1
        copies = max(1, int(usable // used)) if used else 1
        host_thr = (best.get("throughput") or 0) * copies
        row.update({"best_key": best["key"], "best_config": run_name(best), "throughput": best.get("throughput"),
                    "latency_ms_p99": best.get("latency_ms_p99"), "cores_used": used,
                    "throughput_per_core": best.get("throughput_per_core"), "copies_per_host": copies,
                    "host_throughput": host_thr, "cost_per_million": cost_per_million(host_thr, row["price_per_hour"])})
        rows.append(row)
    out = pd.DataFrame(rows)
    for col in COMPARE_COLUMNS:
        if col not in out.columns:
            out[col] = None
    return out[list(COMPARE_COLUMNS)]


def config_by_host_type(df: pd.DataFrame, metric: str = "throughput") -> pd.DataFrame:
    """Every configuration (rows) measured on every hardware type (columns): one metric side by side."""
    ok = df[(df["status"] == "ok") & df["hardware_fingerprint"].notna()]
    if ok.empty:
        return pd.DataFrame()
    labels = ok.apply(run_name, axis=1)
    return (ok.assign(config=labels).pivot_table(index="config", columns="hardware_fingerprint", values=metric,
                                                 aggfunc="first").sort_index())


def load_comparison(db: str | Path, study: str, constraints: Constraints | None = None, objective: str = "throughput",
                    prices: dict[str, float] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the comparison per hardware type, the study's results) read from a store."""
    from wb_core.analysis.study_model import study_flops
    from wb_core.store import Store

    with Store(db, readonly=True) as store:
        info = store.get_study(study)
        df = store.to_frame(study)
        hosts = store.hosts(study)
    flops = study_flops(info) if not df.empty else None
    return compare_host_types(df, hosts, constraints, objective, prices, flops), df


def select_host_type(df: pd.DataFrame, hosts: list[dict], host_type: str) -> tuple[pd.DataFrame, str, dict | None]:
    """The runs of one hardware type (named by its fingerprint, a unique prefix, or one of its hosts).

    Returns (those runs, the full fingerprint, that type's hardware dict).
    """
    fps = sorted(set(df.get("hardware_fingerprint", pd.Series(dtype=str)).dropna()) | {h["hardware_fingerprint"]
                                                                                        for h in hosts})
    by_host = {h["name"]: h["hardware_fingerprint"] for h in hosts}
    wanted = str(host_type).strip()
    hits = [by_host[wanted]] if wanted in by_host else [fp for fp in fps if fp.startswith(wanted)] if wanted else []
    if len(hits) != 1:
        what = "matches several" if hits else "matches none"
        raise ConfigError(f"Host type '{host_type}' {what} of this study's hardware types "
                          f"({', '.join(fps) or 'none: it was not measured on a fleet'}); give a type or a host name.")
    fp = hits[0]
    hardware = next((h.get("hardware") for h in hosts if h["hardware_fingerprint"] == fp), None)
    return df[df["hardware_fingerprint"] == fp], fp, hardware
