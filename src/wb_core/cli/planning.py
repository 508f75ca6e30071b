"""`wb plan` and `wb capacity`: core allocation and capacity from a study's measurements."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from wb_core.cli.app import app, echo, number


@app.command()
def plan(study: str = typer.Option(..., "--study"), db: Optional[Path] = typer.Option(None, "--db"),
         machine_cores: Optional[int] = typer.Option(None, "--machine-cores",
                                                     help="Plan for a machine of this many cores (default: this one)."),
         p99_ms: Optional[float] = typer.Option(None, "--p99-ms", parser=number,
                                                help="Only use points under this p99."),
         verify: bool = typer.Option(False, "--verify", help="Run the top candidate for real where it fits here."),
         as_json: bool = typer.Option(False, "--json")):
    """Best split of the machine's cores into instances x cores per instance."""
    from wb_core.api import hardware_info, plan_allocation, results, study_info, verify_allocation
    from wb_core.faces import check_plan_inputs, default_db

    check_plan_inputs(machine_cores, p99_ms)  # before the database is read
    db = db or default_db()
    df = results(study, db, "stored")
    cands = plan_allocation(df, machine_cores, p99_ms)
    out = {"candidates": [c.to_dict() for c in cands]}
    here = len(hardware_info().available_cpus)
    top = cands[0]
    if verify and top.instances * top.cores_per_instance <= here:
        model = study_info(study, db)["model_path"]
        out["verified"] = verify_allocation(model, top, db, study)
    if as_json:
        echo(json.dumps(out, indent=2, default=str))
        return
    for i, c in enumerate(cands, 1):
        echo(f"{i}. {c.describe()}")
    if "verified" in out:
        v = out["verified"]
        echo(f"Verified: {v['measured_throughput']:,.1f} samples/s measured vs "
                   f"{v['predicted_throughput']:,.1f} predicted (ratio {v['ratio']:.2f}).")
    elif verify:
        echo(f"Not verified: the plan needs {top.instances * top.cores_per_instance} cores, this machine has {here}.")


@app.command()
def capacity(study: str = typer.Option(..., "--study"), db: Optional[Path] = typer.Option(None, "--db"),
             rate: float = typer.Option(..., "--rate", parser=number, help="Target requests per second (1000, "
                                                                                   "1e3 or 1k)."),
             p99_ms: float = typer.Option(..., "--p99-ms", parser=number, help="p99 latency target in ms."),
             headroom: float = typer.Option(0.2, "--headroom", help="Fraction of capacity kept spare."),
             machine_cores: Optional[int] = typer.Option(None, "--machine-cores"),
             as_json: bool = typer.Option(False, "--json")):
    """Instances, replicas and CPU requests that serve a target rate under a p99 target."""
    from wb_core.api import capacity as plan_capacity
    from wb_core.api import results
    from wb_core.faces import check_capacity_inputs, default_db

    check_capacity_inputs(rate, p99_ms, headroom, machine_cores)  # before the database is read
    from wb_core.faces import load_serve_checks

    cap = plan_capacity(results(study, db or default_db(), "measurements"), rate, p99_ms, headroom, machine_cores,
                        serve_checks=load_serve_checks(db or default_db(), study))
    echo(json.dumps(cap.to_dict(), indent=2, default=str) if as_json else cap.describe())
