"""The precisions a model is measured in, each declared once with what the rest of the code asks of it.

The sweep's choices, the help text, OpenVINO's precision hint (the runtime and the OVMS export),
the baseline other precisions are matched against, whether a variant needs calibration data and
which CPU flags run it natively are read from here; nothing else lists them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PeakPath:
    """One way a CPU reaches a precision's peak arithmetic (hardware.py's peak model reads these)."""

    flag: str  # the CPU flag it needs ("": every CPU, the fallback)
    times_fp32: float = 0  # ops per core per cycle as a multiple of FP32's FMA ops
    ops: int = 0  # or a fixed number of ops per core per cycle (a matrix unit)
    words: str = ""  # how the peak model says it: "BF16 on AMX-BF16"


# Ops per core per cycle of Intel AMX tiles: one 16x32 x 32x16 BF16 tile product (8192 MACs), or one
# 16x64 x 64x16 INT8 tile product (16384 MACs), every 16 cycles.
AMX_BF16_OPS = 1024
AMX_INT8_OPS = 2048


@dataclass(frozen=True)
class Precision:
    name: str  # as a sweep, a store and a deployment name it
    label: str  # in words, in tables and run names
    ov_hint: str  # OpenVINO's INFERENCE_PRECISION_HINT for it ("f32" where the model file holds the precision)
    baseline: bool = False  # the precision the others are measured against (vs_fp32, the guard's reference)
    needs_data: bool = False  # its variant is built from calibration data (NNCF post-training quantization)
    cpu_flags: tuple[str, ...] = ()  # CPU flags of which any one runs it natively (empty: every CPU)
    without_flags: str = ""  # why a CPU with none of `cpu_flags` does not run it natively, in words
    by_hint: bool = False  # it runs the baseline's model file, asked of the runtime (a hint or a graph rewrite)
    peak: tuple[PeakPath, ...] = ()  # its peak arithmetic: the first path whose flag the CPU has (empty: FP32's)
    about: str = ""  # how it is reached, for the help text


PRECISIONS: tuple[Precision, ...] = (
    Precision("fp32", "FP32", "f32", baseline=True),
    Precision("bf16", "BF16", "bf16", cpu_flags=("amx_bf16", "avx512_bf16"), by_hint=True,
              without_flags="this CPU has neither AMX-BF16 nor AVX512_BF16, so BF16 would be emulated",
              peak=(PeakPath("amx_bf16", ops=AMX_BF16_OPS, words="BF16 on AMX-BF16"),
                    PeakPath("avx512_bf16", times_fp32=2, words="BF16 on AVX512_BF16 (2 x FP32)"),
                    PeakPath("", times_fp32=1, words="BF16 as FP32 (no BF16 instructions)"))),
    # The INT8 IR holds its quantized layers itself: the hint keeps the rest at f32.
    Precision("int8", "INT8", "f32", needs_data=True, cpu_flags=("amx_int8", "avx512_vnni", "avx_vnni", "avx2"),
              without_flags="this CPU lacks the vector instructions OpenVINO needs for INT8",
              peak=(PeakPath("amx_int8", ops=AMX_INT8_OPS, words="INT8 on AMX-INT8"),
                    PeakPath("avx512_vnni", times_fp32=4, words="INT8 on AVX512_VNNI (4 x FP32)"),
                    PeakPath("avx_vnni", times_fp32=4, words="INT8 on AVX_VNNI (4 x FP32)"),
                    PeakPath("", times_fp32=2, words="INT8 at 2 x FP32 (no VNNI)")),
              about="OpenVINO INT8 variant by NNCF"),
)  # from the widest to the narrowest
NAMES: tuple[str, ...] = tuple(p.name for p in PRECISIONS)


def precision(name: str) -> Precision:
    """A precision by its name (KeyError for another)."""
    for p in PRECISIONS:
        if p.name == str(name).lower():
            return p
    raise KeyError(name)


def baseline() -> str:
    """The precision the others are measured against."""
    return next(p.name for p in PRECISIONS if p.baseline)


def reduced() -> tuple[str, ...]:
    """The precisions other than the baseline, in the declared order."""
    return tuple(p.name for p in PRECISIONS if not p.baseline)


def narrowest_first() -> tuple[str, ...]:
    """The precisions from the narrowest to the widest (the declared order reversed): the order the
    quickest variants are measured first in."""
    return tuple(reversed(NAMES))


def from_data() -> tuple[str, ...]:
    """The precisions whose variant is built from calibration data (`needs_data`)."""
    return tuple(p.name for p in PRECISIONS if p.needs_data)


def hinted() -> tuple[str, ...]:
    """The precisions that run the baseline's model file, asked of the runtime (`by_hint`)."""
    return tuple(p.name for p in PRECISIONS if p.by_hint)


def ov_hint(name: str) -> str:
    """OpenVINO's INFERENCE_PRECISION_HINT for a precision (the baseline's for an unknown one)."""
    try:
        return precision(name).ov_hint
    except KeyError:
        return precision(baseline()).ov_hint


def help_text() -> str:
    """The precisions as the sweep's help names them: `fp32, bf16, int8 (int8: OpenVINO INT8 variant by NNCF)`."""
    notes = "; ".join(f"{p.name}: {p.about}" for p in PRECISIONS if p.about)
    return ", ".join(NAMES) + (f" ({notes})" if notes else "")
