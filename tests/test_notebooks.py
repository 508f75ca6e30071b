"""Every notebook in notebooks/ runs top to bottom, shrunk, and shows what it promises.

Each notebook runs in a kernel started the way JupyterLab and Voila start one, environment
included (colour forced on: `jupyter_kernel_env` in conftest), so a library that colours its
output in a kernel breaks the test as it would break an analyst's run. Like papermill, the
overrides go into a new cell right after the cell tagged `parameters`; a notebook without that
cell, or without a parameter the test shrinks, fails loudly rather than running full size. One
more cell, appended, prints a JSON summary of the notebook's variables.

The checks read the executed notebook's outputs: the tables (the HTML pandas shows), the plotly
figures and the printed lines, plus that summary and the files a notebook writes. A notebook
whose metadata `wb.requires` names a module that is missing here is skipped, saying which.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import math
import os
import re
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the ui extra is not installed (pip install -e '.[ui]')")
nbclient = pytest.importorskip("nbclient", reason="the ui extra is not installed (pip install -e '.[ui]')")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# Small enough for a 2-core machine: short windows, few points.
SHRINK = {"max_time": 0.3}
SHRINK_PER_NOTEBOOK = {
    "03-batch-size": {"batch_sizes": "1,4"},
    "08-text-model": {"seq_lens": "16,64", "batch_sizes": "1"},
    "06-pipeline": {"model": "lenet-digits", "frames": 24, "width": 160, "height": 96, "image_scale": "unit",
                    "pre_workers": "0,1", "batch": 4, "batch_sizes": "1,4", "rounds": 1},
}
# Notebooks without a model-call profile: their own shrink replaces SHRINK.
SHRINK_INSTEAD = {"07-training-threads": {"samples": 512, "batch": 64, "epochs": 1, "rounds": 1},
                  "09-text-generation": {"threads": "1", "concurrency": "1,2", "weight_formats": "none,int8_asym",
                                         "prompt_len": "16", "output_len": "8", "requests": 3}}
# Notebooks that take over a minute here even shrunk (TensorFlow training workers).
SLOW = {"07-training-threads"}
# These quantize afresh instead of reusing the test cache's INT8 IR, so the quantizing worker
# runs under the kernel's environment every time.
FRESH_INT8 = {"04-int8-accuracy"}
# The demo this notebook needs built before the kernel starts (built once per test cache).
DEMOS_NEEDED = {"08-text-model": "text-encoder", "09-text-generation": "text-generator"}
SUMMARY_MARK = "WB-NOTEBOOK-SUMMARY "
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


# ---- running a notebook


def inject_parameters(nb, values: dict) -> None:
    """Insert a cell setting `values` after the `parameters` cell; fail if it or a name is missing."""
    idx = [i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(idx) != 1:
        raise AssertionError(f"expected exactly one cell tagged 'parameters', found {len(idx)}")
    source = nb.cells[idx[0]].source
    for name in values:
        if not any(line.split("=")[0].strip() == name for line in source.splitlines() if "=" in line):
            raise AssertionError(f"the parameters cell does not define '{name}'")
    cell = nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in values.items()))
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(idx[0] + 1, cell)


def append_summary(nb, expression: str) -> None:
    """Append a cell printing `expression` (evaluated in the notebook's namespace) as one JSON line."""
    cell = nbformat.v4.new_code_cell(f"import json as _json\nprint({SUMMARY_MARK!r} + _json.dumps({expression}, "
                                     "default=str))")
    cell.metadata["tags"] = ["test-summary"]
    nb.cells.append(cell)


def execute(nb, cwd: Path, monkeypatch) -> None:
    """Run `nb` in a fresh python3 kernel whose working folder is `cwd`; fail on the first error.

    The kernel inherits this process's environment: this checkout's wb_core on PYTHONPATH, the
    test cache (WB_CACHE_DIR, set in conftest) and whatever the caller's fixtures set.
    """
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        pytest.fail(f"a cell raised {e.ename}: {_ANSI.sub('', str(e.evalue))}\n{_ANSI.sub('', str(e))[-3000:]}",
                    pytrace=False)


# ---- reading what a notebook shows


@dataclass
class Table:
    """An HTML table a cell showed (a DataFrame), as header cells and rows of text keyed by them."""

    columns: list[str]
    rows: list[dict]

    def column(self, name: str) -> list[str]:
        return [r[name] for r in self.rows]


class _TableParser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables: list[dict] = []
        self._part = self._row = self._cell = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append({"thead": [], "tbody": []})
        elif tag in ("thead", "tbody") and self.tables:
            self._part = tag
        elif tag == "tr" and self._part:
            self._row = []
            self.tables[-1][self._part].append(self._row)
        elif tag in ("th", "td") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("th", "td") and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr":
            self._row = None
        elif tag in ("thead", "tbody"):
            self._part = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and "test-summary" not in c.metadata.get("tags", [])]


