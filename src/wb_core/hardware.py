"""What CPU this is: model, cores, caches, ISA flags and peak FLOP/s per precision.

Peak FLOP/s formula (documented in the README too):

    peak = physical_cores x base_GHz x 1e9 x ops_per_cycle_per_core[precision]

with ops_per_cycle_per_core taken from the widest matrix/vector unit the CPU has:

    fp32  AVX-512 : fma_units x (512/32 lanes) x 2        (Intel Xeon: 2 x 16 x 2 = 64)
          AVX2    : fma_units x (256/32 lanes) x 2        (2 x 8 x 2 = 32)
    bf16  AMX-BF16: 1024 (one TMUL tile op, 16x32 by 32x16 BF16, per cycle)
          AVX512_BF16: 2 x fp32 (VDPBF16PS does two BF16 products per FP32 lane)
          else    : same as fp32 (BF16 is converted, no speed-up)
    int8  AMX-INT8: 2048
          AVX512_VNNI / AVX_VNNI: 4 x fp32 (VPDPBUSD: 4 INT8 products per 32-bit lane)
          else    : 2 x fp32

fma_units is 2 for Xeon Scalable; AMD Zen 4 executes AVX-512 on 256-bit pipes, which we model
as one 512-bit FMA unit. These are upper bounds for "percent of peak", not predictions.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import psutil

FLAGS_OF_INTEREST = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                     "avx_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16")


@dataclass
class Hardware:
    cpu_model: str
    vendor: str
    architecture: str
    physical_cores: int
    logical_cores: int
    available_cpus: list[int]
    sockets: int
    numa_nodes: int
    numa_cpus: dict[str, str]
    l1d_kb: int | None
    l2_kb: int | None
    l3_kb: int | None
    base_ghz: float | None
    flags: dict[str, bool]
    memory_gb: float
    fma_units: int
    ops_per_cycle: dict[str, int] = field(default_factory=dict)
    peak_gflops: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def fingerprint(self) -> str:
        """Stable id of the hardware type (model, cores, flags), not of the host."""
        blob = json.dumps([self.cpu_model, self.physical_cores, self.logical_cores, self.sockets,
                           sorted(k for k, v in self.flags.items() if v)])
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def supports(self, precision: str) -> tuple[bool, str]:
        """Whether a precision runs natively here, and why not if it doesn't."""
        f = self.flags
        if precision == "fp32":
            return True, ""
        if precision == "bf16":
            if f.get("amx_bf16") or f.get("avx512_bf16"):
                return True, ""
            return False, "this CPU has neither AMX-BF16 nor AVX512_BF16, so BF16 would be emulated"
        if precision == "int8":
            if f.get("amx_int8") or f.get("avx512_vnni") or f.get("avx_vnni") or f.get("avx2"):
                return True, ""
            return False, "this CPU lacks the vector instructions OpenVINO needs for INT8"
        return False, f"unknown precision {precision}"


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _cpuinfo() -> list[dict[str, str]]:
    blocks, cur = [], {}
    for line in _read("/proc/cpuinfo").splitlines():
        if not line.strip():
            if cur:
                blocks.append(cur)
            cur = {}
            continue
        k, _, v = line.partition(":")
        cur[k.strip()] = v.strip()
    if cur:
        blocks.append(cur)
    return blocks


def _cache_kb(level: int, kind: str) -> int | None:
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in sorted(base.glob("index*")):
        if _read(str(idx / "level")).strip() == str(level) and _read(str(idx / "type")).strip() in kind:
            size = _read(str(idx / "size")).strip().upper()
            if size.endswith("K"):
                return int(size[:-1])
            if size.endswith("M"):
                return int(size[:-1]) * 1024
    return None


