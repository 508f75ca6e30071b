"""Compare two configurations of one model: B over A, with its interval and the stopping rule's answer.

The design follows from the configurations: side by side in one worker when they differ only in
what a compiled model or session is given (`wb_core.sweep.paired`), else interleaved fresh rounds,
each in its own worker; the answer says which, and why.
"""

from __future__ import annotations

import math
import time

from wb_core.config import InputOptions, MeasureSettings, RunConfig, SweepSpec
from wb_core.errors import ConfigError

WEEK_S = 7 * 24 * 3600.0  # the longest comparison budget taken, as for every other time budget


def check_margin(margin) -> None:
    """The stopping rule's equivalence band: a fraction above 0 and below 1 (0.03: +-3%); None: the default."""
    if margin is None:
        return
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 < margin < 1:
        raise ConfigError(f"The margin (the equivalence band, as a fraction such as 0.03 for +-3%) must be above 0 "
                          f"and below 1; got {margin!r}.")


def check_max_s(max_s) -> None:
    """Seconds a side-by-side comparison may take: above 0 and at most a week; None: the default."""
    if max_s is None:
        return
    if isinstance(max_s, bool) or not isinstance(max_s, (int, float)) or not 0 < max_s <= WEEK_S:
        raise ConfigError(f"The comparison's time (max_s) must be more than 0 seconds and at most a week; "
                          f"got {max_s!r}.")


def compare_configs(model, a: RunConfig, b: RunConfig, *, db, study: str, objective: str = "throughput",
                    max_s: float = 30.0, margin: float | None = None, design: str = "auto", rounds: int = 5,
                    settings: MeasureSettings | None = None, inputs: InputOptions | None = None,
                    precision_options=None, progress: bool = False) -> dict:
    """See `wb_core.api.compare_configs`."""
    from wb_core.stats import LEVEL, decide, ratio
    from wb_core.store import Store
    from wb_core.sweep.local import run_sweep
    from wb_core.sweep.paired import MARGIN, PRECISION, run_paired, worker_conflict

    if design not in ("auto", "paired", "rounds"):
        raise ConfigError(f"The comparison design must be one of auto, paired, rounds; got {design!r}.")
    for label, cfg in (("a", a), ("b", b)):
        if not isinstance(cfg, RunConfig):
            raise ConfigError(f"Configuration {label} to compare must be a RunConfig; got a {type(cfg).__name__}.")
    check_margin(margin)
    check_max_s(max_s)
    if a.key == b.key:
        raise ConfigError("The two configurations to compare are one and the same; give two that differ.")
    margin = margin or MARGIN
    settings = settings or MeasureSettings()
    inputs = inputs or InputOptions()
    metric = "latency_ms_p99" if objective == "latency" else "throughput"
    why = "fresh rounds were asked for" if design == "rounds" else worker_conflict(a, b)
    t0 = time.monotonic()
    out = {"study": study, "a": a, "b": b, "objective": objective}
    if why is None:
        paired = run_paired(model, db, study, [a, b], [(0, 1)], settings=settings, inputs=inputs,
                            precision=precision_options, progress=progress, metric=metric, margin=margin, max_s=max_s)
        why = paired.fallback
        if why is None:
            d = paired.decisions.get((0, 1))
            if objective == "latency" and d is not None:  # lower is better: say how many times better B is
                d = decide([-x for x in _logs(paired, metric)], margin, paired.looks, PRECISION)
            out.update(design="paired", decision=d, ratio=d.ratio if d else None, outcome=d.outcome if d else None,
                       cycles=len(paired.cycles), busy_cycles=paired.busy_cycles, design_sentence=str(paired.sentence()),
                       failed=paired.failed, elapsed_s=time.monotonic() - t0)
            out["sentence"] = _sentence(out, d)
            return out
    run_sweep(model, SweepSpec(repeats=rounds), db, study, settings=settings, inputs=inputs, configs=[a, b],
              progress=progress, precision=precision_options)
    with Store(db, readonly=True) as store:
        pa, pb = store.points(study, [a.key]).get(a.key), store.points(study, [b.key]).get(b.key)
    ma, mb = (pa or {}).get("metrics") or {}, (pb or {}).get("metrics") or {}
    name = "round_p99" if objective == "latency" else "round_throughput"
    va, vb = ma.get(name) or [], mb.get(name) or []
    r = ratio(vb, va, mb.get("round_ids"), ma.get("round_ids")) if objective == "latency" else \
        ratio(va, vb, ma.get("round_ids"), mb.get("round_ids"))
    common = sorted(set(ma.get("round_ids") or []) & set(mb.get("round_ids") or []))
    ra, rb = dict(zip(ma.get("round_ids") or [], va)), dict(zip(mb.get("round_ids") or [], vb))
    logs = [math.log(rb[i] / ra[i]) for i in common if ra.get(i) and rb.get(i)]
    d = decide([-x for x in logs] if objective == "latency" else logs, margin) if len(logs) >= 2 else None
    out.update(design="rounds", decision=d, ratio=r, outcome=d.outcome if d else None, cycles=len(common),
               design_sentence=f"In {len(common)} interleaved fresh rounds, each in its own worker: {why}.",
               failed=None if r else "no round of both ran", elapsed_s=time.monotonic() - t0, level=LEVEL)
    out["sentence"] = _sentence(out, d)
    return out


def _logs(paired, metric: str) -> list[float]:
    from wb_core.sweep.paired import judge, log_ratios

    _, quiet = judge(paired.cycles, [], metric, 1.0, 1, None)
    return log_ratios(paired.cycles, 0, 1, metric, quiet_only=quiet)


def _sentence(out: dict, d) -> str:
    what = "B's p99 latency, as times better than A's" if out["objective"] == "latency" else "B's throughput over A's"
    said = d.sentence(what[0].upper() + what[1:]) if d is not None else f"{what}: nothing to compare."
    return f"{said} {out['design_sentence']}"
