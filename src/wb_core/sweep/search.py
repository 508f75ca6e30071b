"""Search strategies: generators that propose run configs and take the results back.

A strategy is a generator. It yields a list of RunConfigs to measure, receives the list of
Observations for them through `send`, and returns when it is done:

    strategy = smart(spec.expand(), Goal(p99_ms=5), budget=16)
    observations = drive(strategy, evaluate)      # evaluate(configs) -> [Observation]

`grid` proposes every configuration at once. `smart` climbs the grid instead of walking all of
it: a doubling ladder of batch sizes inside one worker's settings, then one step along each other
axis (threads, streams, cores, ...), moving while the gain is above a threshold and a p99 target
holds. Strategies never measure; `run_search` connects them to the runner.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from wb_core.axes import all_axes
from wb_core.config import RunConfig
from wb_core.errors import ConfigError
from wb_core.limits import within_p99
from wb_core.sweep.context import SweepSummary

SEARCHES = ("grid", "smart")
# The axes a climb moves along, from the axes table: those whose values have an order (a step goes
# to the next value up or down), then the categories, where a step may go to any other value. The
# workload's own dimensions (sequence length, shapes) are measured, never tuned.
ORDERED_AXES = tuple(a.name for a in all_axes() if a.searched and a.ordered)
AXES = ORDERED_AXES + tuple(a.name for a in all_axes() if a.searched and not a.ordered)
# Axes that pay off only together: one whose value an auto axis takes (OpenVINO streams run in
# parallel only with as many requests in flight), so a climb also tries moving both one step the same way.
COUPLED_AXES = tuple((a.name, a.fills_auto) for a in all_axes() if a.fills_auto)
# Below this relative gain a move is treated as noise and the climb stops.
DEFAULT_THRESHOLD = 0.03


@dataclass(frozen=True)
class Observation:
    """What a strategy learns about one config: its status, throughput and p99 latency."""

    config: RunConfig
    status: str  # ok, failed, skipped, missing (not measured: cancelled)
    throughput: float | None = None
    p99_ms: float | None = None
    # 95% intervals when the config was measured in rounds (None: one measurement, noise unknown)
    throughput_ci: tuple[float, float] | None = None
    p99_ci: tuple[float, float] | None = None

    @property
    def measured(self) -> bool:
        return self.status == "ok" and _finite(self.throughput) and _finite(self.p99_ms)


@dataclass(frozen=True)
class Goal:
    """What counts as better: the highest throughput (or lowest p99), with an optional p99 target."""

    objective: str = "throughput"  # or "latency"
    p99_ms: float | None = None

    def __post_init__(self):
        if self.objective not in ("throughput", "latency"):
            raise ConfigError(f"Unknown search objective '{self.objective}'; choose from throughput, latency.")
        if self.p99_ms is not None:
            from wb_core.config import check_p99_target

            check_p99_target(self.p99_ms)

    def feasible(self, o: Observation) -> bool:
        return o.measured and within_p99(o.p99_ms, self.p99_ms)

    def rank(self, o: Observation) -> tuple[int, float]:
        """Sort key, larger is better: failures < runs over the p99 target < runs that meet it."""
        if not o.measured:
            return (0, 0.0)
        if not self.feasible(o):
            return (1, -o.p99_ms)  # over the target: the closer to it, the better
        return (2, o.throughput if self.objective == "throughput" else -o.p99_ms)

    def gain(self, new: Observation, old: Observation | None) -> float:
        """Relative improvement of `new` over `old` (inf when it reaches a better class)."""
        if old is None:
            return math.inf if new.measured else -math.inf
        a, b = self.rank(new), self.rank(old)
        if a[0] != b[0]:
            return math.inf if a[0] > b[0] else -math.inf
        if a[0] == 0:
            return 0.0
        if a[0] == 2 and self.objective == "throughput":
            return new.throughput / old.throughput - 1 if old.throughput > 0 else math.inf
        return old.p99_ms / new.p99_ms - 1 if new.p99_ms > 0 else math.inf

    def beats(self, new: Observation, old: Observation | None, threshold: float) -> bool:
        """`new` is better than `old` by more than `threshold` and, when both were measured in
        rounds, beyond noise: their intervals do not overlap."""
        if self.gain(new, old) <= threshold:
            return False
        if old is None or not (new.measured and old.measured) or not (self.feasible(new) and self.feasible(old)):
            return True
        a, b = ((new.throughput_ci, old.throughput_ci) if self.objective == "throughput"
                else (old.p99_ci, new.p99_ci))  # for latency, lower is better: old's interval must sit above
        if a is None or b is None:
            return True
        return a[0] > b[1]

    def best(self, observations: Iterable[Observation]) -> Observation | None:
        measured = [o for o in observations if o.measured]
        return max(measured, key=self.rank) if measured else None


Strategy = Generator[list[RunConfig], list[Observation], None]


def grid(candidates: list[RunConfig], budget: int | None = None) -> Strategy:
    """Every candidate, in order, at once (the runner groups them into workers)."""
    todo = list(candidates)[:budget] if budget else list(candidates)
    if todo:
        yield todo


class Space:
    """The candidates as a lattice: the values of each axis, and the candidate one step away."""

    def __init__(self, candidates: list[RunConfig]):
        if not candidates:
            raise ConfigError("The search space is empty: the sweep expands to no configuration.")
        self.candidates = list(candidates)
        self.values: dict[str, list] = {}
        for axis in AXES:
            seen = _unique(getattr(c, axis) for c in self.candidates)
            if len(seen) > 1:
                self.values[axis] = sorted(seen, key=_order_key) if axis in ORDERED_AXES else seen
        self._index = [{a: vs.index(getattr(c, a)) for a, vs in self.values.items()} for c in self.candidates]

    @property
    def axes(self) -> list[str]:
        return list(self.values)

    def steps(self, cfg: RunConfig, axis: str) -> list:
        """Values one step from cfg's along an axis: the next up and down, or any other category.

        An ordered axis with `None` (auto: the runtime decides) treats auto as one step from
        every value, since where the runtime lands is unknown.
        """
        vs = self.values.get(axis, [])
        if not vs:
            return []
        here = getattr(cfg, axis)
        if axis not in ORDERED_AXES:
            return [v for v in vs if v != here]
        nums = [v for v in vs if v is not None]
        if here is None:
            return nums
        i = nums.index(here)
        out = [nums[j] for j in (i - 1, i + 1) if 0 <= j < len(nums)]
        return out + ([None] if None in vs else [])

    def nearest(self, cfg: RunConfig, fixed: dict) -> RunConfig | None:
        """The candidate with the `fixed` axis values that differs least from cfg otherwise.

        Settings that exclude each other (a performance hint drops NUM_STREAMS) mean the exact
        neighbour may not exist; the nearest one is then the step.
        """
        ref = {a: (vs.index(getattr(cfg, a)) if getattr(cfg, a) in vs else None) for a, vs in self.values.items()}
        best, best_d = None, None
        for c, idx in zip(self.candidates, self._index):
            if any(getattr(c, a) != v for a, v in fixed.items()):
                continue
            differ = sum(1 for a in idx if a not in fixed and idx[a] != ref[a])
            dist = sum(abs(idx[a] - ref[a]) for a in idx if a not in fixed and ref[a] is not None)
            if best_d is None or (differ, dist) < best_d:
                best, best_d = c, (differ, dist)
        return best

    def moves(self, cfg: RunConfig) -> list[RunConfig]:
        """Configs one step away along each axis but the batch size, plus coupled axes moved together."""
        out = [self.nearest(cfg, {axis: v}) for axis in self.axes if axis != "batch_size"
               for v in self.steps(cfg, axis)]
        for a, b in COUPLED_AXES:
            if a not in self.values or b not in self.values:
                continue
            for va in self.steps(cfg, a):
                for vb in self.steps(cfg, b):
                    if _direction(self.values[a], getattr(cfg, a), va) * _direction(self.values[b], getattr(cfg, b), vb) > 0:
                        out.append(self.nearest(cfg, {a: va, b: vb}))
        return _unique(c for c in out if c is not None and c != cfg)

    def ladder(self, cfg: RunConfig) -> list[RunConfig]:
        """The candidates that share cfg's worker settings, by batch size (one worker measures them)."""
        same = [c for c in self.candidates if c.group == cfg.group]
        return sorted(same, key=lambda c: c.batch_size)

    def start(self, objective: str = "throughput") -> RunConfig:
        """Where the climb begins: the runtime's defaults where offered (auto threads, auto
        streams, closed loop), else the most threads and one of everything else; the first listed
        backend, precision and cores. The batch size starts in the middle of its ladder for
        throughput (it usually grows with the batch until the p99 target or the caches stop it, so
        the middle is nearest on average), at the smallest for latency."""
        want: dict[str, int] = {}
        for axis, vs in self.values.items():
            if axis == "batch_size":
                want[axis] = (len(vs) - 1) // 2 if objective == "throughput" else 0
            elif axis in ORDERED_AXES:
                if None in vs:
                    want[axis] = vs.index(None)
                else:
                    want[axis] = len(vs) - 1 if axis == "threads" else 0
            else:
                want[axis] = 0
        return min(zip(self.candidates, self._index),
                   key=lambda ci: sum(abs(ci[1][a] - want[a]) * (100 if a == "batch_size" else 1)
                                      for a in want))[0]


