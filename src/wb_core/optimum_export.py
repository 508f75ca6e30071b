"""optimum-intel's export of a Hugging Face folder to an OpenVINO GenAI folder, through its own
command line (`optimum-cli export openvino --task text-generation-with-past`), run as a child of
the worker that asks: its logs and exit status stay its own. Needs the `hf` extra."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from wb_core.errors import ModelError


def export_to_openvino_genai(hf_dir: str | Path, out: str | Path, weight_format: str = "fp32") -> None:
    """Convert `hf_dir` into `out` (nothing is downloaded: the hub is offline); a failure is one sentence."""
    cmd = [sys.executable, "-c", "from optimum.commands.optimum_cli import main; main()", "export", "openvino",
           "--model", str(hf_dir), "--task", "text-generation-with-past", "--weight-format", weight_format, str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if done.returncode != 0 or not (Path(out) / "openvino_model.xml").is_file():
        tail = " ".join(done.stderr.strip().splitlines()[-2:])[-400:]
        raise ModelError(f"optimum-intel could not convert '{hf_dir}' to an OpenVINO GenAI folder: {tail}")
