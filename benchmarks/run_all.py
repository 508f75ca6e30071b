"""`make bench`: run every benchmark script in this folder and print their tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ["harness_overhead.py", "sweep_cost.py", "instances.py", "precision_throughput.py"]

if __name__ == "__main__":
    for script in SCRIPTS:
        print(f"\n=== {script} ===", flush=True)
        subprocess.run([sys.executable, str(HERE / script)], check=True)
