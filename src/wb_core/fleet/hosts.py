"""Who a fleet host is: its name, its hardware and the hardware type (fingerprint) it reports.

Two environment variables, read on the host itself, let an operator label hosts:

- `WB_HOST_LABEL`: the host's name in the results (default: the engine's worker name, else the
  machine's hostname).
- `WB_HARDWARE_TYPE`: the hardware type to report instead of the detected fingerprint. Meant for
  tests (two workers on one machine that should count as different CPU types) and for telling
  apart hosts that detection cannot, e.g. the same CPU model behind different memory.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from wb_core import hardware

HOST_LABEL_ENV = "WB_HOST_LABEL"
HARDWARE_TYPE_ENV = "WB_HARDWARE_TYPE"


@dataclass(frozen=True)
class Host:
    """One host of a fleet, as its engine reaches it (`id`) and as the results name it (`name`)."""

    id: str
    name: str
    fingerprint: str
    detected_fingerprint: str
    hardware: dict = field(hash=False, compare=False)
    machine: str = ""
    nthreads: int | None = None

    def to_hardware(self) -> hardware.Hardware:
        return hardware.Hardware(**self.hardware)

    def describe(self) -> str:
        hw = self.hardware
        label = f"{self.name:16} type {self.fingerprint}"
        if self.fingerprint != self.detected_fingerprint:
            label += f" (labelled; detected {self.detected_fingerprint})"
        return (f"{label}  {hw.get('cpu_model')}, {len(hw.get('available_cpus') or [])} usable CPUs"
                + (f", {self.nthreads} engine threads" if self.nthreads else ""))


def describe_this_host(worker_name: str | None = None) -> dict:
    """This machine's identity and hardware, as a plain dict (runs on the host)."""
    hw = hardware.detect()
    return {
        "name": os.environ.get(HOST_LABEL_ENV) or worker_name or socket.gethostname(),
        "fingerprint": os.environ.get(HARDWARE_TYPE_ENV) or hw.fingerprint,
        "detected_fingerprint": hw.fingerprint,
        "machine": socket.gethostname(),
        "hardware": hw.to_dict(),
    }


def by_type(hosts: list[Host]) -> dict[str, list[Host]]:
    """Hosts grouped by hardware type, in the order first seen."""
    out: dict[str, list[Host]] = {}
    for h in hosts:
        out.setdefault(h.fingerprint, []).append(h)
    return out
