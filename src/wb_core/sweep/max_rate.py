"""The highest Poisson arrival rate a configuration serves under a p99 target, every probe stored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from wb_core.config import InputOptions, MeasureSettings, RunConfig
from wb_core.errors import ConfigError, WorkbenchError, check_kind
from wb_core.proc.parent import run_child
from wb_core.sweep.context import SweepContext, point_timeout
from wb_core.sweep.local import worker_task


def find_max_rate(model, config: RunConfig, p99_ms: float, db: str | Path, study: str,
                  settings: MeasureSettings | None = None, inputs: InputOptions | None = None,
                  steps: int = 7, precision=None, on_point: Callable[[dict], None] | None = None,
                  probe_of: str | None = None) -> dict:
    """Highest Poisson arrival rate (requests/s) whose measured p99 stays under `p99_ms`.

    A bisection between 0 and the closed-loop capacity, inside one worker; every probed rate is
    stored as a probe of the run `probe_of` (by default the run with `config`'s settings), apart
    from the study's runs, and passed to `on_point` (as a sweep's points are) once stored. The
    search and its answer are kept in the study's spec as `last_max_rate` (its sweep settings stay).
    Returns {"best": {...} or None, "closed_loop_rate", ...}.
    """
    from wb_core.config import check_p99_target
    from wb_core.parsing import check_number

    # options of another kind would fail deep inside, after the study opens
    check_kind(config, RunConfig, "The configuration to search a rate for", "api.default_configs or api.run_config give one")
    check_p99_target(p99_ms)
    steps = check_number(steps, "The rate search's steps", 1, 50, integer=True)
    ctx = SweepContext(model, db, study, [config], settings=settings or MeasureSettings(max_time_s=3.0),
                       inputs=inputs, precision=precision, on_point=on_point)
    result: dict = {}
    probe_of = probe_of or config.key
    asked = ctx.spec_record(find_max_rate=config.to_dict(), p99_ms=p99_ms, run_key=probe_of)
    with ctx.open(asked, spec_field="last_max_rate"):
        why = ctx.infeasible(config)
        if why:
            raise ConfigError(f"Cannot search a rate for this configuration: {why}.")
        path, extra = ctx.variant(config)  # int8 needs its quantized IR here too
        task = worker_task("max_rate", path, [config], ctx.settings, ctx.inputs)
        task.update({"p99_ms": p99_ms, "steps": steps})

        def on_message(msg):
            if msg.get("type") == "point" and msg.get("config"):
                probe = RunConfig.from_dict(msg["config"])
                ctx.record(probe, msg["status"], {**extra, **(msg.get("metrics") or {})}, msg.get("error"),
                           key=msg["key"], probe_of=probe_of)
            elif msg.get("type") == "max_rate":
                result.update(msg)

        outcome = run_child(task, timeout=point_timeout(ctx.settings) * (steps + 2), on_message=on_message)
        if not result:
            raise WorkbenchError(f"The rate search failed: {outcome.reason()}.")
        ctx.store.update_spec(ctx.study, last_max_rate={**asked, "answer": result})
    return result
