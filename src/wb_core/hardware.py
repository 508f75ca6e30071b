"""What CPU this is: model, cores, caches, ISA flags and peak FLOP/s per precision.

Peak FLOP/s (details and sources in docs/hardware.md):

    peak = physical_cores x clock_GHz x 1e9 x ops_per_cycle_per_core[precision]

ops_per_cycle_per_core depends on the core's microarchitecture, which is recognised from
/proc/cpuinfo (vendor_id, cpu family, model, stepping, flags) with the table MICROARCHITECTURES:

    fp32  fma_units x (fma_width_bits / 32 lanes) x 2        (one FMA = 2 FLOP)
          e.g. Xeon Scalable 2 x 16 x 2 = 64; AMD Zen 2/3/4 2 x 8 x 2 = 32; Zen/Zen+ 2 x 4 x 2 = 16
    bf16  AMX-BF16    : 1024 (TMUL: 16x32 by 32x16 BF16 tiles, 512 multiply-adds per cycle)
          AVX512_BF16 : 2 x fp32 (VDPBF16PS does two BF16 products per FP32 lane)
          else        : same as fp32 (BF16 is converted, no speed-up)
    int8  AMX-INT8    : 2048
          AVX512_VNNI / AVX_VNNI: 4 x fp32 (VPDPBUSD: four INT8 products per 32-bit lane)
          else        : 2 x fp32

fma_width_bits is the width of the FMA datapath, not of the instructions: AMD Zen 4 runs AVX-512
on two 256-bit pipes (32 FP32 FLOP/cycle), Zen/Zen+ runs AVX2 on two 128-bit pipes (16). It is
capped by the widest vector instructions /proc/cpuinfo shows (a hypervisor may hide AVX-512).
A CPU that is not in the table gets a stated fallback: 2 FMA units as wide as its widest vector
flag. `Hardware.peak_assumption` says which model was used. These are upper bounds for
"percent of peak", not predictions.

`cpu_identity` and `peak_model` are pure functions of a /proc/cpuinfo text, `hardware_from_cpuinfo`
builds a `Hardware` from one (for tests and recorded machines), `detect` reads this machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import psutil

FLAGS_OF_INTEREST = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                     "avx_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16")


X86_VENDORS = ("GenuineIntel", "AuthenticAMD", "HygonGenuine", "CentaurHauls", "Shanghai")


# ---------------------------------------------------------------- reading /proc/cpuinfo


@dataclass(frozen=True)
class CpuIdentity:
    """What /proc/cpuinfo says about the first processor; None or empty where it says nothing."""

    vendor: str = "unknown"
    family: int | None = None
    model: int | None = None
    stepping: int | None = None
    model_name: str = "unknown"
    flags: frozenset[str] = frozenset()
    architecture: str = "unknown"  # x86_64, aarch64 or unknown, as far as the text tells

    @property
    def is_x86(self) -> bool:
        return self.architecture == "x86_64"


def _blocks(text: str) -> list[dict[str, str]]:
    """/proc/cpuinfo as one dict per processor block."""
    blocks, cur = [], {}
    for line in text.splitlines():
        if not line.strip():
            if cur:
                blocks.append(cur)
            cur = {}
            continue
        k, _, v = line.partition(":")
        cur.setdefault(k.strip(), v.strip())
    if cur:
        blocks.append(cur)
    return blocks


def _int(value: str | None) -> int | None:
    if not value:
        return None
    value = value.strip()
    try:
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    except ValueError:
        return None


def cpu_identity(cpuinfo_text: str | bytes | None) -> CpuIdentity:
    """Vendor, family, model, stepping, model name and flags from a /proc/cpuinfo text.

    Pure: reads nothing but its argument. Empty or unreadable text gives an identity full of
    "unknown" and None rather than an error.
    """
    if isinstance(cpuinfo_text, bytes):
        cpuinfo_text = cpuinfo_text.decode("utf-8", errors="replace")
    blocks = _blocks(cpuinfo_text if isinstance(cpuinfo_text, str) else "")
    first = next((b for b in blocks if "vendor_id" in b or "flags" in b or "Features" in b),
                 blocks[0] if blocks else {})
    flags = frozenset((first.get("flags") or first.get("Features") or "").lower().split())
    vendor = first.get("vendor_id") or "unknown"
    if vendor in X86_VENDORS or {"sse2", "lm"} & flags:
        arch = "x86_64"
    elif "CPU implementer" in first or "asimd" in flags:
        arch = "aarch64"
    else:
        arch = "unknown"
    if vendor == "unknown" and "CPU implementer" in first:
        vendor = f"ARM implementer {first['CPU implementer']}"
    return CpuIdentity(
        vendor=vendor,
        family=_int(first.get("cpu family")),
        model=_int(first.get("model")),
        stepping=_int(first.get("stepping")),
        model_name=first.get("model name") or first.get("Processor") or "unknown",
        flags=flags,
        architecture=arch,
    )


# ---------------------------------------------------------------- microarchitecture table

INTEL_OPT_MANUAL = ("Intel 64 and IA-32 Architectures Optimization Reference Manual, "
                    "https://www.intel.com/content/www/us/en/developer/articles/technical/"
                    "intel64-and-ia32-architectures-optimization.html")
INTEL_ARK = "Intel ARK, '# of AVX-512 FMA Units' per SKU, https://ark.intel.com"
AMD_DOCS = "https://www.amd.com/en/search/documentation/hub.html"
AGNER = "Agner Fog, The microarchitecture of Intel, AMD and VIA CPUs, https://www.agner.org/optimize/microarchitecture.pdf"

XEON_NOTE = "2 assumed; some Xeon Bronze/Silver SKUs have 1, which /proc/cpuinfo does not show"


def _models(*codes: int) -> tuple[range, ...]:
    return tuple(range(c, c + 1) for c in codes)


def _ranges(rs: Iterable[range]) -> str:
    parts = [f"0x{r.start:02X}" if len(r) == 1 else f"0x{r.start:02X}-0x{r.stop - 1:02X}" for r in rs]
    return ", ".join(parts)


@dataclass(frozen=True)
class Microarchitecture:
    """One row of the table: how a core family is recognised and how wide its FMA units are."""

    name: str
    vendors: tuple[str, ...]
    family: int
    fma_units: int
    fma_width_bits: int
    source: str
    models: tuple[range, ...] = ()  # empty: any model of the family
    steppings: range | None = None
    flags_all: tuple[str, ...] = ()
    flags_none: tuple[str, ...] = ()
    note: str = ""

    def matches(self, cpu: CpuIdentity) -> bool:
        if cpu.vendor not in self.vendors or cpu.family != self.family:
            return False
        if self.models and (cpu.model is None or not any(cpu.model in r for r in self.models)):
            return False
        if self.steppings is not None and (cpu.stepping is None or cpu.stepping not in self.steppings):
            return False
        return all(f in cpu.flags for f in self.flags_all) and not any(f in cpu.flags for f in self.flags_none)

    @property
    def recognised_by(self) -> str:
        parts = [" or ".join(self.vendors), f"family 0x{self.family:X} ({self.family})"]
        if self.models:
            parts.append(("model " if sum(map(len, self.models)) == 1 else "models ") + _ranges(self.models))
        if self.steppings is not None:
            parts.append(f"stepping {self.steppings.start}-{self.steppings.stop - 1}")
        parts += [f"with {f}" for f in self.flags_all] + [f"without {f}" for f in self.flags_none]
        return ", ".join(parts)

    @property
    def unit_word(self) -> str:
        return "pipes" if {"AuthenticAMD", "HygonGenuine"} & set(self.vendors) else "units"


_INTEL = ("GenuineIntel",)
_AMD = ("AuthenticAMD",)

# First match wins, so the specific rows come before the general ones.
MICROARCHITECTURES: tuple[Microarchitecture, ...] = (
    # Intel Xeon Scalable: AVX-512 with two 512-bit FMA units; AMX from Sapphire Rapids on.
    Microarchitecture("Intel Granite Rapids", _INTEL, 6, 2, 512, f"{INTEL_OPT_MANUAL}; {INTEL_ARK}",
                      models=_models(0xAD, 0xAE), note=XEON_NOTE),
    Microarchitecture("Intel Emerald Rapids", _INTEL, 6, 2, 512, f"{INTEL_OPT_MANUAL}; {INTEL_ARK}",
                      models=_models(0xCF), note=XEON_NOTE),
    Microarchitecture("Intel Sapphire Rapids", _INTEL, 6, 2, 512, f"{INTEL_OPT_MANUAL}; {INTEL_ARK}",
                      models=_models(0x8F), note=XEON_NOTE),
    Microarchitecture("Intel Ice Lake-SP", _INTEL, 6, 2, 512, f"{INTEL_OPT_MANUAL}; {INTEL_ARK}",
                      models=_models(0x6A, 0x6C), note=XEON_NOTE),
    Microarchitecture("Intel Cooper Lake", _INTEL, 6, 2, 512, f"{INTEL_OPT_MANUAL}; {INTEL_ARK}",
                      models=_models(0x55), steppings=range(10, 16), note=XEON_NOTE),
    Microarchitecture("Intel Cascade Lake", _INTEL, 6, 2, 512, f"{INTEL_OPT_MANUAL}; {INTEL_ARK}",
                      models=_models(0x55), steppings=range(5, 8), note=XEON_NOTE),
    Microarchitecture("Intel Skylake-SP", _INTEL, 6, 2, 512, f"{INTEL_OPT_MANUAL}; {INTEL_ARK}",
                      models=_models(0x55), note=XEON_NOTE),
    # Intel client cores with AVX-512: ports 0 and 1 fuse into one 512-bit FMA unit.
    Microarchitecture("Intel Ice Lake/Tiger Lake/Rocket Lake client", _INTEL, 6, 1, 512, INTEL_OPT_MANUAL,
                      models=_models(0x7D, 0x7E, 0x8C, 0x8D, 0xA7),
                      note="one 512-bit FMA unit (ports 0 and 1 fused); 256-bit code peaks at the same 2 x 256"),
    # Intel E-cores alone (Alder Lake-N, Sierra Forest): AVX2 split over two 128-bit FMA pipes.
    Microarchitecture("Intel Gracemont/Crestmont E-core", _INTEL, 6, 2, 128, f"{INTEL_OPT_MANUAL}; {AGNER}",
                      models=_models(0xBE, 0xAF), note="256-bit AVX2 instructions are split into 128-bit halves"),
    # Any other Intel core with AVX2 and FMA (Haswell and later) and no AVX-512.
    Microarchitecture("Intel AVX2 core (Haswell or later)", _INTEL, 6, 2, 256, f"{INTEL_OPT_MANUAL}; {AGNER}",
                      flags_all=("avx2", "fma"), flags_none=("avx512f",),
                      note="hybrid parts: every core counted as a P-core, E-cores have 2 x 128 bits"),
    # AMD Zen family.
    Microarchitecture("AMD Zen/Zen+", _AMD, 0x17, 2, 128,
                      f"Software Optimization Guide for AMD Family 17h Processors (pub. 55723), {AMD_DOCS}",
                      models=(range(0x30),), note="256-bit AVX2 instructions are split into 128-bit halves"),
    Microarchitecture("Hygon Dhyana (Zen)", ("HygonGenuine",), 0x18, 2, 128,
                      f"Software Optimization Guide for AMD Family 17h Processors (pub. 55723), {AMD_DOCS}",
                      note="256-bit AVX2 instructions are split into 128-bit halves"),
    Microarchitecture("AMD Zen 2", _AMD, 0x17, 2, 256,
                      "Software Optimization Guide for AMD Family 17h Models 30h and Greater Processors "
                      f"(pub. 56305), {AMD_DOCS}", models=(range(0x30, 0x100),)),
    Microarchitecture("AMD Zen 4", _AMD, 0x19, 2, 256,
                      f"Software Optimization Guide for the AMD Zen4 Microarchitecture (pub. 57647), {AMD_DOCS}",
                      flags_all=("avx512f",), note="512-bit AVX-512 instructions run as two 256-bit halves"),
    Microarchitecture("AMD Zen 3", _AMD, 0x19, 2, 256,
                      f"Software Optimization Guide for AMD Family 19h Processors (pub. 56665), {AMD_DOCS}",
                      flags_none=("avx512f",)),
    Microarchitecture("AMD Zen 5 (mobile, 256-bit datapath)", _AMD, 0x1A, 2, 256,
                      f"Software Optimization Guide for the AMD Zen5 Microarchitecture (pub. 58455), {AMD_DOCS}; "
                      "https://chipsandcheese.com/2024/08/10/amds-strix-point-zen-5-hits-mobile",
                      models=(range(0x20, 0x30), range(0x60, 0x70)),
                      note="mobile parts keep 256-bit pipes; AVX-512 runs as two halves"),
    Microarchitecture("AMD Zen 5", _AMD, 0x1A, 2, 512,
                      f"Software Optimization Guide for the AMD Zen5 Microarchitecture (pub. 58455), {AMD_DOCS}; "
                      "http://numberworld.org/blogs/2024_8_7_zen5_avx512_teardown",
                      note="full 512-bit datapath on desktop and server parts"),
)


@dataclass(frozen=True)
class PeakModel:
    """How peak compute is counted for one CPU: the table row used (or the fallback) and its result."""

    microarchitecture: str
    fma_units: int
    fma_width_bits: int
    fused: bool
    ops_per_cycle: dict[str, int]
    assumption: str
    source: str = ""
    recognised: bool = False


def match_microarchitecture(cpu: CpuIdentity) -> Microarchitecture | None:
    """The first row of MICROARCHITECTURES that recognises `cpu`, or None."""
    return next((m for m in MICROARCHITECTURES if m.matches(cpu)), None)


def _flag_set(flags: Mapping[str, bool] | Iterable[str]) -> set[str]:
    if isinstance(flags, Mapping):
        return {k for k, v in flags.items() if v}
    return set(flags)


def _isa_width(flags: set[str]) -> tuple[int, str]:
    """Widest vector registers the flags show, and their name."""
    if "avx512f" in flags:
        return 512, "AVX-512"
    if "avx2" in flags:
        return 256, "AVX2"
    if "avx" in flags:
        return 256, "AVX"
    if "asimd" in flags:
        return 128, "NEON/ASIMD"
    if flags & {"sse", "sse2", "sse4_2"}:
        return 128, "SSE"
    return 128, ""


def _fused(flags: set[str]) -> bool:
    """Whether the CPU has fused multiply-add (x86 FMA3/AVX-512, or Arm ASIMD)."""
    return bool(flags & {"fma", "avx512f", "asimd"})


def _peak_path(precision, flags: set[str]):
    """The first of a precision's peak paths whose flag `flags` holds (None: it has none: FP32's)."""
    return next((p for p in precision.peak if not p.flag or p.flag in flags), None)


def _precision_paths(flags: set[str]) -> str:
    """Which units each reduced precision is counted on, in words."""
    from wb_core.precisions import PRECISIONS

    return ", ".join(path.words for path in (_peak_path(p, flags) for p in PRECISIONS) if path)


def _ops_per_cycle(flags: Mapping[str, bool] | Iterable[str], fma_units: int, width_bits: int | None = None,
                   fused: bool = True) -> dict[str, int]:
    """Ops per cycle per core for each precision (formula in the module docstring; the paths in
    precisions.py).

    `width_bits`: the FMA datapath width; by default the widest vector width the flags show.
    `fused`: False for cores without FMA, whose units each do one add or one multiply per lane.
    """
    from wb_core.precisions import PRECISIONS

    on = _flag_set(flags)
    width = width_bits or _isa_width(on)[0]
    fp32 = fma_units * (width // 32) * (2 if fused else 1)
    out = {}
    for p in PRECISIONS:
        path = _peak_path(p, on)
        out[p.name] = fp32 if path is None else path.ops or int(path.times_fp32 * fp32)
    return out


def peak_model(cpu: CpuIdentity) -> PeakModel:
    """FMA units, their width, ops per cycle per precision and the assumption behind them.

    Pure: depends on `cpu` only. A CPU the table does not know gets the fallback: 2 FMA units
    as wide as its widest vector flag, said so in `assumption`.
    """
    flags = set(cpu.flags)
    isa_width, isa_name = _isa_width(flags)
    fused = _fused(flags)
    paths = _precision_paths(flags)
    row = match_microarchitecture(cpu)
    if row is not None:
        width = min(row.fma_width_bits, isa_width)
        text = f"{row.name}: {row.fma_units} x {width}-bit FMA {row.unit_word}"
        if row.note:
            text += f" ({row.note})"
        if width < row.fma_width_bits:
            text += f"; capped at {width} bits because /proc/cpuinfo shows only {isa_name or 'no vector flags'}"
        if not fused:
            text += "; no FMA flag, so each unit counts one add or multiply per lane"
        text += f"; {paths}"
        return PeakModel(row.name, row.fma_units, width, fused, _ops_per_cycle(flags, row.fma_units, width, fused),
                         text, row.source, recognised=True)
    what = ("non-x86 CPU" if cpu.architecture == "aarch64" else "unknown CPU family" if cpu.vendor != "unknown"
            else "unknown CPU")
    who = ", ".join(p for p in (cpu.vendor if cpu.vendor != "unknown" else "",
                                f"family {cpu.family}" if cpu.family is not None else "",
                                f"model {cpu.model}" if cpu.model is not None else "") if p)
    widest = f"{isa_name}, {isa_width}-bit" if isa_name else f"none found, {isa_width}-bit assumed"
    text = f"{what}{f' ({who})' if who else ''}: assumed 2 FMA units of the widest vector width ({widest})"
    if not fused:
        text += "; no FMA flag, so each unit counts one add or multiply per lane"
    text += f"; {paths}"
    return PeakModel("unknown", 2, isa_width, fused, _ops_per_cycle(flags, 2, isa_width, fused), text,
                     "fallback: widest vector flag in /proc/cpuinfo", recognised=False)


# ---------------------------------------------------------------- the Hardware record


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
    # Added later: stored records without them load with these defaults.
    microarchitecture: str = "unknown"
    fma_width_bits: int | None = None
    peak_assumption: str = ""

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
        from wb_core.precisions import precision as declared

        try:
            p = declared(precision)
        except KeyError:
            return False, f"unknown precision {precision}"
        if not p.cpu_flags or any(self.flags.get(flag) for flag in p.cpu_flags):
            return True, ""
        return False, p.without_flags


def _peak_gflops(ops: dict[str, int], physical_cores: int, ghz: float | None) -> dict[str, float]:
    return {p: round(physical_cores * (ghz or 0) * o, 1) for p, o in ops.items()}


def _compute_fields(cpu: CpuIdentity, pm: PeakModel, cores: int, ghz: float | None) -> dict:
    """The `Hardware` fields that follow from the CPU's flags and its peak model."""
    return {"flags": {f: f in cpu.flags for f in FLAGS_OF_INTEREST}, "fma_units": pm.fma_units,
            "ops_per_cycle": pm.ops_per_cycle, "peak_gflops": _peak_gflops(pm.ops_per_cycle, cores, ghz),
            "microarchitecture": pm.microarchitecture, "fma_width_bits": pm.fma_width_bits,
            "peak_assumption": pm.assumption}


