"""Which family a model belongs to, read from its OpenVINO graph: it decides the INT8 recipe.

- transformer: attention blocks (MatMul -> Softmax -> MatMul), with layer normalisation (MVN or
  its decomposition) or embedding lookups (a Gather from a constant table by integer ids);
- cnn: convolutions carry the model (and no attention);
- other: anything else (MLPs, recurrent models, ...).

Works on an `openvino.Model`, so it runs where OpenVINO is imported: in a worker, or in a test.
"""

from __future__ import annotations

from dataclasses import dataclass

TRANSFORMER, CNN, OTHER = "transformer", "cnn", "other"
CONV_TYPES = ("Convolution", "GroupConvolution", "ConvolutionBackpropData")
_PASS_THROUGH = ("Convert", "Reshape", "Transpose", "Multiply", "Divide", "Add", "Select", "Squeeze", "Unsqueeze",
                 "Power")


@dataclass(frozen=True)
class Family:
    name: str
    reason: str
    attention: int = 0
    convolutions: int = 0
    norms: int = 0
    embeddings: int = 0


def _consumers(node):
    for out in node.outputs():
        for target in out.get_target_inputs():
            yield target.get_node()


def _near(node, kind: str, depth: int, downstream: bool) -> bool:
    """Is an op of type `kind` within `depth` steps of `node` (after it, or before it), through shape
    and scale ops?"""
    frontier = [node]
    for _ in range(depth):
        nxt = []
        for n in frontier:
            for other in (_consumers(n) if downstream else (v.get_node() for v in n.input_values())):
                if other.get_type_name() == kind:
                    return True
                if other.get_type_name() in _PASS_THROUGH:
                    nxt.append(other)
        frontier = nxt
    return False


def _is_embedding(node) -> bool:
    if node.get_type_name() != "Gather":
        return False
    data = node.input_value(0).get_node()
    while data.get_type_name() in ("Convert", "Multiply", "Subtract") and data.get_input_size():
        data = data.input_value(0).get_node()
    indices = node.input_value(1).get_element_type()
    return data.get_type_name() == "Constant" and not indices.is_real() and \
        node.input_value(0).get_partial_shape().rank.get_length() == 2


def detect_family(model) -> Family:
    """The model's family and the evidence for it, in a sentence."""
    attention = norms = embeddings = convs = 0
    for op in model.get_ops():
        kind = op.get_type_name()
        if kind == "Softmax" or kind.startswith("Softmax"):
            if _near(op, "MatMul", 4, downstream=False) and _near(op, "MatMul", 3, downstream=True):
                attention += 1
        elif kind in ("MVN", "LayerNormalization") or (kind == "ReduceMean" and (
                _near(op, "Subtract", 2, downstream=False) or _near(op, "SquaredDifference", 1, downstream=False))):
            norms += 1
        elif kind in CONV_TYPES:
            convs += 1
        elif _is_embedding(op):
            embeddings += 1
    counts = dict(attention=attention, convolutions=convs, norms=norms, embeddings=embeddings)
    if attention and (norms or embeddings):
        extra = [f"{norms} layer normalisation{'s' if norms != 1 else ''}"] if norms else []
        extra += [f"{embeddings} embedding lookup{'s' if embeddings != 1 else ''}"] if embeddings else []
        return Family(TRANSFORMER, f"{attention} attention block{'s' if attention != 1 else ''} (MatMul, Softmax, "
                                   f"MatMul) with {' and '.join(extra)}", **counts)
    if convs:
        tail = f" and {attention} attention block{'s' if attention != 1 else ''}" if attention else ""
        return Family(CNN, f"{convs} convolution{'s' if convs != 1 else ''}{tail}, no transformer blocks", **counts)
    return Family(OTHER, "no attention blocks and no convolutions", **counts)
