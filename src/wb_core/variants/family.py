"""Which family a model belongs to, read from its OpenVINO graph: it decides the INT8 recipe.

- transformer: attention blocks, either fused (OpenVINO's ScaledDotProductAttention, which the
  converter makes of the pattern) or written out (MatMul -> Softmax -> MatMul), usually with layer
  normalisation (MVN, LayerNormalization or its decomposition) or embedding lookups (a Gather from
  a constant table by integer ids). Hybrid CNN-transformers (convolutions and attention, such as
  MobileViT or a CTC text recogniser) are transformers too: their attention's Softmax and
  normalisation need the transformer recipe's floating point however many convolutions lead to it;
- cnn: convolutions carry the model and there is no attention;
- other: anything else (MLPs, recurrent models, ...).

The model is read once, by the description (`wb_core.variants.description`), and every face reads
that reading: `wb inspect`, the profile's rows and the INT8 recipe. Works on an `openvino.Model`, so
it runs where OpenVINO is imported: in a worker, or in a test.
"""

from __future__ import annotations

from dataclasses import dataclass

TRANSFORMER, CNN, OTHER = "transformer", "cnn", "other"
CONV_TYPES = ("Convolution", "GroupConvolution", "ConvolutionBackpropData")
ATTENTION_TYPES = ("ScaledDotProductAttention",)  # fused attention ops (OpenVINO's converter fuses the pattern)
NORM_TYPES = ("MVN", "LayerNormalization", "RMS")
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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def detect_family(model) -> Family:
    """The model's family and the evidence for it, in a sentence."""
    fused = written = norms = embeddings = convs = 0
    for op in model.get_ops():
        kind = op.get_type_name()
        if kind in ATTENTION_TYPES:
            fused += 1
        elif kind == "Softmax" or kind.startswith("Softmax"):
            if _near(op, "MatMul", 4, downstream=False) and _near(op, "MatMul", 3, downstream=True):
                written += 1
        elif kind in NORM_TYPES or (kind == "ReduceMean" and (
                _near(op, "Subtract", 2, downstream=False) or _near(op, "SquaredDifference", 1, downstream=False))):
            norms += 1
        elif kind in CONV_TYPES:
            convs += 1
        elif _is_embedding(op):
            embeddings += 1
    attention = fused + written
    counts = dict(attention=attention, convolutions=convs, norms=norms, embeddings=embeddings)
    if attention:
        how = "ScaledDotProductAttention" if not written else "MatMul, Softmax, MatMul" if not fused else \
            f"{fused} ScaledDotProductAttention and {written} MatMul, Softmax, MatMul"
        reason = f"{_plural(attention, 'attention block')} ({how})"
        extra = [_plural(norms, "layer normalisation")] if norms else []
        extra += [_plural(embeddings, "embedding lookup")] if embeddings else []
        if extra:
            reason += f" with {' and '.join(extra)}"
        if convs:
            reason += (f"; a hybrid CNN-transformer ({_plural(convs, 'convolution')} as well): its attention needs "
                       f"the transformer recipe, which keeps Softmax and normalisation in floating point")
        return Family(TRANSFORMER, reason, **counts)
    if convs:
        return Family(CNN, f"{_plural(convs, 'convolution')}, no attention blocks", **counts)
    return Family(OTHER, "no attention blocks and no convolutions", **counts)