def hardware_from_cpuinfo(cpuinfo_text: str | bytes | None, cores: int = 2, ghz: float | None = 2.0,
                          memory_gb: float = 0.0) -> Hardware:
    """A `Hardware` for the CPU described by a /proc/cpuinfo text, with `cores` cores at `ghz`.

    Nothing is read from this machine: caches are unknown, one socket and one NUMA node are
    assumed. Used for recorded machines and tests.
    """
    cpu = cpu_identity(cpuinfo_text)
    pm = peak_model(cpu)
    cores = max(1, int(cores))
    return Hardware(
        cpu_model=cpu.model_name,
        vendor=cpu.vendor,
        architecture=cpu.architecture,
        physical_cores=cores,
        logical_cores=cores,
        available_cpus=list(range(cores)),
        sockets=1,
        numa_nodes=1,
        numa_cpus={"node0": f"0-{cores - 1}" if cores > 1 else "0"},
        l1d_kb=None,
        l2_kb=None,
        l3_kb=None,
        base_ghz=ghz,
        memory_gb=memory_gb,
        **_compute_fields(cpu, pm, cores, ghz),
    )


# ---------------------------------------------------------------- this machine


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def _cpuinfo() -> list[dict[str, str]]:
    return _blocks(_read("/proc/cpuinfo"))


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