def tables(nb) -> list[Table]:
    """Every table the notebook's cells show, in order; the index is the column named by the first header row."""
    out = []
    for cell in code_cells(nb):
        for o in cell.get("outputs", []):
            html = o.get("data", {}).get("text/html") if o.output_type in ("execute_result", "display_data") else None
            if not html:
                continue
            parser = _TableParser()
            parser.feed(html)
            for t in parser.tables:
                if not t["thead"]:
                    continue
                columns = t["thead"][0]
                out.append(Table(columns, [dict(zip(columns, row)) for row in t["tbody"]]))
    return out


def find_table(nb, columns: set[str]) -> Table:
    shown = tables(nb)
    for t in shown:
        if columns <= set(t.columns):
            return t
    raise AssertionError(f"no table shows the columns {sorted(columns)}; the tables shown have "
                         f"{[t.columns for t in shown]}")


def _values(v) -> list:
    """A plotly array: a list, or the typed-array form {'dtype': 'f8', 'bdata': base64} plotly writes."""
    if isinstance(v, dict) and "bdata" in v:
        import numpy as np

        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"])).tolist()
    return list(v or [])


def figures(nb) -> list[dict]:
    """Every plotly figure the notebook shows, its traces' x and y decoded."""
    out = []
    for cell in code_cells(nb):
        for o in cell.get("outputs", []):
            fig = o.get("data", {}).get("application/vnd.plotly.v1+json") if "data" in o else None
            if fig:
                traces = [{**t, "x": _values(t.get("x")), "y": _values(t.get("y"))} for t in fig.get("data", [])]
                title = (fig.get("layout", {}).get("title") or {}).get("text", "")
                out.append({"title": title, "traces": traces})
    return out


def find_figure(nb, title_start: str) -> dict:
    shown = figures(nb)
    for f in shown:
        if f["title"].startswith(title_start):
            return f
    raise AssertionError(f"no figure titled '{title_start}…'; the figures shown are {[f['title'] for f in shown]}")


def stdout(nb, source_contains: str | None = None) -> str:
    """What the cells (or the one cell whose source contains `source_contains`) printed on stdout."""
    cells = [c for c in code_cells(nb) if source_contains is None or source_contains in c.source]
    assert cells, f"no cell contains {source_contains!r}"
    return "".join(o.text for c in cells for o in c.get("outputs", [])
                   if o.output_type == "stream" and o.name == "stdout")


def summary(nb):
    cell = nb.cells[-1]
    assert "test-summary" in cell.metadata.get("tags", [])
    lines = [line for o in cell.outputs if o.output_type == "stream" for line in o.text.splitlines()
             if line.startswith(SUMMARY_MARK)]
    assert len(lines) == 1, f"the summary cell printed {cell.outputs}"
    return json.loads(lines[0][len(SUMMARY_MARK):])


def number(text) -> float:
    value = float(text)
    assert math.isfinite(value), f"not a finite number: {text!r}"
    return value


# ---- what each notebook must show


def check_quickstart(nb, cwd: Path) -> None:
    table = find_table(nb, {"backend", "batch_size", "threads", "latency_ms_p99", "throughput", "status"})
    assert sorted((r["batch_size"], r["threads"]) for r in table.rows) == [("1", "1"), ("1", "2"), ("8", "1"),
                                                                             ("8", "2")], table.rows
    assert table.column("status") == ["ok"] * 4, table.rows
    assert all(number(r["throughput"]) > 0 and number(r["latency_ms_p99"]) > 0 for r in table.rows)
    printed = stdout(nb)
    assert "CPU" in printed and "savedmodel" in printed, printed
    best = max(table.rows, key=lambda r: number(r["throughput"]))
    assert f"Highest throughput: batch {best['batch_size']}, threads {best['threads']}:" in printed, printed


