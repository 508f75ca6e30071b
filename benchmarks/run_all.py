"""`make bench`: run every benchmark, print their tables, and write BENCHMARKS.md.

    python benchmarks/run_all.py [--quick] [--only fidelity,noise] [--out BENCHMARKS.md]

Each script runs in its own process with the arguments below (sized so that the whole run fits in
about 45 minutes on a quiet 2-core machine); `--quick` gives each its smoke-test size instead.
BENCHMARKS.md holds the machine's description, the command to reproduce, and every table.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# (section title, script, arguments of the full run, arguments of --quick)
SCRIPTS = [
    ("Fidelity", "fidelity.py", [], ["--quick"]),
    ("ONNX Runtime fidelity", "onnxruntime_fidelity.py", ["--rounds", "5", "--seconds", "4"], ["--quick"]),
    ("Text generation fidelity", "genai_fidelity.py", [], ["--quick"]),
    ("Text lengths", "text_lengths.py", [], ["--quick"]),
    ("Harness overhead", "harness_overhead.py", [], ["--rounds", "1", "--seconds", "1"]),
    ("Search efficiency", "search_efficiency.py", [], ["--quick"]),
    ("Value of tuning", "value_of_tuning.py", [], ["--quick"]),
    ("Noise", "noise.py", [], ["--quick"]),
    ("Comparison design", "comparison_design.py", [], ["--quick"]),
    ("Sweep cost", "sweep_cost.py", ["--max-time", "3"], ["--max-time", "1"]),
    ("Instances", "instances.py", ["--max-time", "2"], ["--max-time", "1", "--models", "lenet-digits"]),
    ("Precision throughput", "precision_throughput.py", ["--rounds", "3"],
     ["--rounds", "1", "--seconds", "1", "--batch", "1"]),
    ("INT8 recipes", "int8_recipes.py", [], ["--quick"]),
    ("Serving", "serving.py", [], ["--quick"]),
    ("Pipeline", "pipeline.py", [], ["--quick"]),
    ("Training", "training.py", [], ["--quick"]),
    # The fleet rehearsal at three sizes: where the coordinator's event latency starts to climb.
    ("Fleet at scale, 10 workers", "fleet_scale.py", ["--workers", "10"], ["--workers", "8", "--points", "100"]),
    ("Fleet at scale, 25 workers", "fleet_scale.py", ["--workers", "25"], ["--workers", "10", "--points", "100"]),
    ("Fleet at scale, 50 workers", "fleet_scale.py", ["--workers", "50"], ["--workers", "12", "--points", "100"]),
]


def run_script(script: str, args: list[str]) -> tuple[int, str, float]:
    """Run one script, echoing its output as it comes; (exit code, stdout, seconds)."""
    print(f"\n=== {script} {' '.join(args)} ===", flush=True)
    t0 = time.perf_counter()
    # This checkout's source first, whatever the environment has installed.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, str(HERE / script), *args], stdout=subprocess.PIPE, text=True, env=env)
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line)
    return proc.wait(), "".join(lines), time.perf_counter() - t0


def machine_section() -> str:
    sys.path.insert(0, str(ROOT / "src"))
    from wb_core.api import describe_hardware
    from wb_core.sweep.context import library_versions

    versions = ", ".join(f"{k} {v}" for k, v in library_versions().items())
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"```text\n{describe_hardware()}\n```\n\nSoftware: {versions}; {platform.platform()}.\n\n"
            f"Load average when the run started (1, 5, 15 min): {load}. Other work on the machine shows up as "
            f"noise in every table; compare runs taken on a quiet machine.\n")


def table_machine(load_before, load_after) -> str:
    """The CPU and the load around one table, printed with it (a table read alone still names its machine)."""
    sys.path.insert(0, str(ROOT / "src"))
    from wb_core.api import hardware_info

    hw = hardware_info()
    line = (f"CPU: {hw.cpu_model} ({hw.microarchitecture}), {len(hw.available_cpus)} CPUs usable; load average "
            f"(1, 5, 15 min) {', '.join(f'{x:.2f}' for x in load_before)} before, "
            f"{', '.join(f'{x:.2f}' for x in load_after)} after.")
    print(line, flush=True)
    return line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="every benchmark at its smoke-test size (a few minutes)")
    ap.add_argument("--only", default="", help="comma-separated script names to run, e.g. fidelity,noise")
    ap.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    a = ap.parse_args()
    only = {s.removesuffix(".py") for s in a.only.split(",") if s}
    chosen = [s for s in SCRIPTS if not only or s[1].removesuffix(".py") in only]
    started = _dt.datetime.now().astimezone()
    machine = machine_section()
    sections, failed = [], []
    t0 = time.perf_counter()
    for title, script, full, quick in chosen:
        args = quick if a.quick else full
        load_before = os.getloadavg()
        code, out, secs = run_script(script, args)
        load_after = os.getloadavg()
        if code != 0:
            failed.append(script)
        command = shlex.join(["python", f"benchmarks/{script}", *args])
        status = "" if code == 0 else f" **(failed with exit code {code})**"
        sections.append(f"## {title}\n\n"
                        f"`{command}` ({secs:.0f} s){status}\n\n{table_machine(load_before, load_after)}\n\n"
                        f"```text\n{out.strip()}\n```\n")
    total = time.perf_counter() - t0
    reproduce = "python benchmarks/run_all.py" + (" --quick" if a.quick else "") + (f" --only {a.only}" if only else "")
    doc = (f"# Benchmarks\n\nWritten by `{reproduce}` (`make bench` runs the full set) on "
           f"{started:%Y-%m-%d %H:%M %Z}, in {total / 60:.1f} minutes"
           + (" at smoke-test size: the figures show the tables work, not what the machine can do" if a.quick else "")
           + ". How to read each table: docs/benchmarks.md.\n\n## Machine\n\n" + machine + "\n"
           + "\n".join(sections))
    a.out.write_text(doc, encoding="utf-8")
    print(f"\nWrote {a.out} ({total / 60:.1f} minutes).")
    if failed:
        sys.exit(f"Failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
