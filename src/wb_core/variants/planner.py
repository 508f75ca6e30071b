"""Precision variants and their accuracy, seen from the parent side of a sweep.

`VariantPlanner` answers three questions for the runner, per run config:
- can this precision run here (`infeasible`): INT8 needs calibration data and the OpenVINO
  backend; TensorFlow BF16 needs oneDNN's bfloat16 rewrite to really change something here;
- which file the worker loads (`path_for`): the FP32 IR, the SavedModel, or the cached INT8 IR;
- which columns every point of it gets (`columns_for`): the variant, and its accuracy measured
  once on the validation split with the variant's precision settings, with the drop against the
  FP32 variant of the same backend.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import math
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wb_core.accuracy import Metric, import_path_of, is_import_path, load_function, reference_targets, resolve_metric
from wb_core.backends.registry import get as get_backend
from wb_core.backends.registry import ir_backend, title
from wb_core.config import RunConfig
from wb_core.data import Dataset, ImageOptions, check_inputs, check_references, complete_inputs, load_dataset
from wb_core.errors import ConfigError, Sentence, WorkbenchError, WorkerError, counted, setting
from wb_core.paths import cache_dir
from wb_core.proc.parent import run_task
from wb_core.variants.description import ModelDescription
from wb_core.variants.family import OTHER
from wb_core.variants.guard import FAILED, PASSED, Guard, short_words
from wb_core.variants.quantize import DEFAULT_SUBSET, QuantizeSettings, ensure_int8_ir
from wb_core.variants.recipes import DEFAULT_BUDGET_S, DESCRIPTIONS, RECIPES, base_recipe, order_for


@dataclass
class PrecisionOptions:
    """Data, metric and quantization settings for precision variants and accuracy."""

    data: Any = None  # path, "demo:NAME", Dataset, arrays or iterable; None: the demo's data for a demo
    preprocess: Callable | None = None  # applied to every sample (API only)
    image: ImageOptions = field(default_factory=ImageOptions)
    metric: str | Callable | Metric = "auto"
    subset_size: int = DEFAULT_SUBSET  # calibration samples NNCF uses
    max_accuracy_drop: float | None = None  # set: accuracy-aware INT8 quantization
    accuracy: bool = True  # measure accuracy when data is at hand (against labels, else the FP32 outputs)
    output: str | None = None  # the output accuracy reads (by name); None: the first
    input_map: dict = field(default_factory=dict)  # model input -> array name in the data
    guard: Guard | float | str = "auto"  # the accuracy guard: "auto" (per metric), a largest drop, or "off"
    int8_recipe: str = "auto"  # the first INT8 recipe to try; "auto": the model family's own
    fallback_budget_s: float = DEFAULT_BUDGET_S  # time the INT8 fallbacks may take after the first recipe
    memory_budget_mb: float | None = None  # an evaluating worker's memory; None: half the free memory
    # The user's decoding of the judged output (a function, or its import path package.module:function):
    # a batch [n, ...] -> n task items (labels, sequences, strings) compared between FP32 and each variant.
    decode: str | Callable | None = None
    # Variant files built before, "backend/precision" -> path (e.g. the INT8 IR a study measured):
    # used as they are, so a confirmation measures the very model the study measured.
    variants: dict = field(default_factory=dict)

    def record(self) -> dict:
        """What a study stores of these options, so that a later confirmation can use them again."""
        data = self.data
        if isinstance(data, (str, Path)) and not str(data).startswith("demo:") and Path(data).exists():
            data = Path(data).resolve()
        out = {"data": str(data) if isinstance(data, (str, Path)) else None,
               "data_in_memory": data is not None and not isinstance(data, (str, Path)),
               "subset_size": self.subset_size, "metric": self.metric if isinstance(self.metric, str) else None,
               "max_accuracy_drop": self.max_accuracy_drop, "accuracy": self.accuracy, "output": self.output,
               "input_map": dict(self.input_map), "int8_recipe": self.int8_recipe,
               "fallback_budget_s": self.fallback_budget_s, "memory_budget_mb": self.memory_budget_mb,
               "guard": self.guard.limit if isinstance(self.guard, Guard) else self.guard,
               "decode": self.decode if isinstance(self.decode, str) else import_path_of(self.decode)
               if callable(self.decode) else None}
        if self.image != ImageOptions():
            out["image"] = dataclasses.asdict(self.image)
        return out

    def __post_init__(self):
        if not isinstance(self.guard, Guard):
            self.guard = Guard(self.guard)
        if self.int8_recipe != "auto" and self.int8_recipe not in RECIPES:
            raise ConfigError(f"Unknown INT8 recipe '{self.int8_recipe}'; choose from auto, {', '.join(RECIPES)}.")
        b = self.fallback_budget_s
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b) or b < 0:
            raise ConfigError(f"The INT8 fallback time budget must be a number of seconds of at least 0; got {b!r}.")
        if isinstance(self.metric, str) and self.metric.lower() != "auto":
            self.guard.check_metric(self.metric.lower())
        if not isinstance(self.subset_size, int) or self.subset_size < 1:
            raise ConfigError(f"The calibration subset size must be a whole number of at least 1; got {self.subset_size!r}.")
        if self.max_accuracy_drop is not None:
            d = self.max_accuracy_drop
            if not isinstance(d, (int, float)) or not math.isfinite(d) or d < 0:
                raise ConfigError(f"The maximum accuracy drop must be a number of at least 0; got {d!r}.")
            if (callable(self.metric) and not isinstance(self.metric, Metric)) or is_import_path(self.metric):
                raise ConfigError("Accuracy-aware quantization needs a built-in metric (top1, top5, mse, cosine), "
                                  "not a function.")
        m = self.memory_budget_mb
        if m is not None and (isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or m <= 0):
            raise ConfigError(f"The memory budget must be a number of megabytes above 0; got {m!r}.")
        if isinstance(self.metric, str):
            resolve_metric(self.metric)  # an unknown name fails here, before any work
        if self.decode is not None and not callable(self.decode):
            if not is_import_path(self.decode):
                raise ConfigError(f"The decoding is a function, or its import path package.module:function; got "
                                  f"{self.decode!r}.")
            load_function(str(self.decode), "decoding")  # a missing module or name fails here, before any work


MEMORY_SHARE = 0.5  # of the memory available when accuracy is measured: the default memory budget


def _demo_of(model: Path) -> str | None:
    from wb_core.demo_catalog import demo_name_of

    return demo_name_of(model)


class VariantPlanner:
    """Builds, caches and describes the precision variants of one model during one sweep."""

    def __init__(self, description: ModelDescription, options: PrecisionOptions | None, hw):
        self.description = description  # read once in preflight: format, fingerprint, inputs, outputs, ...
        self.hw = hw
        self.options = options or PrecisionOptions()
        self.notes: list[str] = []
        self._dataset: Dataset | None = None
        self._data_file: tuple[Path, str] | None = None
        self._loaded = False
        self._paths: dict[tuple, tuple[Path, dict]] = {}
        self._accuracy: dict[tuple, dict] = {}
        self._checked_ir = False
        self.input_options = None  # InputOptions of the sweep: random inputs for the guard need its sizes
        self.attempts: list[dict] = []  # every INT8 recipe tried: recipe, accuracy, drop, passed, seconds
        self._random: Dataset | bool | None = None  # random inputs for the guard; False: none can be drawn
        self._random_path: Path | None = None
        self.on_progress: Callable[[str], None] | None = None  # shows a long INT8 build's progress (the sweep's bar)
        self._spool: Path | None = None  # FP32's outputs, batch by batch, while the sweep runs

    # The model as preflight read it.
    @property
    def model(self) -> Path:
        return self.description.path

    @property
    def fmt(self) -> str:
        return self.description.format

    @property
    def fp(self) -> str:
        return self.description.fingerprint

    @property
    def inputs(self) -> list:
        return list(self.description.inputs)

    def _batch_axes(self) -> dict[str, int]:
        """Inputs whose batch is not on axis 0, as the workers that evaluate and quantize need them."""
        return {s.name: s.batch_axis for s in self.inputs if s.batch_axis}

    # ---- data ----
    def dataset(self) -> Dataset | None:
        """The user's data, else the demo's; None when there is neither."""
        if not self._loaded:
            self._loaded = True
            source = self.options.data
            if source is None:
                demo = _demo_of(self.model)
                source = f"demo:{demo}" if demo else None
            if source is not None:
                self._dataset = load_dataset(source, preprocess=self.options.preprocess, image=self.options.image,
                                             input_shape=self._ov_input_shape() if _is_folder(source) else None)
                self._dataset = self._dataset.renamed(self.options.input_map)
                # Inputs the data does not name (a recurrent state, a sample rate, a mask) get their default.
                self._dataset, notes = complete_inputs(self._dataset, self.inputs, self.description.declared_values,
                                                       self.input_options)
                for note in notes:
                    self._note(note)
        return self._dataset

    def _demo_has_data(self) -> bool:
        from wb_core.demo_catalog import demo_dir

        demo = _demo_of(self.model)
        return bool(demo) and (demo_dir(demo) / "data.npz").exists()

    def _data_path(self) -> tuple[Path, str]:
        if self._data_file is None:
            self._data_file = self.dataset().save()
        return self._data_file

    def _ov_input_shape(self) -> tuple[int, ...] | None:
        spec = self._input()
        return tuple(spec.shape) if spec else None

    def _input(self):
        """The model's single input (None for multi-input models)."""
        return self.inputs[0] if len(self.inputs) == 1 else None

    def check_data(self, configs: list[RunConfig]) -> None:
        """Fail early, with the expected input named, when the data cannot feed the model."""
        self.check_guard()
        wants_int8 = any(c.precision == "int8" for c in configs)
        if not configs or (self.options.data is None and not wants_int8):
            return  # a demo's own data fits its model
        if self.dataset() is None:
            return
        check_inputs(self.dataset().x, self.inputs, "data")
        if wants_int8 and not self.prequantized:
            check_inputs(self.dataset().calibration, self.inputs, "calibration data")
            have, asked = self.dataset().calibration_size, self.options.subset_size
            if asked != DEFAULT_SUBSET and asked > have:  # the default takes what there is, up to 300
                which = "calibration arrays" if self.dataset().x_calib is not None else "data"
                raise ConfigError(f"Calibration ({setting('subset_size', 'calibration size')}) asks for {asked} samples, but "
                                  f"the {which} from {self.dataset().source} hold {have}; give at most {have}.")
        outputs = list(self.description.outputs)
        check_references(self.dataset(), outputs)
        if self.options.output and outputs and self.options.output not in outputs:
            raise ConfigError(f"The model has no output '{self.options.output}' (its outputs: {', '.join(outputs)}).")

    def check_guard(self) -> None:
        """A guard limit that the metric `auto` picks cannot use (1 or more for cosine or top-1) is refused
        before any work, as it is for a metric named: without labels (or without data) the metric is
        cosine to the FP32 or reference outputs, with class labels top-1."""
        metric = self.options.metric
        if not isinstance(self.options.guard.limit, float) or not isinstance(metric, str) or metric.lower() != "auto":
            return  # off, per metric, or a metric named (checked when the options were made)
        ds = self.dataset()
        if ds is not None and ds.has_labels:
            picked = resolve_metric(metric, ds.y)
            why = f"{picked.name} is the metric auto picks for the class labels of the data"
        else:
            picked = reference_targets(metric, np.zeros((1, 1), np.float32))[0]
            why = f"{picked.name} is the metric auto picks when the data has no labels"
        self.options.guard.check_metric(picked.name, why)

    @property
    def prequantized(self) -> bool:
        """The model holds INT8 weights already (quantized before it reached the workbench)."""
        return self.description.quantized == "int8"

    def adapt(self, configs: list[RunConfig]) -> list[RunConfig]:
        """A model quantized beforehand runs as what it is, as int8 points. Where its float graph can be
        made (the quantizers removed from its IR), its fp32 points run that, beside an int8 twin each,
        so that INT8 is compared with FP32; elsewhere its fp32 points are int8 points, said why."""
        if not self.prequantized or not any(c.precision == "fp32" for c in configs):
            return configs
        import dataclasses

        out: dict[str, RunConfig] = {}
        for c in configs:
            if c.precision == "fp32" and self._has_float_graph(c.backend):
                out.setdefault(c.key, c)
                twin = dataclasses.replace(c, precision="int8")  # the model as it is
                out.setdefault(twin.key, twin)
                self._note(f"'{self.model.name}' holds INT8 weights already (quantized beforehand): its int8 runs "
                           f"are the model as it is; its fp32 runs are its float graph, the quantizers removed and "
                           f"the integer weights dequantized (the float weights they came from are not in the file), "
                           f"so that INT8 can be compared with FP32.")
                continue
            if c.precision == "fp32":
                self._note(f"'{self.model.name}' holds INT8 weights already (quantized beforehand): on "
                           f"{title(c.backend)} its runs are listed as precision int8, variant int8-ir, and it has no "
                           f"FP32 runs: {title(c.backend)} runs the file as it is, and the float graph the workbench "
                           f"makes is an OpenVINO IR.")
                c = dataclasses.replace(c, precision="int8")
            out.setdefault(c.key, c)
        return list(out.values())

    def _has_float_graph(self, backend: str) -> bool:
        """The float graph of a model quantized beforehand is an IR with its quantizers removed: the
        backends that load IRs run it (a model OpenVINO cannot read has none)."""
        return self.prequantized and get_backend(backend).loads == "openvino-ir" and not self.description.only_backends

    # ---- feasibility and files ----
    def _given(self, backend: str, precision: str) -> Path | None:
        path = self.options.variants.get(f"{backend}/{precision}")
        return Path(path) if path and Path(path).exists() else None

    def infeasible(self, cfg: RunConfig) -> str | None:
        backend = get_backend(cfg.backend)
        alone = self._sole_backend_reason(cfg)
        if alone:
            return alone
        if cfg.precision == "int8" and (self.prequantized or self._given(cfg.backend, "int8")):
            return None
        if cfg.precision == "int8":
            if backend.int8_via:
                return f"int8 skipped: {backend.int8_via}"
            if self.dataset() is None:
                # stored with the point and read by every face: the setting in plain words
                return ("int8 skipped: quantizing needs calibration data; give data: an .npz, an image folder "
                        "or demo:NAME")
        if cfg.precision == "bf16" and backend.bf16_via:
            return f"bf16 skipped: {backend.bf16_via}"
        if cfg.precision == "bf16" and backend.bf16_probe:
            probe = tf_bf16_probe(self.hw)
            if not probe.get("effective"):
                return ("bf16 skipped: TensorFlow's oneDNN bfloat16 rewrite changes nothing on this CPU, so the run "
                        "would be FP32")
        return None

    def _sole_backend_reason(self, cfg: RunConfig) -> str | None:
        """Why a point cannot run when the model runs on some backends only (one OpenVINO cannot read)."""
        only = self.description.only_backends
        if not only:
            return None
        others = " or ".join(title(b) for b in only)
        if cfg.backend not in only:
            return f"{title(cfg.backend)} skipped: {self.description.only_reason}; profile it with {others}"
        backend = get_backend(cfg.backend)
        if cfg.precision == "int8" and backend.int8_via:
            return (f"int8 skipped: the INT8 variant is an OpenVINO IR made by NNCF, and this model runs on {others} "
                    f"only ({self.description.only_reason})")
        if cfg.precision == "bf16" and backend.bf16_via:
            return f"bf16 skipped: {backend.bf16_via.split(';')[0]}, and this model runs on {others} only"
        return None

    def path_for(self, cfg: RunConfig) -> Path:
        return self._variant(cfg.backend, cfg.precision)[0]

    def _variant(self, backend: str, precision: str) -> tuple[Path, dict]:
        key = (backend, precision)
        if key not in self._paths:
            if precision == "int8" and self._given(backend, precision):
                path = self._given(backend, precision)
                info = {"variant": "int8-ir", "variant_note": "the INT8 IR the study measured, used again"}
            elif precision == "int8" and self.prequantized:
                from wb_core.variants.convert import variant_path

                path = variant_path(backend, self.model, self.fmt, self.fp)
                info = {"variant": "int8-ir", "variant_note": "INT8 model quantized beforehand"}
            elif precision == "int8":
                path, info = self._int8()
            elif self._has_float_graph(backend):
                from wb_core.variants.convert import ensure_float_ir

                path, removed = ensure_float_ir(self.model, self.fmt, self.fp)
                info = {"variant": "fp32-ir",
                        "variant_note": f"the float graph of a model quantized beforehand: {removed} quantizer(s) "
                                        f"removed, its integer weights dequantized"}
                if precision == "bf16" and get_backend(backend).bf16_note:
                    info["variant_note"] += f"; {get_backend(backend).bf16_note}"
            else:
                from wb_core.variants.convert import variant_path

                path = variant_path(backend, self.model, self.fmt, self.fp)
                loads = get_backend(backend).loads
                info = {"variant": "fp32-ir" if loads == "openvino-ir" else loads}
                if precision == "bf16" and get_backend(backend).bf16_note:
                    info["variant_note"] = get_backend(backend).bf16_note
            info["variant_path"] = str(path)  # the file the worker loaded (layer profiles and exports need it)
            self._paths[key] = (path, info)
        return self._paths[key]

    def _int8(self) -> tuple[Path, dict]:
        """The INT8 variant: the model family's recipe, then fallbacks until one passes the accuracy guard."""
        data_path, data_fp = self._data_path()
        metric = self.options.metric
        common = dict(subset_size=self.options.subset_size, output=self.options.output,
                      metric=metric.name if isinstance(metric, Metric) else str(metric),
                      batch_axes=tuple(sorted(self._batch_axes().items())))
        basis = self._basis(ir_backend())  # the INT8 variant is an IR, judged where IRs run
        limit = self.options.guard.limit_for(basis["metric"].name) if basis and "metric" in basis else None
        judged = bool(basis and "metric" in basis and not self.options.guard.off and
                      (limit is not None or any(k["kind"] for k in basis["kinds"])))
        started, budget = time.monotonic(), float(self.options.fallback_budget_s)
        family = self.description.family or OTHER  # read once, by the description: the recipe follows it
        single = self.options.max_accuracy_drop is not None  # the user's own accuracy-aware quantization
        queue, tried, best = ["accuracy-control"] if single else list(order_for(family, self.options.int8_recipe)), \
            set(), None
        while queue:
            recipe = queue.pop(0)
            if recipe in tried:
                continue
            spent = time.monotonic() - started
            if self.attempts and spent > budget:
                self._note(f"INT8 fallbacks stopped at their time budget ({budget:g} s) after "
                           f"{counted(len(self.attempts), 'recipe')}; {', '.join(queue + [recipe])} not tried.")
                break
            base = best["recipe"] if best else base_recipe(family)
            builds_on = recipe in ("accuracy-control", "mixed-precision")
            settings = QuantizeSettings(**common, max_drop=self.options.max_accuracy_drop, recipe=recipe,
                                        base=base if builds_on else None,
                                        limit=limit if builds_on and not single else None,
                                        budget_s=None if single else max(30.0, budget - spent))
            t0 = time.monotonic()
            try:
                path, info = ensure_int8_ir(self.model, self.fmt, self.fp, data_path, data_fp, settings,
                                            family=(self.description.family, self.description.family_reason),
                                            on_message=self._quantize_progress)
            except ConfigError:
                raise
            except WorkbenchError as e:
                tried.add(recipe)
                self.attempts.append({"recipe": recipe, "ok": False, "error": str(e),
                                      "seconds": round(time.monotonic() - t0, 2)})
                if single:
                    raise
                continue
            info = dict(info)
            reused = info.pop("quant_reused", False)
            actual = info.get("quant_recipe") or recipe
            tried.update({recipe, actual})
            if actual == "accuracy-control":
                self._note(self._accuracy_control_words({**info, 'quant_reused': reused}, None if single else budget))
            elif reused:  # a twin (the same converted graph, another file) or an earlier study built it
                took = info.get("quant_seconds")
                self._note(f"The INT8 variant ({actual} recipe) was reused from the cache: a model with the same "
                           f"converted graph was quantized on the same data before"
                           f"{f' (in {took:.0f} s)' if isinstance(took, (int, float)) else ''}.")
            attempt = {"recipe": actual, "ok": True, "path": path, "info": info,
                       "seconds": info.get("quant_seconds") or round(time.monotonic() - t0, 2)}
            if basis and "metric" in basis:
                ev = self._evaluate_file(("int8", str(path)), ir_backend(), path, "int8")
                if ev.get("value") is not None:
                    value = ev["value"]
                    drop = basis["metric"].drop(basis["reference"], value)
                    outputs = self._output_figures(basis, ev)
                    verdict = self.options.guard.verdict(basis["name"], "int8", basis["reference"], value, drop,
                                                         outputs)
                    failed = [c for o in outputs for c in o.get("checks", []) if not c["passed"]]
                    attempt.update(accuracy=value, drop=drop, samples_per_s=ev.get("samples_per_s"),
                                   failed_checks=len(failed), verdict=verdict.get("accuracy_guard"))
                    if failed:
                        attempt["failed_check"] = f"{short_words(failed[0])} on '{failed[0]['output']}'"
            attempt["passed"] = (attempt.get("verdict") == PASSED) if judged else None
            self.attempts.append(attempt)
            if best is None or _rank(attempt) < _rank(best):
                best = attempt
            if not judged or attempt["passed"]:
                best = attempt
                break
        if best is None:
            raise WorkerError(f"No INT8 recipe could quantize '{self.model.name}': {self.attempts[-1]['error']}")
        if judged and not best["passed"]:
            self._note(self._failed_int8_note())
        measured = self._accuracy.get(("int8", str(best["path"])))
        if measured is not None:  # the chosen attempt's accuracy is the INT8 variant's: not measured twice
            self._accuracy[(ir_backend(), "int8", False)] = measured
        return best["path"], self._int8_info(best)

    def _accuracy_control_words(self, info: dict, budget: float | None) -> str:
        """How long NNCF's accuracy control took (or that it was built before), against the fallbacks' budget."""
        took = info.get("quant_seconds")
        text = (f"NNCF's accuracy control took {took:.0f} s" if took is not None else "NNCF's accuracy control")
        if info.get("validations"):
            text += f" ({info['validations']} validation passes)"
        if info.get("quant_reused"):
            text += " when it was built; this study reused it from the cache"
        if budget is not None:
            text += f"; the INT8 fallbacks may start within {budget:g} s of the first recipe (the fallback budget)"
        return text + "."

    def _quantize_progress(self, msg: dict) -> None:
        """Accuracy control validates again and again for minutes: each pass is shown."""
        if msg.get("type") == "progress" and self.on_progress is not None:
            self.on_progress(f"INT8 accuracy control: validation pass {msg.get('validations')}, "
                             f"{msg.get('elapsed_s', 0):.0f} s so far")

    def _int8_info(self, chosen: dict) -> dict:
        info = dict(chosen["info"])
        recipe = chosen["recipe"]
        how = DESCRIPTIONS.get(recipe, recipe)
        info["variant_note"] = (f"INT8 OpenVINO IR ({how}) on {info.get('calibration_size')} calibration samples")
        if self.fmt in ("savedmodel", "keras"):
            info["variant_note"] += "; TensorFlow models reach INT8 through this OpenVINO variant"
        # the description's reading, the one `wb inspect` shows and the recipe followed
        family = info["model_family"] = self.description.family
        info["model_family_reason"] = self.description.family_reason
        tried = [a for a in self.attempts if a is not chosen]
        reason = (f"Read as a {family} model ({self.description.family_reason})" if family else "")
        if tried:
            reason += (f"; {recipe} was chosen after " + ", ".join(_attempt_words(a) for a in tried))
        elif family:
            reason += f"; {recipe} is the first recipe for that family"
        info["quant_recipe_reason"] = reason + "." if reason else None
        layers = info.pop("fp32_layers", None)
        if layers:
            info["quant_fp32_layers"] = ", ".join(layers)
        info["quant_attempts"] = json.dumps([{k: v for k, v in a.items() if k not in ("path", "info", "verdict")}
                                             for a in self.attempts])
        return info

    def _failed_int8_note(self) -> str:
        tried = "; ".join(_attempt_words(a) for a in self.attempts)
        return (f"INT8 failed the accuracy guard with every recipe tried ({tried}): its runs are marked 'accuracy "
                f"failed' and never recommended. Try more or more typical calibration data, labelled data, or a "
                f"larger time budget for the fallbacks.")

    # ---- accuracy ----
    def columns_for(self, cfg: RunConfig) -> dict:
        """Variant and accuracy columns shared by every point of this backend and precision."""
        cols = {k: v for k, v in self._variant(cfg.backend, cfg.precision)[1].items() if v is not None}
        cols.update(self._accuracy_columns(cfg.backend, cfg.precision, cfg.untouched))
        return cols

    def _eval_data(self) -> Dataset | None:
        """The data accuracy is measured on: the study's or the demo's, else random inputs (said so)."""
        if self._has_real_data():
            return self.dataset()
        ds = self.dataset()  # a demo without labels (random images), or nothing
        if ds is None:
            ds = self._random_dataset()
        return ds

    def _has_real_data(self) -> bool:
        """Data given by the user, or a demo's own labelled data (not random or synthetic inputs)."""
        return self.options.data is not None or self._demo_has_data()

    def _random_dataset(self) -> Dataset | None:
        if self._random is None:
            from wb_core.config import InputOptions
            from wb_core.models import make_batches

            if self.inputs is None:
                self._input()
            try:
                (batch,) = make_batches(self.inputs, 64, self.input_options or InputOptions(), pool_size=64,
                                        max_batches=1)
            except ConfigError:
                self._random = False  # no size to draw them at (a dynamic dimension without --dynamic-size)
                return None
            # Samples first, as data holds them: an input's batch axis back to the front, one value per
            # sample for an input without a batch (a sample rate).
            by_name = {s.name: s for s in self.inputs}
            batch = {k: np.moveaxis(v, by_name[k].batch_axis, 0) if k in by_name and v.ndim else np.full(64, v)
                     for k, v in batch.items()}
            x = next(iter(batch.values())) if len(batch) == 1 else batch
            self._random = Dataset(x=x, source="random inputs", meta={"synthetic": True})
        return self._random or None

    def _basis(self, backend: str) -> dict | None:
        """How accuracy is judged on this backend: the metric, what it is scored against, FP32's score
        and FP32's reading of its outputs (their kinds).

        None when accuracy is off or there is nothing to measure it with; {"note": ...} when the FP32
        variant could not be evaluated. Its outputs stay in the worker and in a folder on disk, batch by
        batch, for the other variants to be compared with: this process never holds them.
        """
        key = ("basis", backend)
        if key in self._accuracy:
            return self._accuracy[key]
        self._accuracy[key] = None
        if not self.options.accuracy:
            return None
        ds = self._eval_data()
        if ds is None:
            return None
        names = list(self.description.outputs)
        read = self.options.output or (names[0] if names else None)
        given = read if read and read in ds.refs else None
        if given is None and len(ds.refs) == 1 and len(names) <= 1:
            given = next(iter(ds.refs))  # one reference, one output
        if ds.has_labels:
            plan = {"target": "labels"}
            metric = resolve_metric(self.options.metric, ds.y)
        else:
            if callable(self.options.metric) and not isinstance(self.options.metric, Metric) and given is None:
                raise ConfigError("Without labels, accuracy compares with the FP32 outputs using a built-in metric "
                                  "(cosine, mse, max_abs, top1, top5), not a function.")
            plan = {"target": "refs", "refs_name": given} if given is not None else {"target": "reference"}
            metric, _ = reference_targets(self.options.metric, np.zeros((1, 1), np.float32))
        self._accuracy["plan", backend] = plan
        ref = self._evaluate(backend, "fp32")
        if ref.get("value") is None and "note" in ref:
            self._accuracy[key] = {"note": ref.get("note")}
            return self._accuracy[key]
        self._note_output(ref.get("output_names") or [])
        if ref.get("capped_by_disk"):
            self._note(f"Accuracy was measured on the first {ref['samples']} of {ref['data_samples']} samples: FP32's "
                       f"outputs of more would take over half the {ref['capped_by_disk'] / 2 ** 30:.1f} GB free in "
                       f"the temporary folder.")
        if ref.get("fitted") and ref.get("budget"):
            peak = f" (FP32's worker peaked at {ref['peak_rss'] / 2 ** 20:.0f} MB)" if ref.get("peak_rss") else ""
            self._note(f"Accuracy was measured {ref['batch']} sample{'s' if ref['batch'] != 1 else ''} at a time to "
                       f"keep each worker within the memory budget of {ref['budget'] / 2 ** 20:.0f} MB{peak}.")
        if plan["target"] == "labels":
            name = metric.name
        elif plan["target"] == "refs":
            name = f"{metric.name} vs reference"
            self._note(f"Accuracy is each variant's {metric.name} against the reference outputs "
                       f"'ref.{plan['refs_name']}' in the data from {ds.source}.")
        else:
            name = f"{metric.name} vs fp32"
            if ds.meta.get("synthetic"):
                self._note(f"No data was given: accuracy is each variant's {metric.name} against the FP32 variant's "
                           f"outputs on {ds.source}, a last resort that catches a broken variant but not a subtle "
                           f"loss; give real data to measure it properly.")
            else:
                self._note(f"The data from {ds.source} has no labels: accuracy is each variant's {metric.name} "
                           f"against the FP32 variant's outputs on the same inputs.")
        self._accuracy[key] = {"metric": metric, "name": name, "ds": ds, "reference": ref["value"], "ref": ref,
                               "kinds": ref.get("kinds") or []}
        return self._accuracy[key]

    def _output_figures(self, basis: dict, evaluation: dict) -> list[dict]:
        """Each judged output: its kind, how it was told, its figures against FP32 and the guard's checks."""
        figures = {a["output"]: a["figures"] for a in evaluation.get("agreement") or []}
        out = []
        for kind in basis["kinds"]:
            entry = {"output": kind["output"], "kind": kind["kind"], "kind_reason": kind["reason"],
                     "figures": figures.get(kind["output"], {})}
            entry["checks"] = self.options.guard.check_outputs([entry])
            out.append(entry)
        decoded = evaluation.get("decoded")
        if decoded:  # the user's decoding of one output: its own reading, judged beside the output's kind
            entry = {"output": decoded["output"], "kind": "decoded", "kind_reason": f"decoded by {decoded['by']}",
                     "figures": decoded["figures"]}
            entry["checks"] = self.options.guard.check_outputs([entry])
            out.append(entry)
        return out

    def _accuracy_columns(self, backend: str, precision: str, untouched: bool = False) -> dict:
        if precision == "fp32" and not untouched and not self._has_real_data():
            return {}  # FP32 against itself on random inputs says nothing
        if self.prequantized and not self._has_float_graph(backend) and not self._has_real_data():
            return {"accuracy_note": f"not measured: {title(backend)} has no FP32 variant of this model quantized "
                                     f"beforehand to compare it with; give labelled data to measure it"}
        basis = self._basis(backend)
        if basis is None:
            return {}
        # An untouched default is judged too: the runtime may run it in a reduced precision (BF16 on a
        # BF16 CPU), and a default can be the pick.
        judged = precision != "fp32" or untouched
        label = f"{precision.upper()} as the runtime runs it untouched" if untouched else None
        if "metric" not in basis:
            cols = {"accuracy_note": basis.get("note")}
            return {**cols, **self.options.guard.unchecked(precision, basis.get("note") or "")} \
                if judged and not untouched else cols
        cur = basis["ref"] if precision == "fp32" and not untouched else self._evaluate(backend, precision, untouched)
        if cur.get("value") is None:
            cols = {"accuracy_note": cur.get("note")}
            return {**cols, **self.options.guard.unchecked(precision, cur.get("note") or "")} \
                if judged and not untouched else cols
        metric, ds = basis["metric"], basis["ds"]
        reference, value = basis["reference"], cur["value"]
        drop = metric.drop(reference, value)
        cols = {"accuracy": value, "accuracy_drop": drop, "accuracy_metric": basis["name"],
                "accuracy_reference": reference, "accuracy_samples": int(cur.get("samples") or 0),
                "data_source": ds.source}
        if self.options.output:
            cols["accuracy_output"] = self.options.output
        if cur is basis["ref"]:
            outputs = [{"output": k["output"], "kind": k["kind"], "kind_reason": k["reason"]} for k in basis["kinds"]]
        else:
            outputs = self._output_figures(basis, cur)
        if outputs:
            cols["accuracy_outputs"] = json.dumps(outputs)
        if judged:
            verdict = self.options.guard.verdict(basis["name"], precision, reference, value, drop, outputs, label)
            cols.update(verdict)
            if verdict.get("accuracy_guard") == FAILED and untouched:
                self._note(f"{verdict['accuracy_guard_note']} Its runs are marked 'accuracy failed' and never "
                           f"recommended; give the precision explicitly (FP32) to serve this model on this CPU.")
            elif verdict.get("accuracy_guard") == FAILED and precision != "int8":  # INT8 says so with its attempts
                self._note(f"{verdict['accuracy_guard_note']} Its runs are marked 'accuracy failed' and never "
                           f"recommended; FP32 (or INT8, if it passes) is the choice on this CPU.")
        return cols

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _note_output(self, names: list[str]) -> None:
        if len(names) > 1 and not self.options.output:
            self._note(Sentence(f"The accuracy figure reads the model's first output '{names[0]}' of {len(names)} "
                                f"({', '.join(names)}); the accuracy guard checks every one of them. Choose one "
                                f"with {setting('output', 'the output name')} NAME."))

    def _evaluate(self, backend: str, precision: str, untouched: bool = False) -> dict:
        path, _ = self._variant(backend, precision)
        return self._evaluate_file((backend, precision, untouched), backend, path, precision, untouched)

    def _eval_data_path(self) -> Path:
        ds = self._eval_data()
        if ds is self._dataset:
            return self._data_path()[0]
        if self._random_path is None:
            self._random_path = ds.save()[0]
        return self._random_path

    def _spool_dir(self, backend: str) -> Path:
        """Where FP32's outputs wait, batch by batch, for the other variants of `backend`."""
        if self._spool is None:
            self._spool = Path(tempfile.mkdtemp(prefix="wb-fp32-outputs-"))
            weakref.finalize(self, shutil.rmtree, str(self._spool), True)
        return self._spool / backend

    def memory_budget(self) -> int:
        """Bytes an evaluating worker may hold: its runtime and model, and a batch's outputs (FP32's and the
        variant's) with the copies the comparison makes."""
        if self.options.memory_budget_mb:
            return int(self.options.memory_budget_mb * 2 ** 20)
        import psutil

        return int(psutil.virtual_memory().available * MEMORY_SHARE)

    def _metric_spec(self):
        """The metric as a worker can take it: a name, an import path, or the function pickled by value."""
        metric = self.options.metric
        if isinstance(metric, Metric):
            metric = metric.fn or metric.name
        return self._function_spec(metric, "metric")

    def _function_spec(self, metric, what: str):
        """A name or function as a worker can take it: the string, an import path, or pickled by value."""
        if metric is None or isinstance(metric, str):
            return metric
        path = import_path_of(metric)
        if path:
            return path
        try:
            import cloudpickle
        except ImportError:
            raise ConfigError(f"The {what} function is defined where another process cannot import it (a notebook, "
                              f"a lambda, a nested function): define it in a module and give it, or its import path "
                              f"package.module:function.") from None
        import base64

        return {"pickled": base64.b64encode(cloudpickle.dumps(metric)).decode()}

    def _evaluate_file(self, key: tuple, backend: str, path: Path, precision: str, untouched: bool = False) -> dict:
        if key in self._accuracy:
            return self._accuracy[key]
        reference = key == (backend, "fp32", False)  # FP32 itself: its outputs are written for the others
        plan = self._accuracy.get(("plan", backend)) or {"target": "reference"}
        task = {"task": "wb_core.variants.tasks:task_evaluate", "backend": backend, "data": str(self._eval_data_path()),
                "variant": {"model_path": str(path), "precision": precision, "untouched": untouched},
                "judged": [self.options.output] if self.options.output else None, "headline": self.options.output,
                "metric": self._metric_spec(), "decode": self._function_spec(self.options.decode, "decoding"),
                **plan, "spool": str(self._spool_dir(backend)), "write": reference,
                "budget": self.memory_budget(), "batch_axes": self._batch_axes()}
        if not reference:
            basis = self._basis(backend)
            if not basis or "metric" not in basis:
                return {"note": (basis or {}).get("note") or "the FP32 variant was not evaluated"}
            ref = basis["ref"]
            task.update(batch=ref["batch"], samples=ref["samples"], kinds=ref["kinds"], judged=ref["judged"],
                        headline=ref["headline"])
        try:
            res = run_task(task, timeout=1800, what=f"measuring the accuracy of the {backend} {precision} variant")
            self._accuracy[key] = {"value": res.get("value"), "output_names": res.get("outputs"),
                                   "judged": res.get("judged"), "headline": res.get("headline"),
                                   "kinds": res.get("kinds"), "agreement": res.get("agreement"),
                                   "decoded": res.get("decoded"), "batch": res.get("batch"), "samples": res.get("samples"),
                                   "checked": res.get("ok"), "samples_per_s": res.get("samples_per_s"),
                                   "capped_by_disk": res.get("capped_by_disk"), "data_samples": res.get("data_samples"),
                                   "fitted": res.get("fitted"), "budget": res.get("budget"),
                                   "peak_rss": res.get("peak_rss")}
        except ConfigError:
            raise  # bad data or metric: the user must fix it, the sweep cannot mean anything
        except WorkbenchError as e:
            note = f"Accuracy of the {backend} {precision} variant was not measured: {e}"
            self._note(note)
            self._accuracy[key] = {"note": note}
        return self._accuracy[key]


