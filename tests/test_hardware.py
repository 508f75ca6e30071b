import json
import subprocess
import sys
from pathlib import Path

import pytest

from wb_core.hardware import (
    MICROARCHITECTURES,
    Hardware,
    _ops_per_cycle,
    cpu_identity,
    describe,
    detect,
    hardware_from_cpuinfo,
    peak_model,
)

CPUINFO = Path(__file__).parent / "cpuinfo"

# file: (microarchitecture, fma_units, fma_width_bits, {fp32, bf16, int8 ops/cycle/core}, bf16 ok, int8 ok)
EXPECTED = {
    "synthetic-amd-epyc-7571-zen1.cpuinfo": ("AMD Zen/Zen+", 2, 128, {"fp32": 16, "bf16": 16, "int8": 32}, False, True),
    "synthetic-amd-epyc-7r32-zen2.cpuinfo": ("AMD Zen 2", 2, 256, {"fp32": 32, "bf16": 32, "int8": 64}, False, True),
    "synthetic-amd-epyc-7763-zen3.cpuinfo": ("AMD Zen 3", 2, 256, {"fp32": 32, "bf16": 32, "int8": 64}, False, True),
    "synthetic-amd-epyc-9r14-zen4.cpuinfo": ("AMD Zen 4", 2, 256, {"fp32": 32, "bf16": 64, "int8": 128}, True, True),
    "synthetic-amd-epyc-9575f-zen5.cpuinfo": ("AMD Zen 5", 2, 512, {"fp32": 64, "bf16": 128, "int8": 256}, True, True),
    "synthetic-amd-ryzen-ai-9-hx-370-zen5-mobile.cpuinfo": ("AMD Zen 5 (mobile, 256-bit datapath)", 2, 256,
                                                  {"fp32": 32, "bf16": 64, "int8": 128}, True, True),
    "synthetic-intel-xeon-platinum-8259cl-cascade-lake.cpuinfo": ("Intel Cascade Lake", 2, 512,
                                                        {"fp32": 64, "bf16": 64, "int8": 256}, False, True),
    "synthetic-intel-xeon-platinum-8488c-sapphire-rapids.cpuinfo": ("Intel Sapphire Rapids", 2, 512,
                                                          {"fp32": 64, "bf16": 1024, "int8": 2048}, True, True),
    "amd-epyc-zen4-kvm.cpuinfo": ("AMD Zen 4", 2, 256, {"fp32": 32, "bf16": 64, "int8": 128}, True, True),
    "intel-xeon-emerald-rapids-kvm.cpuinfo": ("Intel Emerald Rapids", 2, 512,
                                              {"fp32": 64, "bf16": 1024, "int8": 2048}, True, True),
    "synthetic-intel-core-i7-8700-coffee-lake.cpuinfo": ("Intel AVX2 core (Haswell or later)", 2, 256,
                                               {"fp32": 32, "bf16": 32, "int8": 64}, False, True),
    "synthetic-intel-core-i9-12900k-alder-lake.cpuinfo": ("Intel AVX2 core (Haswell or later)", 2, 256,
                                                {"fp32": 32, "bf16": 32, "int8": 128}, False, True),
    "synthetic-unknown-vendor.cpuinfo": ("unknown", 2, 256, {"fp32": 32, "bf16": 32, "int8": 64}, False, True),
    "synthetic-arm-neoverse-v1.cpuinfo": ("unknown", 2, 128, {"fp32": 16, "bf16": 16, "int8": 32}, False, False),
}

RECORDED = sorted(p.name for p in CPUINFO.glob("*.cpuinfo"))


def _text(name: str) -> str:
    return (CPUINFO / name).read_text()


def test_every_recorded_cpu_has_expectations():
    assert RECORDED and set(RECORDED) == set(EXPECTED)


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_cpu_peak_model(name):
    arch, units, width, ops, _, _ = EXPECTED[name]
    pm = peak_model(cpu_identity(_text(name)))
    assert pm.microarchitecture == arch
    assert (pm.fma_units, pm.fma_width_bits) == (units, width)
    assert pm.ops_per_cycle == ops
    assert pm.recognised == (arch != "unknown")
    assert pm.assumption.startswith(arch if arch != "unknown" else ("unknown CPU", "non-x86 CPU"))
    assert f"{units} FMA units" in pm.assumption or f"{units} x {width}-bit FMA" in pm.assumption


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_cpu_hardware_and_feasibility(name):
    arch, units, width, ops, bf16_ok, int8_ok = EXPECTED[name]
    hw = hardware_from_cpuinfo(_text(name), cores=2, ghz=2.0)
    assert (hw.microarchitecture, hw.fma_units, hw.fma_width_bits, hw.ops_per_cycle) == (arch, units, width, ops)
    assert hw.peak_gflops == {p: 2 * 2.0 * o for p, o in ops.items()}
    assert hw.peak_assumption
    assert hw.supports("fp32") == (True, "")
    ok, why = hw.supports("bf16")
    assert ok == bf16_ok == bool(hw.flags["avx512_bf16"] or hw.flags["amx_bf16"])
    assert ok or "AVX512_BF16" in why
    ok, why = hw.supports("int8")
    assert ok == int8_ok
    assert ok == hw.flags["avx2"]  # every recorded x86 CPU has AVX2 at least
    # the record survives a round trip through a stored dict, as the store and the fleet do
    assert Hardware(**json.loads(json.dumps(hw.to_dict()))) == hw
    text = describe(hw)
    assert arch in text and hw.peak_assumption in text


