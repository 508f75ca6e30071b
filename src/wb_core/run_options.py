"""How a study runs, beside what it sweeps and how each point is measured.

`profile(model, spec, settings=..., inputs=..., precision_options=..., run=RunOptions(...))`: the
`SweepSpec` says which configurations, `MeasureSettings` how each point is timed, `InputOptions`
what feeds the model, `PrecisionOptions` the data and recipes of the reduced-precision variants,
and `RunOptions` the rest: how to search, interval targets, the cluster, the workers' limits.
"""

from __future__ import annotations

from dataclasses import dataclass

from wb_core.config import check_ci_target, check_max_rounds, check_timeout
from wb_core.errors import ConfigError
from wb_core.parsing import parse_hosts


@dataclass
class RunOptions:
    """How a study is run.

    `search`: grid (every configuration) or smart (climbs towards the highest throughput whose p99
    stays under `p99_ms`, in at most `budget` configurations). `ci_target` (0.03: +-3%) adds rounds
    to the leading configurations until each one's 95% interval is that narrow, or `max_rounds` are
    spent. `remeasure_busy` measures points stored as busy again. `cluster` (a Dask scheduler
    address) runs the study on that cluster's hosts (or only `hosts`), `ship_model` sends the model
    to hosts that do not share its path. `timeout_s`: seconds a silent worker is given before it is
    killed; `memory_limit_mb`: each worker's memory limit.
    """

    search: str = "grid"
    p99_ms: float | None = None
    budget: int | None = None
    ci_target: float | None = None
    max_rounds: int = 10
    remeasure_busy: bool = False
    cluster: str | None = None
    hosts: list | str | None = None
    ship_model: bool = False
    timeout_s: float | None = None
    memory_limit_mb: int | None = None

    def __post_init__(self):
        check_timeout(self.timeout_s)
        self.hosts = parse_hosts(self.hosts)
        self.ci_target = check_ci_target(self.ci_target)
        check_max_rounds(self.max_rounds)
        if (self.hosts or self.ship_model) and not self.cluster:
            raise ConfigError("Choosing hosts or shipping the model needs a cluster address.")
        if self.cluster and (self.remeasure_busy or self.ci_target is not None):
            raise ConfigError("Re-measuring busy points and interval targets run on this machine; leave out the "
                              "cluster.")
        if self.cluster and self.searches:
            raise ConfigError("The smart search runs on this machine; leave out the cluster, or search with a grid.")

    @property
    def searches(self) -> bool:
        """A search strategy picks the points (rather than measuring the whole grid)."""
        return self.search != "grid" or self.p99_ms is not None or self.budget is not None