def smart(candidates: list[RunConfig], goal: Goal | None = None, budget: int | None = None,
          threshold: float = DEFAULT_THRESHOLD) -> Strategy:
    """Climb towards the best config of `candidates`, measuring far fewer than all of them.

    1. From the start point, climb its batch-size ladder two rungs per worker while the gain is
       above `threshold` (going down instead when a larger batch breaks the p99 target).
    2. Measure the configs one step away along every other axis, at the best batch size.
    3. Move to the best of them if it gains more than `threshold`, re-tune its batch size, and
       repeat; stop when no step gains enough or the budget (configs measured) is spent.
    """
    goal = goal or Goal()
    space = Space(candidates)
    budget = len(space.candidates) if budget is None else budget
    if budget < 1:
        raise ConfigError(f"The search budget must be at least 1 configuration; got {budget}.")
    seen: dict[str, Observation] = {}

    def left() -> int:
        return budget - len(seen)

    def ask(configs: list[RunConfig | None]):
        todo = _unique(c for c in configs if c is not None and c.key not in seen)[:max(0, left())]
        if not todo:
            return []
        got = yield todo
        for o in got or []:
            seen[o.config.key] = o
        for c in todo:  # a config the evaluator did not report is not asked again
            seen.setdefault(c.key, Observation(c, "missing"))
        return got

    def best_of(configs) -> Observation | None:
        return goal.best(seen[c.key] for c in configs if c.key in seen)

    def climb_batch(cfg: RunConfig):
        ladder = space.ladder(cfg)
        i = ladder.index(cfg)
        first = [cfg]  # measured in the same worker as the first rungs up
        for step in (+1, -1):
            j = i
            while left() > 0:
                rungs = [ladder[k] for k in (j + step, j + 2 * step) if 0 <= k < len(ladder)]
                yield from ask(first + rungs)
                first = []
                if not rungs:
                    break
                # Climb on only while the farthest rung is the best so far by more than the threshold.
                far = seen.get(rungs[-1].key)
                rest = best_of([c for c in ladder if c != rungs[-1]])
                if far is None or best_of(ladder) is not far or not goal.beats(far, rest, threshold):
                    break
                j = ladder.index(rungs[-1])
            if best_of(ladder) is not seen.get(cfg.key):
                break  # the ladder moved away from where it started: no need to look the other way

    yield from climb_batch(space.start(goal.objective))
    while left() > 0:
        current = goal.best(seen.values())
        if current is None:  # nothing measured yet (everything failed): try the next unseen config
            rest = [c for c in space.candidates if c.key not in seen]
            if not rest:
                return
            yield from climb_batch(rest[0])
            continue
        yield from ask(space.moves(current.config))
        top = goal.best(seen.values())
        if top is current or not goal.beats(top, current, threshold):
            return  # no move beyond the threshold and beyond the measured noise
        yield from climb_batch(top.config)