@lru_cache(maxsize=1)
def detect() -> Hardware:
    """Read the hardware once per process (Linux /proc and /sys, psutil)."""
    text = _read("/proc/cpuinfo")
    info = _blocks(text)
    first = info[0] if info else {}
    cpu = cpu_identity(text)
    pm = peak_model(cpu)
    sockets = len({b.get("physical id") for b in info if "physical id" in b}) or 1
    nodes = sorted(Path("/sys/devices/system/node").glob("node[0-9]*"))
    numa_cpus = {n.name: _read(str(n / "cpulist")).strip() for n in nodes}
    freq = None
    try:
        cf = psutil.cpu_freq()
        freq = cf.max / 1000 if cf and cf.max else (cf.current / 1000 if cf and cf.current else None)
    except (OSError, RuntimeError, AttributeError, NotImplementedError):  # some VMs expose no cpufreq
        freq = None
    if not freq and first.get("cpu MHz"):
        try:
            freq = float(first["cpu MHz"]) / 1000
        except ValueError:
            freq = None
    physical = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        cpus = list(range(os.cpu_count() or 1))
    return Hardware(
        cpu_model=cpu.model_name if cpu.model_name != "unknown" else (platform.processor() or "unknown"),
        vendor=cpu.vendor if cpu.vendor != "unknown" else (platform.processor() or "unknown"),
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
        memory_gb=round(psutil.virtual_memory().total / 2**30, 1),
        **_compute_fields(cpu, pm, physical, freq),
    )