def check_threads_and_cores(nb, cwd: Path) -> None:
    found = re.search(r"(\d+) usable CPUs; thread ladder \[([\d, ]+)\]", stdout(nb))
    assert found, stdout(nb)
    cpus, ladder = int(found[1]), [int(t) for t in found[2].split(",")]
    fig = find_figure(nb, "Throughput vs inference threads")
    assert [t["x"] for t in fig["traces"]] == [ladder], fig["traces"]
    assert all(y > 0 for y in fig["traces"][0]["y"])
    cores = find_table(nb, {"cores", "threads", "throughput", "status"})
    assert [int(t) for t in cores.column("threads")] == ladder and cores.column("status") == ["ok"] * len(ladder)
    plan = find_table(nb, {"instances", "cores_per_instance", "predicted_throughput", "extrapolated"})
    assert plan.rows, "the planner's table has no rows"
    for r in plan.rows:  # every size was measured (the ladder ends at all CPUs): nothing extrapolated
        assert int(r["cores_per_instance"]) in ladder and r["extrapolated"] == "False", r
        assert int(r["instances"]) * int(r["cores_per_instance"]) <= cpus, r
        assert number(r["predicted_throughput"]) > 0, r


def check_batch_size(nb, cwd: Path) -> None:
    expected = [int(b) for b in SHRINK_PER_NOTEBOOK["03-batch-size"]["batch_sizes"].split(",")]
    table = find_table(nb, {"batch_size", "latency_ms_p50", "latency_ms_p99", "throughput"})
    assert [int(b) for b in table.column("batch_size")] == expected, table.rows
    assert all(number(r["throughput"]) > 0 for r in table.rows)
    fig = find_figure(nb, "Batch size: latency and throughput")
    assert len(fig["traces"]) == 2, fig["traces"]  # p99 latency and throughput of the one series
    for t in fig["traces"]:
        assert t["name"] == "OpenVINO FP32" and t["x"] == expected and all(y > 0 for y in t["y"]), t
    gain = find_table(nb, {"batch_size", "samples_per_s_per_ms"})
    assert [int(b) for b in gain.column("batch_size")] == expected


def check_int8_accuracy(nb, cwd: Path) -> None:
    from cpu_flags import bf16_native, int8_native

    native_here = {"fp32": True, "bf16": bf16_native(), "int8": int8_native()}  # from /proc/cpuinfo
    rows = summary(nb)  # the notebook's `df`, every column it needs and the errors in full
    by_precision: dict[str, list[dict]] = {}
    for r in rows:
        by_precision.setdefault(r["precision"], []).append(r)
    assert {"fp32", "int8"} <= set(by_precision), rows
    problems = []
    for precision, runs in by_precision.items():
        native, why_not = native_here[precision], f"{precision} is not native on this CPU's flags"
        for r in runs:
            where = f"{precision} batch {r['batch_size']}"
            if native and r["status"] != "ok":
                problems.append(f"{where}: {r['status']}: {r['error']}")
            elif not native and (r["status"] != "skipped" or not _present(r["error"])):
                problems.append(f"{where} should be skipped with a reason ({why_not}); got {r['status']}: {r['error']}")
    assert not problems, "\n".join(problems)
    fp32_accuracy = {r["batch_size"]: r["accuracy"] for r in by_precision["fp32"]}
    int8_ran = native_here["int8"]
    if int8_ran:
        for r in by_precision["int8"]:
            assert _present(r["accuracy"]) and 0 < r["accuracy"] <= 1, r
            assert _present(r["accuracy_drop"]) and r["accuracy_drop"] <= 0.01, r
            if _present(fp32_accuracy[r["batch_size"]]):
                assert r["accuracy"] >= fp32_accuracy[r["batch_size"]] - 0.01 - 1e-9, (r, fp32_accuracy)
    # The tables the analyst sees say the same.
    table = find_table(nb, {"precision", "batch_size", "accuracy", "accuracy_drop", "status"})
    assert [(r["precision"], r["batch_size"], r["status"]) for r in table.rows] == \
        [(r["precision"], str(r["batch_size"]), r["status"]) for r in rows]
    if int8_ran:
        speed = find_table(nb, {"fp32", "int8", "int8 speed-up"})
        assert sorted(int(r["precision"]) for r in speed.rows) == sorted({r["batch_size"] for r in rows})
        assert all(number(r["int8 speed-up"]) > 0 for r in speed.rows), speed.rows