def _ops_per_cycle(flags: dict[str, bool], fma_units: int) -> dict[str, int]:
    width = 512 if flags.get("avx512f") else (256 if flags.get("avx2") else 128)
    fp32 = fma_units * (width // 32) * 2
    if flags.get("amx_bf16"):
        bf16 = 1024
    elif flags.get("avx512_bf16"):
        bf16 = 2 * fp32
    else:
        bf16 = fp32
    if flags.get("amx_int8"):
        int8 = 2048
    elif flags.get("avx512_vnni") or flags.get("avx_vnni"):
        int8 = 4 * fp32
    else:
        int8 = 2 * fp32
    return {"fp32": fp32, "bf16": bf16, "int8": int8}


@lru_cache(maxsize=1)
def detect() -> Hardware:
    """Read the hardware once per process (Linux /proc and /sys, psutil)."""
    info = _cpuinfo()
    first = info[0] if info else {}
    flagset = set(first.get("flags", "").split())
    flags = {f: f in flagset for f in FLAGS_OF_INTEREST}
    vendor = first.get("vendor_id", platform.processor() or "unknown")
    sockets = len({b.get("physical id") for b in info if "physical id" in b}) or 1
    nodes = sorted(Path("/sys/devices/system/node").glob("node[0-9]*"))
    numa_cpus = {n.name: _read(str(n / "cpulist")).strip() for n in nodes}
    freq = None
    try:
        cf = psutil.cpu_freq()
        freq = cf.max / 1000 if cf and cf.max else (cf.current / 1000 if cf and cf.current else None)
    except Exception:  # some VMs expose no cpufreq
        freq = None
    if not freq and first.get("cpu MHz"):
        freq = float(first["cpu MHz"]) / 1000
    # AMD Zen 4 runs AVX-512 on 256-bit pipes: count it as one 512-bit FMA unit.
    fma_units = 1 if ("AMD" in vendor.upper() and first.get("cpu family") == "25") else 2
    ops = _ops_per_cycle(flags, fma_units)
    physical = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    peak = {p: round(physical * (freq or 0) * o, 1) for p, o in ops.items()}
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        cpus = list(range(os.cpu_count() or 1))
    return Hardware(
        cpu_model=first.get("model name", platform.processor() or "unknown"),
        vendor=vendor,
        architecture=platform.machine(),
        physical_cores=physical,
        logical_cores=psutil.cpu_count(logical=True) or 1,
        available_cpus=cpus,
        sockets=sockets,
        numa_nodes=max(1, len(nodes)),
        numa_cpus=numa_cpus,
        l1d_kb=_cache_kb(1, ("Data",)),
        l2_kb=_cache_kb(2, ("Unified", "Data")),
        l3_kb=_cache_kb(3, ("Unified", "Data")),
        base_ghz=round(freq, 3) if freq else None,
        flags=flags,
        memory_gb=round(psutil.virtual_memory().total / 2**30, 1),
        fma_units=fma_units,
        ops_per_cycle=ops,
        peak_gflops=peak,
    )


def describe(hw: Hardware | None = None) -> str:
    """A short human-readable summary for the CLI and reports."""
    hw = hw or detect()
    on = [k for k, v in hw.flags.items() if v]
    lines = [
        f"CPU          {hw.cpu_model} ({hw.vendor}, {hw.architecture})",
        f"Cores        {hw.physical_cores} physical, {hw.logical_cores} logical, "
        f"{hw.sockets} socket(s), {hw.numa_nodes} NUMA node(s); usable CPUs {hw.available_cpus}",
        f"Caches       L1d {hw.l1d_kb} KiB, L2 {hw.l2_kb} KiB, L3 {hw.l3_kb} KiB (per cpu0's view)",
        f"Clock        {hw.base_ghz} GHz   Memory {hw.memory_gb} GiB",
        f"ISA          {' '.join(on)}",
        "Peak GFLOP/s " + ", ".join(f"{p} {v:,.0f} ({hw.ops_per_cycle[p]} op/cycle/core)"
                                    for p, v in hw.peak_gflops.items()),
    ]
    return "\n".join(lines)
