"""What a sweep will do before it starts: how many measurements, how many are stored already,
and what in it a user should be warned about (threads or cores beyond the CPUs this process may use).

A dashboard shows this up front, so its progress starts at the points already measured and a
setting that will oversubscribe the CPUs is said in words before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from wb_core.config import SweepSpec, available_cpus

POINT_START_S = 1.5  # a worker's start, model load and compile per point, on a small OpenVINO model


@dataclass
class SweepPreview:
    """`total` measurements the sweep plans (rounds count one each), `done` of them stored already."""

    total: int
    done: int = 0
    configs: int = 0
    warnings: list[str] = field(default_factory=list)
    search_capped: bool = False  # a smart search: `total` is its budget, an upper bound

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.done)

    def estimated_s(self, seconds_per_point: float, warmup_s: float = 0.5) -> float:
        """About how long the measurements still to do take: each one's warm-up and measuring window
        and the start of the worker that measures it (POINT_START_S, a small OpenVINO model's; a
        TensorFlow worker takes seconds more, a large model longer)."""
        return self.remaining * (POINT_START_S + warmup_s + seconds_per_point)

    def in_words(self, seconds_per_point: float, warmup_s: float = 0.5) -> str:
        """"12 points to measure (4 stored already), about 2 minutes." """
        n = self.remaining
        if n == 0:
            return ("The one point of this sweep is stored already." if self.total == 1 else
                    f"All {self.total} points of this sweep are stored already.")
        s = self.estimated_s(seconds_per_point, warmup_s)
        took = f"about {max(1, round(s / 60))} minute{'s' if round(s / 60) > 1 else ''}" if s >= 90 else \
            f"about {max(5, 5 * round(s / 5)):.0f} seconds"
        stored = f" ({self.done} stored already)" if self.done else ""
        most = "at most " if self.search_capped else ""
        return f"{most}{n} point{'s' if n != 1 else ''} to measure{stored}, {took}."


def _cpus_word(n: int) -> str:
    return f"{n} CPU{'s' if n != 1 else ''}"


def oversubscription_warnings(spec: SweepSpec, cpus: list[int] | None = None) -> list[str]:
    """One sentence per setting that asks for more threads or cores than this process may use."""
    n = len(cpus if cpus is not None else available_cpus())
    here = f"the {_cpus_word(n)} here"
    out = []
    for name, values in (("Threads", spec.threads), ("Inter-op threads", spec.inter_op_threads),
                         ("Streams", spec.streams)):
        for v in values:
            if v and v > n:
                out.append(f"{name} = {v} is more than {here}: those points will oversubscribe the CPUs and "
                           f"measure contention, not the model.")
    for inst in spec.instances:
        for k in spec.cores_per_instance:
            if inst > 1 and k and inst * k > n:
                out.append(f"{inst} instances × {k} cores = {inst * k} cores, more than {here}.")
        if inst > n:
            out.append(f"{inst} instances is more than {here}: they will share CPUs.")
    for inst in spec.instances:
        for t in spec.threads:
            if inst > 1 and t and inst * t > n and t <= n:
                out.append(f"{inst} instances × {t} threads = {inst * t} threads, more than {here}: "
                           f"those points will oversubscribe.")
    return list(dict.fromkeys(out))


def preview_sweep(spec: SweepSpec, db: str | Path | None = None, study: str | None = None,
                  search: str = "grid", budget: int | None = None) -> SweepPreview:
    """How many measurements `spec` plans in `study` and how many of them `db` already holds.

    A smart search plans at most `budget` configurations. With `spec.repeats` > 1 every round is
    one measurement; a configuration stored earlier as a single measurement counts as its first round.
    """
    configs = spec.expand()
    keys = [c.key for c in configs]
    repeats = max(1, int(getattr(spec, "repeats", 1) or 1))
    done_keys: set[str] = set()
    rounds: dict[str, set[int]] = {}
    if db and study and Path(db).exists():
        from wb_core.store import Store

        with Store(db, readonly=True) as s:
            if s.get_study(study) is not None:
                done_keys = s.done_keys(study) & set(keys)
                if repeats > 1:
                    for r in s.rounds(study):
                        if r["status"] in ("ok", "skipped"):
                            rounds.setdefault(r["key"], set()).add(int(r["round"]))
    if repeats > 1:
        done = sum(min(repeats, len(rounds.get(k, ())) or (1 if k in done_keys else 0)) for k in keys)
        total = len(keys) * repeats
    else:
        done, total = len(done_keys), len(keys)
    if search != "grid":
        cap = min(budget or len(keys), len(keys)) * repeats
        total, done = cap, min(done, cap)
    return SweepPreview(total=total, done=done, configs=len(keys), warnings=oversubscription_warnings(spec),
                        search_capped=search != "grid")
