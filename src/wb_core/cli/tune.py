"""`wb tune`: one command from a model file to a confirmed, exported recommendation."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from wb_core.cli.app import app, echo, said


@app.command()
def tune(model: str = typer.Argument(..., help="Model path (SavedModel dir, .keras, .onnx, .xml) or a demo name."),
         time_budget: str = typer.Option("3m", "--time", help="Time budget for the whole tuning, e.g. 90s, 3m."),
         db: Optional[Path] = typer.Option(None, "--db"),
         study: Optional[str] = typer.Option(None, "--study", help="Study name (default: the model's, plus -tune)."),
         data: Optional[str] = typer.Option(None, "--data", help="Calibration and accuracy data: .npz, an image "
                                            "folder or demo:NAME (INT8 needs it)."),
         text: Optional[Path] = typer.Option(None, "--text", help="Text file, one sample per line (text models)."),
         tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", help="The model's tokenizer.json."),
         dynamic_size: Optional[int] = typer.Option(None, "--dynamic-size", help="Sequence length of a text model."),
         out: Optional[Path] = typer.Option(None, "--out", help="Folder for the exported YAML (default: "
                                            "STUDY-deploy).")):
    """Search, measure the leaders in rounds, confirm against the runtime's real defaults and export the
    recommendation, within a time budget; ends with the answer in words."""
    from wb_core.api import tune as _tune

    res = _tune(model, time_budget=time_budget, db=db, study=study, data=data, text=text, tokenizer=tokenizer,
                dynamic_size=dynamic_size, export_dir=out, on_progress=lambda m: echo(f"- {said(m)}"))
    for note in res.notes:
        echo(f"Note: {said(note)}")
    echo("")
    echo(said(res.answer))