def make_strategy(search: str, candidates: list[RunConfig], goal: Goal | None = None,
                  budget: int | None = None, threshold: float = DEFAULT_THRESHOLD) -> Strategy:
    search = check_search(search)
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise ConfigError(f"The search budget must be a whole number of at least 1 configuration; got {budget!r}.")
    if search == "grid":
        return grid(candidates, budget)
    return smart(candidates, goal, budget, threshold)


def check_search(search: str) -> str:
    s = str(search).strip().lower()
    if s not in SEARCHES:
        raise ConfigError(f"Unknown search '{search}'; choose from {', '.join(SEARCHES)}.")
    return s


def drive(strategy: Strategy, evaluate: Callable[[list[RunConfig]], list[Observation]],
          stop: Callable[[], bool] | None = None) -> list[Observation]:
    """Feed a strategy: measure what it proposes and send the results back until it is done."""
    history: list[Observation] = []
    try:
        batch = next(strategy)
        while True:
            got = evaluate(batch)
            history.extend(got)
            if stop is not None and stop():
                strategy.close()
                return history
            batch = strategy.send(got)
    except StopIteration:
        return history


# ---------------------------------------------------------------- connecting to the runner


@dataclass
class SearchSummary(SweepSummary):
    """A sweep summary plus what the search found."""

    search: str = "grid"
    candidates: int = 0
    measured: int = 0
    goal: Goal = field(default_factory=Goal)
    best: Observation | None = None

    def line(self) -> str:
        text = super().line()
        target = f" with p99 under {self.goal.p99_ms:g} ms" if self.goal.p99_ms else ""
        text += f" {self.search.capitalize()} search tried {self.measured} of {self.candidates} configurations"
        if self.best is None or not self.goal.feasible(self.best):
            return text + f"; none ran{target}."
        b = self.best
        return text + (f"; best{target}: {b.config.label()} ({b.throughput:,.1f} samples/s, "
                       f"p99 {b.p99_ms:.3g} ms).")