def describe(hw: Hardware | None = None) -> str:
    """A short human-readable summary for the CLI and reports."""
    hw = hw or detect()
    on = [k for k, v in hw.flags.items() if v]
    width = f"{hw.fma_width_bits}-bit" if hw.fma_width_bits else "unknown width"
    lines = [
        f"CPU          {hw.cpu_model} ({hw.vendor}, {hw.architecture})",
        f"Microarch    {hw.microarchitecture}: {hw.fma_units} x {width} FMA units per core",
        (f"Cores        {hw.physical_cores} physical, {hw.logical_cores} logical, "
         f"{hw.sockets} socket(s), {hw.numa_nodes} NUMA node(s); usable CPUs {hw.available_cpus}"),
        f"Caches       L1d {hw.l1d_kb} KiB, L2 {hw.l2_kb} KiB, L3 {hw.l3_kb} KiB (per cpu0's view)",
        f"Clock        {hw.base_ghz} GHz   Memory {hw.memory_gb} GiB",
        f"ISA          {' '.join(on)}",
        "Peak GFLOP/s " + ", ".join(f"{p} {v:,.0f} ({hw.ops_per_cycle.get(p, '?')} op/cycle/core)"
                                    for p, v in hw.peak_gflops.items()),
        f"Peak basis   {hw.peak_assumption or 'not recorded'}. Upper bounds, not predictions (docs/hardware.md)",
    ]
    return "\n".join(lines)


def int8_speed_note(flags: dict) -> str | None:
    """Why INT8 may run slower than FP32 on a CPU with these flags, or None when it has VNNI or AMX."""
    if not flags or any(flags.get(f) for f in ("amx_int8", "avx512_vnni", "avx_vnni")):
        return None
    return ("this CPU has no VNNI (neither AVX512_VNNI, AVX_VNNI nor AMX), so INT8 runs on plain AVX2 "
            "multiply-adds and need not be faster than FP32")
