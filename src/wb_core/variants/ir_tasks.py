"""What a converted FP32 IR is, read once in the worker that converts it (OpenVINO imported).

- its graph key: a hash of the computation (every op's type, version and attributes, how the ops
  connect, each constant's bytes), with no names in it. Two files that convert to the same
  network (a Keras model and its SavedModel export) get the same key, and so share their INT8
  variants (`wb_core.variants.quantize`), whose NNCF work is the slow part of a study;
- its input and output tensor names, per port: a shared INT8 IR takes the names of the model
  that uses it;
- its family (`wb_core.variants.family`), which the description of a TensorFlow model reads from
  here: TensorFlow formats reach OpenVINO, and NNCF, only through this IR.
"""

from __future__ import annotations

import hashlib

import numpy as np


def graph_key(model) -> str:
    """A hash of what the model computes, names left out."""
    h = hashlib.sha256()
    index: dict[str, int] = {}
    for i, op in enumerate(model.get_ordered_ops()):
        index[op.get_name()] = i
        attrs = sorted((k, repr(v)) for k, v in op.get_attributes().items())
        ins = [(index.get(v.get_node().get_name(), -1), v.get_index()) for v in op.input_values()]
        outs = [(str(op.get_output_element_type(k)), str(op.get_output_partial_shape(k)))
                for k in range(op.get_output_size())]
        h.update(repr((op.get_type_name(), op.get_type_info().version_id, attrs, ins, outs)).encode())
        if op.get_type_name() == "Constant":
            h.update(np.ascontiguousarray(op.get_data()).view(np.uint8).reshape(-1).data)
    return h.hexdigest()[:16]


def io_names(model) -> dict[str, list[list[str]]]:
    """Each input's and output's tensor names, in port order."""
    return {"inputs": [sorted(p.get_names()) for p in model.inputs],
            "outputs": [sorted(p.get_names()) for p in model.outputs]}


def ir_facts(xml: str) -> dict:
    """Graph key, port names and family of the IR at `xml`."""
    import openvino as ov

    from wb_core.variants.family import detect_family

    model = ov.Core().read_model(str(xml))
    family = detect_family(model)
    return {"graph": graph_key(model), "io": io_names(model), "family": family.name,
            "family_reason": family.reason}


def task_convert_ir(task: dict) -> None:
    """Worker task: convert a model to an FP32 IR (as the `convert` task does) and read its facts
    there and then, while the converted graph is at hand."""
    from wb_core.proc.channel import emit
    from wb_core.proc.worker import convert_model_file

    convert_model_file(task)
    emit({"type": "result", "path": task["out"], **ir_facts(task["out"])})


def task_ir_facts(task: dict) -> None:
    """Worker task: the facts of an IR converted before they were kept beside it."""
    from wb_core.proc.channel import emit

    emit({"type": "result", **ir_facts(task["ir"])})


def task_rename_io(task: dict) -> None:
    """Worker task: a copy of the IR at `ir` whose ports carry the tensor names `io` (see io_names)."""
    import openvino as ov

    from wb_core.proc.channel import emit

    model = ov.Core().read_model(task["ir"])
    for ports, names in ((model.inputs, task["io"]["inputs"]), (model.outputs, task["io"]["outputs"])):
        for port, wanted in zip(ports, names, strict=True):
            port.get_tensor().set_names(set(wanted))
    ov.save_model(model, task["out"], compress_to_fp16=False)
    emit({"type": "result", "path": task["out"]})
