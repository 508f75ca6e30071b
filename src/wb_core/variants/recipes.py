"""INT8 recipes: how NNCF is called for a model family, and what to try when one misses the guard.

A recipe is a name the store keeps with every INT8 variant. Each family has an order; the first
recipe that passes the accuracy guard becomes the INT8 variant, within a time budget.

Recipes (their words are in DESCRIPTIONS below):
- cnn, default: `nncf.quantize` with its defaults (performance preset);
- mixed-preset: the mixed preset (asymmetric activations);
- transformer: `model_type=TRANSFORMER`: NNCF keeps LayerNorm/MVN, Softmax, the attention-mask
  arithmetic and other element-wise ops in floating point and applies SmoothQuant (alpha 0.95);
- transformer-sq50: the same with SmoothQuant alpha 0.5 (NNCF's advice for inaccurate results);
- accuracy-control: `nncf.quantize_with_accuracy_control` on the best recipe so far;
- mixed-precision: each quantized layer's sensitivity measured (the metric with that layer alone
  in FP32), then the most sensitive kept in FP32 until the guard passes.
"""

from __future__ import annotations

from wb_core.variants.family import CNN, OTHER, TRANSFORMER

DESCRIPTIONS = {
    "cnn": "NNCF post-training quantization with its defaults (symmetric weights and activations), as NNCF "
           "documents for convolutional networks",
    "default": "NNCF post-training quantization with its defaults",
    "mixed-preset": "NNCF post-training quantization with the mixed preset (asymmetric activations)",
    "transformer": "NNCF's transformer model type: normalisation, Softmax and mask arithmetic stay in floating "
                   "point, and SmoothQuant (alpha 0.95) evens out activation outliers",
    "transformer-sq50": "NNCF's transformer model type with SmoothQuant alpha 0.5 (more of the activation "
                        "outliers moved into the weights)",
    "accuracy-control": "NNCF's accuracy-controlled quantization: the layers that hurt the metric most are "
                        "reverted to floating point until the drop is within the guard",
    "mixed-precision": "mixed precision: each layer's sensitivity measured, the most sensitive kept in FP32 "
                       "until the guard passes",
}
ORDER = {
    TRANSFORMER: ("transformer", "transformer-sq50", "accuracy-control", "mixed-precision"),
    CNN: ("cnn", "mixed-preset", "accuracy-control", "mixed-precision"),
    OTHER: ("default", "transformer", "accuracy-control", "mixed-precision"),
}
RECIPES = tuple(DESCRIPTIONS)
DEFAULT_BUDGET_S = 600.0  # time the fallbacks may take after the first recipe, per model


def order_for(family: str, first: str | None = None) -> tuple[str, ...]:
    """The recipes to try for a family; `first` (a user's choice) goes ahead of the family's order."""
    order = ORDER.get(family, ORDER[OTHER])
    if first and first != "auto":
        order = (first,) + tuple(r for r in order if r != first)
    return order


def nncf_arguments(recipe: str) -> dict:
    """Keyword arguments for `nncf.quantize` / `quantize_with_accuracy_control` (NNCF imported by the caller)."""
    import nncf
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, AdvancedSmoothQuantParameters

    if recipe in ("cnn", "default"):
        return {}
    if recipe == "mixed-preset":
        return {"preset": nncf.QuantizationPreset.MIXED}
    if recipe == "transformer":
        return {"model_type": nncf.ModelType.TRANSFORMER}
    if recipe == "transformer-sq50":
        return {"model_type": nncf.ModelType.TRANSFORMER, "advanced_parameters": AdvancedQuantizationParameters(
            smooth_quant_alphas=AdvancedSmoothQuantParameters(matmul=0.5))}
    raise ValueError(recipe)


def base_recipe(family: str) -> str:
    """The plain recipe of a family, on which accuracy control and mixed precision build."""
    return ORDER.get(family, ORDER[OTHER])[0]
