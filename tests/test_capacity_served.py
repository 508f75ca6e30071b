"""Capacity plans from served figures when a serve check exists, and said to be in-process upper
bounds otherwise."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from wb_core.analysis.planning import capacity
from wb_core.errors import WorkbenchError


def _frame():
    base = {"status": "ok", "instances": 1, "rate": None, "backend": "openvino", "precision": "fp32",
            "threads": None, "streams": None, "concurrency": 1, "batch_size": 1, "saturated": None, "n_cores": 1}
    return pd.DataFrame([{**base, "key": "p", "throughput": 1000.0, "latency_ms_p99": 2.0}])


def test_a_served_check_sizes_the_plan_and_says_so():
    check = {"status": "ok", "run_key": "p", "ratio": {"throughput": 0.55, "latency_ms_p99": 2.0}}
    served = capacity(_frame(), target_rate=2000, p99_ms=10, headroom=0.2, machine_cores=4, serve_checks=[check])
    assert served.served and "served figures" in served.basis and "55%" in served.basis
    assert served.per_instance_rate == 1000.0 * 0.55
    assert served.instances == math.ceil(2000 / (1000 * 0.55 * 0.8))  # 5, where in-process says 3
    # The served p99 counts against the limit: 2 ms in-process x 6 served is 12 ms, over 10 ms.
    slow = [{**check, "ratio": {"throughput": 0.55, "latency_ms_p99": 6.0}}]
    with pytest.raises(WorkbenchError, match="No measured point keeps p99 under 10 ms"):
        capacity(_frame(), target_rate=100, p99_ms=10, serve_checks=slow)


def test_without_a_check_the_plan_says_in_process_upper_bound():
    plain = capacity(_frame(), target_rate=2000, p99_ms=10, headroom=0.2, machine_cores=4)
    assert not plain.served and plain.instances == math.ceil(2000 / (1000 * 0.8))
    assert "in-process figures, an upper bound" in plain.basis and "wb serve-check" in plain.basis
    other = capacity(_frame(), target_rate=2000, p99_ms=10, serve_checks=[
        {"status": "ok", "run_key": "zz", "ratio": {"throughput": 0.6}}])
    assert not other.served and "serve check of run zz delivered 60%" in other.basis
