"""`wb hosts` and `wb compare-hosts`: the hosts of a cluster, and a fleet study's host types side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from wb_core.cli.app import app, echo, number

# Spelled out here rather than imported from cli_analysis: `python -m wb_core.cli` imports the
# command modules while cli_analysis is still half-initialised.
MAX_P99 = typer.Option(None, "--max-p99-ms", parser=number, help="Highest acceptable p99 latency, in ms.")
MAX_DROP = typer.Option(None, "--max-accuracy-drop", help="Highest acceptable accuracy drop, a fraction.")
MAX_MEM = typer.Option(None, "--max-memory-mb", help="Highest acceptable peak memory, in MB.")
MAX_CORES = typer.Option(None, "--max-cores", help="Most cores the run may use.")
OBJECTIVE = typer.Option("throughput", "--objective", help="throughput, latency or throughput_per_core.")


@app.command()
def hosts(cluster: str = typer.Option(..., "--cluster", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786."),
          only: Optional[str] = typer.Option(None, "--hosts", help="Only these hosts (comma-separated).")):
    """List the hosts of a cluster with the hardware type each reports."""
    from wb_core.faces import cluster_hosts

    found = cluster_hosts(cluster, only)
    for h in found:
        echo(h.describe())
    echo(f"{len(found)} host(s), {len({h.fingerprint for h in found})} hardware type(s).")


@app.command("compare-hosts")
def compare_hosts(study: str = typer.Option(..., "--study"), db: Optional[Path] = typer.Option(None, "--db"),
                  price: list[str] = typer.Option([], "--price", help="USD per host-hour of a host, hardware type "
                                                  "or CPU model: NAME=1.20 (repeatable)."),
                  max_p99_ms: Optional[float] = MAX_P99, max_accuracy_drop: Optional[float] = MAX_DROP,
                  max_memory_mb: Optional[float] = MAX_MEM, max_cores: Optional[int] = MAX_CORES,
                  objective: str = OBJECTIVE,
                  out: Optional[Path] = typer.Option(None, "--out", help="Also write the figures to this HTML file.")):
    """Best configuration per hardware type of a fleet study, throughput per core and cost per million."""
    from wb_core.api import Constraints
    from wb_core.faces import check_output_file, config_by_host_type, default_db, load_comparison, parse_prices

    if out:
        check_output_file(out)
    constraints = Constraints(max_p99_ms=max_p99_ms, max_accuracy_drop=max_accuracy_drop, max_memory_mb=max_memory_mb,
                              max_cores=max_cores)
    comparison, df = load_comparison(db or default_db(), study, constraints, objective, parse_prices(price))
    for _, r in comparison.iterrows():
        echo(f"{r['hardware_fingerprint']}  {r['cpu_model'] or '?'}  hosts: {r['hosts'] or '?'}")
        if r["best_config"] is None:
            echo(f"  no recommendation: {r['note']}")
            continue
        cost = (f", {r['cost_per_million']:.4g} USD per million inferences at {r['price_per_hour']:g} USD/h"
                if r["cost_per_million"] is not None and r["cost_per_million"] == r["cost_per_million"] else "")
        echo(f"  best: {r['best_config']} (key {r['best_key']}): {r['throughput']:,.0f} samples/s, p99 "
                   f"{r['latency_ms_p99']:.3g} ms, {r['throughput_per_core']:,.0f} per core{cost}")
        echo(f"  runs: {r['runs_ok']} ok, {r['runs_failed']} failed")
    table = config_by_host_type(df)
    if not table.empty:
        echo("\nThroughput (samples/s) of each configuration by hardware type:")
        echo(table.round(1).to_string())
    if out:
        from wb_core.faces import host_type_bars, host_type_scatter, write_output_file

        figs = [host_type_bars(comparison), host_type_scatter(df)]
        html = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Host types</title></head><body>"
                + "".join(f.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, f in enumerate(figs))
                + "</body></html>")
        write_output_file(out, html)
        echo(f"\nWrote {out}")
