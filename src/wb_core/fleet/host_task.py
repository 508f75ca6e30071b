"""What a fleet host does with one job: run a worker group here, report each point as it comes.

Engine-neutral: the engine passes `emit`, which streams one point message to the coordinator.
The group runs exactly as a local sweep runs it (`wb_core.sweep.local.run_group`), in worker processes
pinned and timed the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from wb_core.config import InputOptions, MeasureSettings, RunConfig
from wb_core.errors import ModelError, setting


def run_job(job: dict, emit: Callable[[dict], None], shipped=None) -> dict:
    """Run `job` (a worker group) on this host; return every point message it produced.

    A job: {"id", "path", "members": [RunConfig dicts], "settings", "inputs", "memory_limit_mb",
    "timeout_s"}. A point message: {"job", "key", "status", "metrics", "error"}, where `key` is
    the RunConfig key (the coordinator maps it to the study's key).
    """
    from wb_core.sweep.local import run_group

    if shipped is not None:
        from wb_core.fleet.shipping import unpack

        path = str(unpack(shipped))
    else:
        path = job["path"]
    if not os.path.exists(path):
        raise ModelError(f"The model '{path}' is not on this host. Put the model (and WB_CACHE_DIR, where "
                         f"converted models live) on a path every host shares, or ship it "
                         f"({setting('ship_model', 'Ship the model to each host')}).")
    members = [RunConfig.from_dict(d) for d in job["members"]]
    points: list[dict] = []

    def record(cfg: RunConfig, status: str, metrics: dict | None = None, error: str | None = None):
        msg = {"job": job["id"], "key": cfg.key, "status": status, "metrics": metrics or {}, "error": error}
        points.append(msg)
        emit(msg)

    run_group(path, members, MeasureSettings(**job["settings"]), InputOptions.from_dict(job["inputs"]), record,
              memory_limit_mb=job.get("memory_limit_mb"), timeout_s=job.get("timeout_s"))
    return {"job": job["id"], "points": points}
