"""Search strategies on synthetic objectives (no runtime), and one real smart search on LeNet."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wb_core.config import SweepSpec
from wb_core.errors import ConfigError
from wb_core.sweep.search import Goal, Observation, Space, drive, grid, make_strategy, smart

GRID_48 = SweepSpec(backends="openvino", threads="2,4", batch_sizes="1,2,4,8,16,32", streams="1,2", cores="none,0")


def cpu_model(cfg, peak_batch=16):
    """A plausible CPU: threads help unless squeezed onto one core, batching saturates then falls
    off past `peak_batch`, a second stream costs a little; p99 grows with the batch."""
    cores = len(cfg.cores) if cfg.cores else 2
    useful = min(cfg.threads or 2, cores)
    squeeze = 0.7 if (cfg.threads or 2) > cores else 1.0
    batching = cfg.batch_size / (cfg.batch_size + 3) * (1 if cfg.batch_size <= peak_batch else 0.85)
    thr = 1000 * useful ** 0.9 * squeeze * batching * (0.95 if cfg.streams == 2 else 1.0)
    p99 = 1.3 * 1000 * cfg.batch_size / thr
    return thr, p99


def fake_evaluator(model=cpu_model, fail=lambda cfg: False):
    calls = []

    def evaluate(configs):
        calls.append(list(configs))
        out = []
        for c in configs:
            if fail(c):
                out.append(Observation(c, "failed"))
            else:
                out.append(Observation(c, "ok", *model(c)))
        return out

    return evaluate, calls


def true_best(candidates, goal, model=cpu_model):
    return goal.best(Observation(c, "ok", *model(c)) for c in candidates)


@pytest.mark.parametrize("p99_ms", [None, 20.0, 8.0])
def test_smart_finds_the_optimum_in_a_third_of_the_grid(p99_ms):
    candidates = GRID_48.expand()
    assert len(candidates) == 48
    goal = Goal(p99_ms=p99_ms)
    evaluate, calls = fake_evaluator()
    history = drive(smart(candidates, goal), evaluate)
    found = goal.best(history)
    best = true_best(candidates, goal)
    assert found.config == best.config
    assert len(history) <= len(candidates) / 3
    assert goal.feasible(found)
    # Each proposal is one worker per distinct group; far fewer workers than the grid's 8 x 6 points.
    assert len({c.key for batch in calls for c in batch}) == len(history)


def test_grid_proposes_everything_once():
    candidates = GRID_48.expand()
    evaluate, calls = fake_evaluator()
    history = drive(grid(candidates), evaluate)
    assert len(calls) == 1 and len(history) == 48
    assert len(drive(grid(candidates, budget=5), fake_evaluator()[0])) == 5


def test_budget_is_never_exceeded():
    candidates = GRID_48.expand()
    for budget in (1, 2, 3, 7):
        history = drive(smart(candidates, Goal(), budget=budget), fake_evaluator()[0])
        assert 1 <= len(history) <= budget


def test_a_target_nothing_meets_reports_the_closest_run_as_not_feasible():
    spec = SweepSpec(backends="openvino", threads="1", batch_sizes="1,2,4,8,16,32", cores="0")
    goal = Goal(p99_ms=3.0)  # batch 1 on one thread takes 5.2 ms here
    history = drive(smart(spec.expand(), goal), fake_evaluator()[0])
    found = goal.best(history)
    assert found.config.batch_size == 1 and not goal.feasible(found)
    assert len(history) <= 5  # the start rung, two above it, two below


def test_failed_points_are_stepped_over():
    candidates = GRID_48.expand()
    evaluate, _ = fake_evaluator(fail=lambda c: c.batch_size >= 16)
    goal = Goal()
    history = drive(smart(candidates, goal), evaluate)
    found = goal.best(history)
    assert found.config.batch_size == 8 and found.config.threads == 2 and found.config.cores is None


def test_everything_failing_ends_without_a_best():
    candidates = GRID_48.expand()
    history = drive(smart(candidates, Goal(), budget=10), fake_evaluator(fail=lambda c: True)[0])
    assert len(history) == 10 and Goal().best(history) is None


def test_hints_and_streams_exclude_each_other_yet_stay_reachable():
    spec = SweepSpec(backends="openvino", threads="auto", batch_sizes="1,8", streams="1,2", hints="none,latency,throughput")
    candidates = spec.expand()
    space = Space(candidates)
    hinted = [c for c in candidates if c.hint == "throughput" and c.batch_size == 8][0]
    step = space.nearest(hinted, {"hint": None})
    assert step.hint is None and step.streams in (1, 2) and step.batch_size == 8

    def model(cfg):
        thr = {None: 100.0, "latency": 90.0, "throughput": 150.0}[cfg.hint] * cfg.batch_size
        return thr, 1000 * cfg.batch_size / thr
    goal = Goal()
    history = drive(smart(candidates, goal), fake_evaluator(model)[0])
    assert goal.best(history).config.hint == "throughput"


def test_streams_and_requests_in_flight_climb_together():
    spec = SweepSpec(backends="openvino", threads="4", batch_sizes="1,8", streams="1,2,4", concurrency="1,2,4")

    def model(cfg):  # streams help only when that many requests are in flight, and cost a little alone
        parallel = min(cfg.streams, cfg.concurrency)
        thr = 100.0 * cfg.batch_size * parallel ** 0.8 * (0.97 if cfg.streams > cfg.concurrency else 1.0)
        return thr, 1000 * cfg.batch_size * cfg.concurrency / thr
    goal = Goal()
    history = drive(smart(spec.expand(), goal), fake_evaluator(model)[0])
    best = goal.best(history).config
    assert (best.streams, best.concurrency, best.batch_size) == (4, 4, 8)
    assert len(history) < len(spec.expand())


def test_latency_objective_prefers_small_batches():
    goal = Goal(objective="latency")
    history = drive(smart(GRID_48.expand(), goal), fake_evaluator()[0])
    assert goal.best(history).config.batch_size == 1


def test_bad_arguments_are_one_sentence():
    with pytest.raises(ConfigError, match="Unknown search 'random'"):
        make_strategy("random", GRID_48.expand())
    with pytest.raises(ConfigError, match="budget"):
        make_strategy("smart", GRID_48.expand(), budget=0)
    with pytest.raises(ConfigError, match="p99 target"):
        Goal(p99_ms=-1)


@settings(max_examples=60, deadline=None)
@given(peak=st.sampled_from([1, 2, 4, 8, 16, 32]), p99=st.one_of(st.none(), st.floats(0.5, 60)),
       budget=st.one_of(st.none(), st.integers(1, 48)), noise=st.lists(st.floats(0.8, 1.2), min_size=48, max_size=48))
def test_smart_only_proposes_unseen_candidates_within_budget(peak, p99, budget, noise):
    candidates = GRID_48.expand()
    jitter = {c.key: n for c, n in zip(candidates, noise)}

    def model(cfg):
        thr, lat = cpu_model(cfg, peak_batch=peak)
        return thr * jitter[cfg.key], lat / jitter[cfg.key]

    evaluate, calls = fake_evaluator(model)
    goal = Goal(p99_ms=p99)
    history = drive(smart(candidates, goal, budget=budget), evaluate)
    keys = [c.key for batch in calls for c in batch]
    assert len(keys) == len(set(keys)) == len(history)
    assert set(keys) <= {c.key for c in candidates}
    assert len(history) <= (budget or 48)
    found = goal.best(history)
    assert found is not None and all(goal.rank(found) >= goal.rank(o) for o in history)
    if p99 is not None and found.p99_ms <= p99:
        assert goal.feasible(found)
    assert not math.isnan(found.throughput)


def test_real_smart_search_within_a_small_budget(lenet_ir, db, fast):
    from wb_core.sweep.search import run_search

    spec = SweepSpec(backends="openvino", threads="1,2", batch_sizes="1,16", cores="none,0")
    summary = run_search(lenet_ir, spec, db, "small", search="smart", budget=2, settings=fast)
    assert summary.measured == 2 and summary.ok == 2  # batch 1 and 16 of the start, in one worker
    # The pick is the stored row with the highest throughput, read back from the database.
    from wb_core.store import load_results

    df = load_results(db, "small")
    assert sorted(df.batch_size) == [1, 16]
    stored_best = df.loc[df.throughput.idxmax()]
    assert summary.best.config.key == stored_best.key
    assert summary.best.throughput == pytest.approx(stored_best.throughput)


@pytest.mark.slow
def test_real_smart_search_on_lenet_stores_what_it_measured(lenet_ir, db, fast):
    from wb_core.api import profile
    from wb_core.sweep.search import run_search

    spec = SweepSpec(backends="openvino", threads="1,2", batch_sizes="1,16", cores="none,0")
    summary = run_search(lenet_ir, spec, db, "smart", search="smart", p99_ms=50.0, budget=4, settings=fast)
    assert summary.candidates == 8 and 1 <= summary.measured <= 4
    assert summary.ok == summary.measured and summary.best is not None
    assert "Smart search tried" in summary.line() and summary.best.config.label() in summary.line()
    df = profile(lenet_ir, db=db, study="smart", threads="1,2", batch_sizes="1,16", cores="none,0",
                 settings=fast, search="smart", p99_ms=50.0, budget=4)
    assert len(df) == summary.measured  # a rerun finds everything stored and measures nothing new
    assert (df.status == "ok").all()


def test_cli_rejects_an_unknown_search(lenet_ir, db):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "wb_core.cli", "profile", str(lenet_ir), "--search", "random",
                        "--db", str(db), "--quiet"], capture_output=True, text=True)
    assert r.returncode == 2 and "Unknown search 'random'" in r.stderr and "Traceback" not in r.stderr