def _rank(attempt: dict) -> tuple:
    """Attempts best first: passed, then the fewest failed checks, then the smallest drop."""
    drop = attempt.get("drop")
    return (not attempt.get("passed"), attempt.get("failed_checks", 0) if attempt.get("ok") else 1 << 30,
            drop if drop is not None and math.isfinite(drop) else math.inf)


def _attempt_words(attempt: dict) -> str:
    """'transformer: cosine to FP32 0.962 (failed, 4.1 s)' for the summary and the recipe reason."""
    if not attempt.get("ok"):
        return f"{attempt['recipe']} did not finish ({attempt.get('error', 'failed')})"
    if attempt.get("accuracy") is None:
        return f"{attempt['recipe']} ({attempt['seconds']:g} s)"
    verdict = "passed" if attempt.get("passed") else "failed"
    why = f", {attempt['failed_check']}" if attempt.get("failed_check") else ""
    return f"{attempt['recipe']} {verdict} with a drop of {attempt['drop']:.3g}{why} ({attempt['seconds']:g} s)"


def _is_folder(source) -> bool:
    return isinstance(source, (str, Path)) and not str(source).startswith("demo:") and Path(source).is_dir()


def tf_bf16_probe(hw) -> dict:
    """Whether TensorFlow's oneDNN bfloat16 rewrite changes results here; cached per CPU and TF version."""
    try:
        version = importlib.metadata.version("tensorflow-cpu")
    except importlib.metadata.PackageNotFoundError:
        try:
            version = importlib.metadata.version("tensorflow")
        except importlib.metadata.PackageNotFoundError:
            return {"effective": False}
    path = cache_dir() / "probes" / f"tf-bf16-{hw.fingerprint}-{version}.json"
    if path.exists():
        return json.loads(path.read_text())
    res = run_task({"task": "wb_core.variants.tasks:task_probe_tf_bf16"}, timeout=600,
                   what="checking TensorFlow's bfloat16 support")
    out = {"effective": bool(res.get("effective")), "max_abs_diff": res.get("max_abs_diff")}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out))
    return out