def _present(value) -> bool:
    return value is not None and value == value and value != ""


def _check_exported_file(path: Path, fmt: str) -> None:
    """The file parses as what its name says it is."""
    import yaml

    text = path.read_text()
    assert text.strip(), f"{path} is empty"
    if path.suffix in (".yaml", ".yml"):
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
        assert docs and all(isinstance(d, dict) for d in docs), path
        if fmt == "kserve":
            assert docs[0]["kind"] == "InferenceService" and docs[0]["apiVersion"].startswith("serving.kserve.io/")
    elif path.suffix == ".json":
        assert isinstance(json.loads(text), dict), path
    elif path.name == "config.pbtxt":
        from google.protobuf import text_format
        from tritonclient.grpc import model_config_pb2

        cfg = text_format.Parse(text, model_config_pb2.ModelConfig())
        assert cfg.name == path.parent.name and (cfg.backend or cfg.platform), text
    elif path.name == "batching_parameters.txt":
        from google.protobuf import text_format

        from test_export import _batching_parameters_class

        msg = text_format.Parse(text, _batching_parameters_class()())
        assert msg.max_batch_size.value >= 1, text
    elif path.suffix == ".sh":
        assert os.access(path, os.X_OK), f"{path} is not executable"
        check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
    elif path.name != "NOTES.txt":
        raise AssertionError(f"no check for the exported file {path.name}: add one here")


def check_export(nb, cwd: Path) -> None:
    import yaml

    from wb_core.export import FORMATS
    from wb_core.export.deployment import DeploymentConfig

    rec_key = summary(nb)
    assert stdout(nb, "recommend(").strip(), "the recommendation's reason is not shown"
    shown_yaml = yaml.safe_load(stdout(nb, "render(dep"))
    listed = {}
    for line in stdout(nb, "export(dep").splitlines():
        name, _, files = line.partition(": ")
        listed[name] = files.split(", ")
    assert sorted(listed) == sorted(FORMATS), listed
    out = cwd / "exported"
    for fmt, files in listed.items():
        for rel in files:
            path = out / fmt / rel
            assert path.is_file(), f"{fmt}: {rel} is listed but not written"
            _check_exported_file(path, fmt)
    written = (out / "yaml" / "deployment.yaml").read_text()
    assert yaml.safe_load(written) == shown_yaml
    dep = DeploymentConfig.from_yaml(written)
    assert dep.measurement.run_key == rec_key and dep.measurement.study == "export"


def check_pipeline(nb, cwd: Path) -> None:
    rows = summary(nb)
    workers = sorted({int(r["pre_workers"]) for r in rows})
    assert workers == [0, 1], rows  # the serial loop and one preprocessing process, as shrunk
    for r in rows:
        assert r["status"] == "ok", r
        assert r["frames"] == r["frames_expected"] == SHRINK_PER_NOTEBOOK["06-pipeline"]["frames"], r
        assert r["throughput"] > 0 and r["bottleneck"] in ("preprocess", "inference", "balanced"), r
    assert find_figure(nb, "Frames per second against")  # the workers plot


def check_training(nb, cwd: Path) -> None:
    rows = summary(nb)
    assert rows and all(r["status"] == "ok" and r["epoch_s"] > 0 and r["throughput_per_core"] > 0 for r in rows), rows
    # The recommendation printed: the most cores whose samples/s per core is within 10% of the best,
    # worked out here from the notebook's own rows (one setting per number of cores).
    top = max(r["throughput_per_core"] for r in rows)
    expected = max(int(r["cores_given"]) for r in rows if r["throughput_per_core"] >= 0.9 * top)
    assert f"Give each training job {expected} core(s)" in stdout(nb), (expected, rows, stdout(nb))