def run_search(model, spec, db: str | Path, study: str, search: str = "smart",
               p99_ms: float | None = None, budget: int | None = None, objective: str = "throughput",
               threshold: float = DEFAULT_THRESHOLD, settings=None, inputs=None,
               on_point: Callable[[dict], None] | None = None, progress: bool = False, cancel=None,
               timeout_s: float | None = None, precision=None, memory_limit_mb: int | None = None,
               remeasure_busy: bool = False, ci_target: float | None = None, max_rounds: int = 10) -> SearchSummary:
    """Search a sweep spec with a strategy, storing every point it measures in `study`.

    Preflight (model, inputs, variants, accuracy) runs once for the whole search. Each batch the
    strategy proposes is measured through one sweep context; the strategy receives the points
    just measured (or already stored, so a resumed search measures nothing twice).
    """
    from wb_core.config import check_ci_target, check_max_rounds
    from wb_core.sweep.context import SweepContext
    from wb_core.sweep.local import MIN_CI_ROUNDS, measure_configs, refine_leaders

    ci_target = check_ci_target(ci_target)
    if ci_target is not None:
        max_rounds = check_max_rounds(max_rounds)
    repeats = getattr(spec, "repeats", 1)
    if ci_target is not None and repeats < MIN_CI_ROUNDS:
        repeats = MIN_CI_ROUNDS

    candidates = spec.expand()
    goal = Goal(objective=objective, p99_ms=p99_ms)
    strategy = make_strategy(search, candidates, goal, budget, threshold)
    total = SearchSummary(study=study, db=str(db), search=check_search(search), candidates=len(candidates), goal=goal)
    ctx = SweepContext(model, db, study, candidates, settings=settings, inputs=inputs, precision=precision,
                       on_point=on_point, progress=progress, progress_label="searching", cancel=cancel,
                       memory_limit_mb=memory_limit_mb, timeout_s=timeout_s, summary=total,
                       repeats=repeats, remeasure_busy=remeasure_busy)
    total.notes.extend(getattr(spec, "notes", []))

    def evaluate(configs: list[RunConfig]) -> list[Observation]:
        measure_configs(ctx, configs)
        points = ctx.stored(c.key for c in configs)
        return [observation_from_point(c, points.get(c.key)) for c in configs]

    with ctx.open(ctx.spec_record(sweep=spec.to_dict(), search=total.search, p99_ms=p99_ms, budget=budget)):
        ctx.start_progress(min(budget or len(candidates), len(candidates)))
        history = drive(strategy, evaluate, stop=lambda: ctx.cancelled)
        if ci_target is not None and not ctx.cancelled:  # the leaders among the configs the search measured
            total.ci = refine_leaders(ctx, [o.config for o in history if o.status == "ok"], ci_target, max_rounds)
    total.measured = len(history)
    total.best = goal.best(history)
    return total


def observation_from_point(cfg: RunConfig, point: dict | None) -> Observation:
    """A strategy's view of a recorded or stored point."""
    if point is None:
        return Observation(cfg, "missing")
    m = point.get("metrics") or {}

    def ci(name):
        lo, hi = _float(m.get(f"{name}_ci_low")), _float(m.get(f"{name}_ci_high"))
        return (lo, hi) if lo is not None and hi is not None else None

    return Observation(cfg, str(point.get("status")), _float(m.get("throughput")), _float(m.get("latency_ms_p99")),
                       ci("throughput"), ci("latency_ms_p99"))


def _direction(values: list, here, there) -> int:
    """+1 when `there` is further up an ordered axis than `here`, -1 down, 0 when auto is involved."""
    if here is None or there is None:
        return 0
    return (values.index(there) > values.index(here)) - (values.index(there) < values.index(here))


def _order_key(v):
    # auto (None) sorts first; it is a step from every value anyway.
    return (0, 0) if v is None else (1, v)


def _unique(values: Iterable) -> list:
    out, keys = [], set()
    for v in values:
        k = v.key if isinstance(v, RunConfig) else repr(v)
        if k not in keys:
            keys.add(k)
            out.append(v)
    return out


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _float(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