def test_identity_fields():
    cpu = cpu_identity(_text("synthetic-amd-epyc-9r14-zen4.cpuinfo"))
    assert (cpu.vendor, cpu.family, cpu.model, cpu.stepping) == ("AuthenticAMD", 25, 17, 1)
    assert cpu.model_name == "AMD EPYC 9R14" and cpu.architecture == "x86_64"
    assert {"avx512f", "avx512_vnni", "avx512_bf16"} <= cpu.flags and not {"amx_tile", "amx_bf16"} & cpu.flags
    spr = cpu_identity(_text("synthetic-intel-xeon-platinum-8488c-sapphire-rapids.cpuinfo"))
    assert (spr.family, spr.model) == (6, 143)
    assert {"amx_tile", "amx_bf16", "amx_int8", "avx512_bf16", "avx512_vnni"} <= spr.flags


def test_zen4_with_avx512_hidden_is_counted_like_zen3():
    text = _text("synthetic-amd-epyc-9r14-zen4.cpuinfo")
    hidden = "\n".join(" ".join(w for w in line.split(" ") if not w.startswith("avx512")) if line.startswith("flags")
                       else line for line in text.splitlines())
    pm = peak_model(cpu_identity(hidden))
    assert pm.microarchitecture == "AMD Zen 3" and pm.ops_per_cycle["fp32"] == 32


def test_xeon_with_avx512_hidden_is_capped_at_256_bits():
    text = _text("synthetic-intel-xeon-platinum-8259cl-cascade-lake.cpuinfo")
    hidden = "\n".join(" ".join(w for w in line.split(" ") if not w.startswith("avx512")) if line.startswith("flags")
                       else line for line in text.splitlines())
    pm = peak_model(cpu_identity(hidden))
    assert pm.microarchitecture == "Intel Cascade Lake"
    assert (pm.fma_width_bits, pm.ops_per_cycle["fp32"]) == (256, 32)
    assert "capped at 256 bits" in pm.assumption


@pytest.mark.parametrize("text", ["", "garbage\x00 no colon here\n:::\nflags\t: \ncpu family\t: zz\nmodel\t: ?\n",
                                  None, b"\xff\xfe\x00binary", "vendor_id\t: GenuineIntel\ncpu family\t: 6\n"])
def test_garbage_cpuinfo_falls_back(text):
    pm = peak_model(cpu_identity(text))
    hw = hardware_from_cpuinfo(text)
    assert pm.microarchitecture == hw.microarchitecture == "unknown"
    assert "assumed 2 FMA units" in pm.assumption and hw.peak_assumption == pm.assumption
    assert all(v > 0 for v in pm.ops_per_cycle.values())
    assert hw.supports("bf16")[0] is False and "AVX512_BF16" in hw.supports("bf16")[1]
    describe(hw)


def test_table_rows_are_complete():
    names = [m.name for m in MICROARCHITECTURES]
    assert len(names) == len(set(names))
    for m in MICROARCHITECTURES:
        assert m.fma_units in (1, 2) and m.fma_width_bits in (128, 256, 512)
        assert m.source and m.recognised_by.startswith(m.vendors[0])


def test_old_stored_record_loads_with_defaults():
    d = hardware_from_cpuinfo(_text("synthetic-amd-epyc-7763-zen3.cpuinfo")).to_dict()
    for new in ("microarchitecture", "fma_width_bits", "peak_assumption"):
        d.pop(new)
    hw = Hardware(**d)
    assert hw.microarchitecture == "unknown" and hw.peak_assumption == ""
    assert "not recorded" in describe(hw)


def test_detect_reads_this_machine():
    hw = detect()
    assert hw.physical_cores >= 1 and hw.logical_cores >= hw.physical_cores
    assert hw.available_cpus
    for flag in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16"):
        assert flag in hw.flags
    assert hw.peak_gflops["fp32"] > 0
    assert hw.peak_gflops["int8"] >= hw.peak_gflops["fp32"]
    assert hw.microarchitecture and hw.peak_assumption
    assert hw.ops_per_cycle == peak_model(cpu_identity(Path("/proc/cpuinfo").read_text())).ops_per_cycle


def test_peak_formula():
    amx = {"avx512f": True, "amx_bf16": True, "amx_int8": True, "avx512_vnni": True}
    assert _ops_per_cycle(amx, 2) == {"fp32": 64, "bf16": 1024, "int8": 2048}
    avx2 = {"avx2": True}
    assert _ops_per_cycle(avx2, 2) == {"fp32": 32, "bf16": 32, "int8": 64}
    # the datapath width, not the instruction width, sets the FP32 rate (Zen 4: AVX-512 on 256-bit pipes)
    zen4 = {"avx512f", "avx512_bf16", "avx512_vnni"}
    assert _ops_per_cycle(zen4, 2, 256) == {"fp32": 32, "bf16": 64, "int8": 128}
    # without FMA each unit does one add or one multiply per lane
    assert _ops_per_cycle({"avx"}, 2, 256, fused=False)["fp32"] == 16


def test_wb_hw_json():
    out = subprocess.run([sys.executable, "-m", "wb_core.cli", "hw", "--json"], capture_output=True, text=True,
                         check=True).stdout
    d = json.loads(out)
    assert d["physical_cores"] >= 1 and "avx512_bf16" in d["flags"] and d["fingerprint"]
    assert d["microarchitecture"] and d["peak_assumption"] and d["fma_width_bits"]