def check_text_model(nb, cwd: Path) -> None:
    from cpu_flags import int8_native

    rows = summary(nb)
    lengths = [int(n) for n in SHRINK_PER_NOTEBOOK["08-text-model"]["seq_lens"].split(",")]
    assert sorted({r["seq_len"] for r in rows}) == lengths, rows
    int8_here = int8_native()  # from /proc/cpuinfo
    for r in rows:
        if r["precision"] == "fp32" or int8_here:
            assert r["status"] == "ok", r
            assert r["accuracy_metric"] == "cosine vs fp32" and r["data_source"].endswith("sample.txt'"), r
    assert "samples in sample.txt" in stdout(nb, "ensure_demo(")
    table = find_table(nb, {"precision", "seq_len", "batch_size", "latency_ms_p99", "throughput", "accuracy"})
    assert sorted(int(n) for n in table.column("seq_len")) == sorted(r["seq_len"] for r in rows)
    fig = find_figure(nb, "Sequence length: latency and throughput")
    series = {t["name"] for t in fig["traces"]}
    assert "fp32, batch 1" in series and all(t["x"] == lengths for t in fig["traces"]), fig["traces"]
    assert all(y > 0 for t in fig["traces"] for y in t["y"])
    if int8_here:
        assert "int8, batch 1" in series
        found = re.search(r"INT8 cosine similarity to FP32 \(sentence_embedding\): ([0-9.]+)", stdout(nb))
        assert found and 0.5 < float(found[1]) <= 1.0, stdout(nb)
        assert find_table(nb, {"fp32", "int8", "int8 speed-up"}).rows
    reason = stdout(nb, "recommend(df, seq_mix")
    assert f"80% at {lengths[0]}, 20% at {lengths[-1]}" in reason, reason


def check_text_generation(nb, cwd: Path) -> None:
    rows = summary(nb)
    shrink = SHRINK_INSTEAD["09-text-generation"]
    assert sorted({(r["variant"], r["concurrency"]) for r in rows}) == [("int8_asym", 1), ("int8_asym", 2), ("none", 1),
                                                                         ("none", 2)], rows
    for r in rows:
        assert r["status"] == "ok" and r["output_tokens"] == shrink["requests"] * int(shrink["output_len"]), r
    assert all(r["quality_top1_agreement"] is not None for r in rows if r["variant"] == "int8_asym"), rows
    assert "OpenVINO GenAI text-generation folder" in stdout(nb, "inspect_model(")
    fig = find_figure(nb, "Text generation: output tokens/s vs p99")
    # The legend names each weight format in words.
    assert {"the model's own", "INT8"} <= {t["name"] for t in fig["traces"]} or any(
        r["accuracy_guard"] == "failed" for r in rows), fig["traces"]
    # The pick: the most tokens/s among the runs the guard did not fail, worked out here from the rows.
    best = max((r for r in rows if r["accuracy_guard"] != "failed"), key=lambda r: r["output_tokens_per_s"])
    weights = {"none": "the model's own weights", "int8_asym": "INT8 weights"}[best["variant"]]
    assert stdout(nb, "recommend_generation(").startswith(f"OpenVINO GenAI · {weights} · "), (best, stdout(nb))
    assert (cwd / "exported-generation" / "model" / "graph.pbtxt").is_file()
    assert "HttpLLMCalculator" in stdout(nb, "export_generation(")


# Per notebook: what the summary cell prints (None: no summary cell), and the check.
CHECKS = {
    "01-quickstart": (None, check_quickstart),
    "02-threads-and-cores": (None, check_threads_and_cores),
    "03-batch-size": (None, check_batch_size),
    "04-int8-accuracy": ("df[['precision', 'batch_size', 'status', 'error', 'accuracy', 'accuracy_drop']]"
                         ".to_dict('records')", check_int8_accuracy),
    "05-export": ("rec.key", check_export),
    "06-pipeline": ("study[['pre_workers', 'status', 'frames', 'frames_expected', 'throughput', 'bottleneck']]"
                    ".to_dict('records')", check_pipeline),
    "07-training-threads": ("cores[['status', 'epoch_s', 'cores_given', 'throughput_per_core']].to_dict('records')",
                            check_training),
    "08-text-model": ("df[['precision', 'seq_len', 'batch_size', 'status', 'accuracy', 'accuracy_metric', "
                      "'data_source']].to_dict('records')", check_text_model),
    "09-text-generation": ("df[['variant', 'concurrency', 'status', 'output_tokens', 'output_tokens_per_s', "
                           "'quality_top1_agreement', 'accuracy_guard']].to_dict('records')", check_text_generation),
}


