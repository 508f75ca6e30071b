"""Measurements that hold up under noise: enough requests, honest spaces, repeats and intervals."""

from __future__ import annotations

from wb_core.measure import is_stable


def test_agreeing_windows_are_not_stable_on_a_handful_of_requests():
    windows = [100.0, 101.0, 100.5]
    assert is_stable(windows, 3, 0.05)
    assert not is_stable(windows, 3, 0.05, requests=6, min_requests=100)
    assert is_stable(windows, 3, 0.05, requests=150, min_requests=100)
