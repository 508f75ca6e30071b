"""The CPU's flags read straight from /proc/cpuinfo, for expectations independent of wb_core.hardware.

Tests that expect a precision to run natively or to be skipped ask here, not `detect().supports()`:
a wrong rule in the code under test would otherwise set its own expectation.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path


@cache
def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The `flags` line of the first processor block, as a set of lower-case names."""
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.lower().split())
    return frozenset()


def bf16_native() -> bool:
    """OpenVINO runs BF16 natively with AVX512_BF16 (Zen 4, Cooper Lake) or AMX-BF16 (Sapphire Rapids)."""
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


def int8_native() -> bool:
    """OpenVINO's INT8 kernels need at least AVX2 (VNNI and AMX only make them faster)."""
    return bool({"avx2", "avx512_vnni", "avx_vnni", "amx_int8"} & cpu_flags())