# ---- tests


def test_injection_refuses_a_notebook_without_parameters():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    with pytest.raises(AssertionError, match="tagged 'parameters'"):
        inject_parameters(nb, {"x": 2})


def test_every_notebook_is_here_and_checked():
    names = [p.stem for p in NOTEBOOKS]
    assert names == ["01-quickstart", "02-threads-and-cores", "03-batch-size", "04-int8-accuracy", "05-export",
                     "06-pipeline", "07-training-threads", "08-text-model", "09-text-generation"]
    assert sorted(CHECKS) == names


def test_table_reader_reads_a_dataframe_and_a_pivot():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"precision": ["fp32", "int8"], "batch_size": [1, 1], "throughput": [1.5, 3.0]})
    pivot = frame.pivot_table(index="batch_size", columns="precision", values="throughput")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("")])
    nb.cells[0].outputs = [nbformat.v4.new_output("execute_result", data={"text/html": f._repr_html_()})
                           for f in (frame, pivot)]
    first, second = tables(nb)
    assert first.columns == ["", "precision", "batch_size", "throughput"]
    assert first.column("precision") == ["fp32", "int8"] and first.column("throughput") == ["1.5", "3.0"]
    assert second.rows == [{"precision": "1", "fp32": "1.5", "int8": "3.0"}]


def test_kernel_runs_with_the_colour_environment_jupyter_gives_it(tmp_path, monkeypatch, jupyter_kernel_env):
    """The kernel the notebooks run in, and the processes it starts, see colour forced on."""
    names = sorted(jupyter_kernel_env)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import json, os, subprocess, sys\n"
        f"names = {names!r}\n"
        "child = subprocess.run([sys.executable, '-c', 'import json, os, sys; "
        "print(json.dumps({n: os.environ.get(n) for n in sys.argv[1:]}))', *names],\n"
        "                       capture_output=True, text=True, check=True).stdout\n"
        "print(json.dumps({'kernel': {n: os.environ.get(n) for n in names}, 'child': json.loads(child)}))")])
    execute(nb, tmp_path, monkeypatch)
    seen = json.loads(stdout(nb))
    for where in ("kernel", "child"):
        env = seen[where]
        assert env["FORCE_COLOR"] == "1" and env["CLICOLOR_FORCE"] == "1" and env["PY_COLORS"] == "1", seen
        # ipykernel names its own colour terminal (xterm-color) over the one JupyterLab passes.
        assert env["TERM"].startswith("xterm"), seen


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW else p for p in NOTEBOOKS],
                         ids=[p.stem for p in NOTEBOOKS])
def test_notebook_shows_its_results(path, tmp_path, monkeypatch, request, lenet_dir, jupyter_kernel_env):
    nb = nbformat.read(path, as_version=4)
    missing = [m for m in nb.metadata.get("wb", {}).get("requires", []) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}, which this checkout does not have")
    shrink = SHRINK_INSTEAD.get(path.stem, SHRINK)
    inject_parameters(nb, {**shrink, "db": str(tmp_path / "nb.db"), **SHRINK_PER_NOTEBOOK.get(path.stem, {})})
    expression, check = CHECKS[path.stem]
    if expression:
        append_summary(nb, expression)
    if path.stem in FRESH_INT8:
        request.getfixturevalue("cache_without_int8")
    if path.stem in DEMOS_NEEDED:
        from wb_core.demo import ensure_demo

        ensure_demo(DEMOS_NEEDED[path.stem])
    execute(nb, tmp_path, monkeypatch)
    assert (tmp_path / "nb.db").exists()
    check(nb, tmp_path)
