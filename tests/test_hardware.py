import json
import subprocess
import sys

from wb_core.hardware import _ops_per_cycle, detect


def test_detect_reads_this_machine():
    hw = detect()
    assert hw.physical_cores >= 1 and hw.logical_cores >= hw.physical_cores
    assert hw.available_cpus
    for flag in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16"):
        assert flag in hw.flags
    assert hw.peak_gflops["fp32"] > 0
    assert hw.peak_gflops["int8"] >= hw.peak_gflops["fp32"]


def test_peak_formula():
    amx = {"avx512f": True, "amx_bf16": True, "amx_int8": True, "avx512_vnni": True}
    assert _ops_per_cycle(amx, 2) == {"fp32": 64, "bf16": 1024, "int8": 2048}
    avx2 = {"avx2": True}
    assert _ops_per_cycle(avx2, 2) == {"fp32": 32, "bf16": 32, "int8": 64}


def test_wb_hw_json():
    out = subprocess.run([sys.executable, "-m", "wb_core.cli", "hw", "--json"], capture_output=True, text=True,
                         check=True).stdout
    d = json.loads(out)
    assert d["physical_cores"] >= 1 and "avx512_bf16" in d["flags"] and d["fingerprint"]
