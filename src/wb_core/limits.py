"""The p99-within-limit rule, in one place: the max-rate search, the smart search, capacity planning
and the dashboard judge a measured point by it."""

from __future__ import annotations

import math


def within_p99(p99, limit, saturated=False) -> bool:
    """Whether a point keeps its p99 latency (ms) within `limit`: measured (a finite number), its queue
    not growing without bound (`saturated`), and at most the limit; no limit (None): any measured p99."""
    try:
        value = float(p99)
    except (TypeError, ValueError):
        return False
    if math.isnan(value) or saturated is True or saturated == 1:
        return False
    return limit is None or value <= float(limit)
