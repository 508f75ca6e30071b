"""How far a variant's outputs are from FP32's, output by output, summed batch by batch.

Each output is read as one kind, from its shape, its name and FP32's values on the first batch
(`read_kind`); the kind says which figures fit it (`OutputAgreement.figures`):

- classes, [n, C] (softmax rows, a name such as logits/prob/score, or any 2-D output that is no
  embedding): top-1 agreement with FP32; top-5 (FP32's top class among the variant's 5) when C >= 5.
- detection, [n, 4+C, anchors] or [n, anchors, 4+C] (4 box coordinates in pixel ranges, the rest
  scores in 0-1): the cosine of the score block alone; FP32's detections above 0.25 that the variant
  keeps (same anchor, same class, box IoU >= 0.5) and those it adds; the mean box IoU of those kept.
- ctc, [n, T, C] with softmax (or log-softmax) steps or a name with ctc: greedy-decoded sequences
  (repeats collapsed, blank 0 dropped) identical to FP32's, the character error rate against FP32's
  sequences, and the per-step agreement.
- tokens, [n, T, C] named logits (a language model's vocabulary): per-step top-1 agreement.
- embedding, [n, D] with unit-length rows or a name with embed/pool/feature/hidden/vector: cosine.
- values, anything else: cosine and the worst element's error relative to FP32's largest magnitude.

A user's decoding (`decode`: a function from one output's batch [n, ...] to n task items, such as
labels, token sequences or strings) adds the kind "decoded" for the output it reads: the share of
samples whose items equal FP32's, and for sequences the edit distance against FP32's, per item.

Every kind also gets the whole output's cosine and worst relative error, so a report can show how
little they say about a detector's scores. Nothing here keeps an output: `update` takes one batch
of the variant's and FP32's outputs and adds to running sums, one sample at a time, so memory
stays at one batch whatever the data's size.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

KINDS = ("classes", "detection", "ctc", "tokens", "embedding", "values", "decoded")
KIND_WORDS = {"classes": "class scores", "detection": "class scores of the detection head",
              "ctc": "a per-step class sequence (CTC)", "tokens": "per-token class scores",
              "embedding": "an embedding", "values": "values", "decoded": "items your decoding reads"}
DETECTION_THRESHOLD = 0.25  # the score a detection needs (YOLO's usual confidence threshold)
MATCH_IOU = 0.5  # a kept detection's box overlaps FP32's at least this much
TIE_RTOL = 1e-5  # scores this close (relative) are one score: float32 rounding in a forward pass is ~1e-6
SCORE_BYTES = 4 << 20  # a metric's per-sample function takes at most this much output at once (one sample at least)
CTC_BLANK = 0  # PaddleOCR, wav2vec2 and most CTC heads put the blank first

_EMBEDDING_NAMES = ("embed", "pool", "feature", "hidden", "vector", "sentence", "encoding")
_CLASS_NAMES = ("logit", "prob", "score", "class", "cls", "pred", "softmax")


@dataclass(frozen=True)
class OutputKind:
    """What one output holds, and how it was told."""

    output: str
    kind: str
    reason: str
    classes: int = 0
    channel_axis: int = 0  # detection: the axis of the 4+C channels (1 or 2)
    box_format: str = ""  # detection: "xyxy" or "cxcywh"

    @property
    def words(self) -> str:
        return KIND_WORDS[self.kind]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> OutputKind:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def _softmax_rows(x: np.ndarray) -> bool:
    """Rows (last axis) that are probabilities summing to 1, or their logarithms."""
    if x.size == 0 or x.shape[-1] < 2:
        return False
    x = x.astype(np.float64)
    if x.min() >= -1e-4 and x.max() <= 1 + 1e-4:
        return bool(np.mean(np.abs(x.sum(-1) - 1) < 1e-2) > 0.99)
    if x.max() <= 1e-4:  # log-softmax
        return bool(np.mean(np.abs(np.log(np.exp(x).sum(-1))) < 1e-2) > 0.99)
    return False


def _named(name: str, words: tuple[str, ...]) -> bool:
    lower = name.lower()
    return any(w in lower for w in words)


def _detection_layout(x: np.ndarray) -> tuple[int, str] | None:
    """(channel axis, box format) when x [n, a, b] looks like a detection head, else None."""
    for axis in (1, 2):
        channels, anchors = x.shape[axis], x.shape[3 - axis]
        if not (5 <= channels <= 1024 and anchors >= max(16, 2 * channels)):
            continue
        rows = np.moveaxis(x, axis, -1).reshape(-1, channels).astype(np.float64)
        boxes, scores = rows[:, :4], rows[:, 4:]
        if scores.min() < -1e-4 or scores.max() > 1 + 1e-4:
            continue
        if boxes.max() - boxes.min() <= 2.0:  # coordinates in pixels, not a block of more scores
            continue
        xyxy = np.mean((boxes[:, 2] >= boxes[:, 0]) & (boxes[:, 3] >= boxes[:, 1])) > 0.99
        return axis, "xyxy" if xyxy else "cxcywh"
    return None


KIND_SAMPLES = 16  # the samples read_kind looks at: its float64 copies stay small whatever the batch


def read_kind(output: str, reference: np.ndarray) -> OutputKind:
    """The kind of one output, from its name, its shape [n, ...] and FP32's values for a batch (its
    first KIND_SAMPLES samples)."""
    shape = tuple(reference.shape[1:])
    x = np.asarray(reference)[:KIND_SAMPLES]
    if x.dtype.kind not in "fc" or not shape:
        return OutputKind(output, "values", f"{x.dtype} values of shape {shape}")
    if len(shape) == 1 and shape[0] >= 2:
        c = shape[0]
        if _named(output, _EMBEDDING_NAMES):
            return OutputKind(output, "embedding", f"{c} values per sample, named as an embedding")
        norms = np.linalg.norm(x.reshape(len(x), -1).astype(np.float64), axis=1)
        if not _softmax_rows(x) and len(norms) and np.all(np.abs(norms - 1) < 1e-3):
            return OutputKind(output, "embedding", f"{c} values per sample with unit-length rows")
        if _softmax_rows(x):
            return OutputKind(output, "classes", f"{c} probabilities per sample (rows sum to 1)", classes=c)
        why = "named as class scores" if _named(output, _CLASS_NAMES) else "read as class scores"
        return OutputKind(output, "classes", f"{c} values per sample, {why}", classes=c)
    if len(shape) == 2:
        layout = _detection_layout(x)
        if layout is not None:
            axis, fmt = layout
            c = shape[axis - 1] - 4
            return OutputKind(output, "detection", f"{shape[axis - 1]} channels per anchor: 4 box coordinates in "
                              f"pixel ranges ({fmt}) and {c} scores in 0-1", classes=c, channel_axis=axis,
                              box_format=fmt)
        steps, c = shape
        if c >= 3 and steps >= 2 and (_softmax_rows(x) or _named(output, ("ctc",))):
            return OutputKind(output, "ctc", f"{steps} steps of {c} class probabilities", classes=c)
        if c >= 3 and steps >= 2 and _named(output, ("logit",)):
            return OutputKind(output, "tokens", f"{steps} steps of {c} class scores, named logits", classes=c)
    return OutputKind(output, "values", f"values of shape {shape}")


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    if denom == 0:
        return 1.0 if not a.any() and not b.any() else 0.0
    return float(np.dot(a, b) / denom)


def _boxes_xyxy(boxes: np.ndarray, fmt: str) -> np.ndarray:
    if fmt == "xyxy":
        return boxes
    cx, cy, w, h = boxes.T
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of boxes a[i] and b[i] (xyxy), row by row."""
    w = np.clip(np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]), 0, None)
    h = np.clip(np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]), 0, None)
    inter = w * h
    area = lambda r: np.clip(r[:, 2] - r[:, 0], 0, None) * np.clip(r[:, 3] - r[:, 1], 0, None)  # noqa: E731
    union = area(a) + area(b) - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def tied_best(scores: np.ndarray) -> np.ndarray:
    """Mask of the classes whose score equals the largest one to float32 rounding (TIE_RTOL of the
    row's largest magnitude)."""
    top = scores.max()
    return scores >= top - TIE_RTOL * max(float(np.abs(scores).max()), np.finfo(np.float32).tiny)


def ctc_decode(steps: np.ndarray, blank: int = CTC_BLANK) -> list[int]:
    """Greedy CTC decoding of one sample [T, C]: the best class per step, repeats collapsed, blanks dropped."""
    best = steps.argmax(-1)
    keep = np.ones(len(best), bool)
    keep[1:] = best[1:] != best[:-1]
    return [int(c) for c in best[keep] if c != blank]


def edit_distance(a: list, b: list) -> int:
    """Levenshtein distance between two sequences (insertions, deletions, substitutions)."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


class OutputAgreement:
    """Running sums comparing one output of a variant with FP32's, batch after batch."""

    def __init__(self, kind: OutputKind):
        self.kind = kind
        self.n = 0
        self.cos_sum = 0.0
        self.max_err = 0.0
        self.max_ref = 0.0
        self.top1 = self.top5 = 0
        self.score_cos_sum = 0.0
        self.det_ref = self.det_kept = self.det_added = 0
        self.iou_sum = 0.0
        self.seq_same = self.edits = self.ref_chars = 0
        self.steps_same = self.steps = 0

    def update(self, candidate: np.ndarray, reference: np.ndarray) -> None:
        """Add one batch: candidate and reference [k, ...], sample i of one beside sample i of the other."""
        if candidate.shape != reference.shape:
            raise ValueError(f"output '{self.kind.output}' has shape {candidate.shape[1:]} here and "
                             f"{reference.shape[1:]} in FP32")
        for c, r in zip(candidate, reference):  # one sample at a time: float64 copies stay one sample big
            self._sample(np.asarray(c, np.float64), np.asarray(r, np.float64))

    def _sample(self, c: np.ndarray, r: np.ndarray) -> None:
        self.n += 1
        self.cos_sum += _cosine(c.ravel(), r.ravel())
        if c.size:
            self.max_err = max(self.max_err, float(np.max(np.abs(c - r))))
            self.max_ref = max(self.max_ref, float(np.max(np.abs(r))))
        kind = self.kind.kind
        if kind == "classes":
            # FP32's top class, and every class tied with it: scores equal to float32 rounding name no
            # single top class (a model with random weights can give all classes one score), so the
            # variant agrees when its top class (argmax, as a user's code reads it) is one of them.
            tops = tied_best(r)
            self.top1 += int(tops[c.argmax()])
            if self.kind.classes >= 5:  # in the top 5: fewer than 5 classes score higher
                self.top5 += int(np.count_nonzero(c > c[tops].max()) < 5)
        elif kind == "detection":
            self._detections(c, r)
        elif kind in ("ctc", "tokens"):
            cb, rb = c.argmax(-1), r.argmax(-1)
            self.steps_same += int((cb == rb).sum())
            self.steps += len(rb)
            if kind == "ctc":
                cs, rs = ctc_decode(c), ctc_decode(r)
                self.seq_same += int(cs == rs)
                self.edits += edit_distance(cs, rs)
                self.ref_chars += len(rs)

    def _detections(self, c: np.ndarray, r: np.ndarray) -> None:
        if self.kind.channel_axis == 1:  # [4+C, anchors] -> [anchors, 4+C]
            c, r = c.T, r.T
        cs, rs = c[:, 4:], r[:, 4:]
        self.score_cos_sum += _cosine(cs.ravel(), rs.ravel())
        c_best, r_best = cs.max(1), rs.max(1)
        r_on, c_on = r_best >= DETECTION_THRESHOLD, c_best >= DETECTION_THRESHOLD
        both = r_on & c_on & (cs.argmax(1) == rs.argmax(1))
        iou = _iou(_boxes_xyxy(c[both, :4], self.kind.box_format), _boxes_xyxy(r[both, :4], self.kind.box_format))
        kept = iou >= MATCH_IOU
        self.det_ref += int(r_on.sum())
        self.det_kept += int(kept.sum())
        self.det_added += int((c_on & ~r_on).sum())
        self.iou_sum += float(iou[kept].sum())

    def figures(self) -> dict:
        """The figures that fit this output's kind (shares in 0-1), plus the counts behind them."""
        if not self.n:
            return {"samples": 0}
        out = {"samples": self.n, "cosine": self.cos_sum / self.n,
               "worst_relative_error": self.max_err / self.max_ref if self.max_ref > 0 else float(self.max_err > 0)}
        kind = self.kind.kind
        if kind == "classes":
            out["top1_agreement"] = self.top1 / self.n
            if self.kind.classes >= 5:
                out["top5_agreement"] = self.top5 / self.n
        elif kind == "detection":
            out.update(score_cosine=self.score_cos_sum / self.n, detections=self.det_ref,
                       detections_kept_count=self.det_kept, detections_added_count=self.det_added,
                       threshold=DETECTION_THRESHOLD)
            if self.det_ref:
                out["detections_kept"] = self.det_kept / self.det_ref
            out["detections_added"] = self.det_added / max(self.det_ref, 1)
            if self.det_kept:
                out["box_iou"] = self.iou_sum / self.det_kept
        elif kind in ("ctc", "tokens"):
            out["token_agreement"] = self.steps_same / self.steps if self.steps else 1.0
            if kind == "ctc":
                out.update(sequence_agreement=self.seq_same / self.n, sequences_same=self.seq_same,
                           cer=self.edits / self.ref_chars if self.ref_chars else float(self.edits > 0))
        return out


def decode_batch(decode, batch: np.ndarray, output: str, name: str = "") -> list:
    """The task items `decode` reads from one output's batch, one per sample, each made comparable
    (arrays and lists become tuples); a ConfigError names the function and the output otherwise."""
    from wb_core.errors import ConfigError

    who = f"The decoding '{name}'" if name else "The decoding function"
    try:
        items = decode(batch)
    except ConfigError:
        raise
    except Exception as e:  # the user's function: its error is theirs to see, in one sentence
        raise ConfigError(f"{who} failed on output '{output}' (a batch of shape {tuple(batch.shape)}): "
                          f"{type(e).__name__}: {e}.") from None
    try:
        items = list(items)
    except TypeError:
        raise ConfigError(f"{who} must return one item per sample (a list); on output '{output}' it returned "
                          f"{type(items).__name__}.") from None
    if len(items) != len(batch):
        raise ConfigError(f"{who} returned {len(items)} items for a batch of {len(batch)} samples of output "
                          f"'{output}'; it must return one per sample.")
    return [_comparable(i) for i in items]


def _comparable(item):
    if isinstance(item, np.ndarray):
        item = item.tolist()
    if isinstance(item, np.generic):
        return item.item()
    if isinstance(item, (list, tuple)):
        return tuple(_comparable(i) for i in item)
    return item


class DecodedAgreement:
    """Running counts comparing the items a user's decoding reads from a variant with FP32's."""

    def __init__(self, output: str):
        self.output = output
        self.n = self.same = self.edits = self.ref_len = 0
        self.sequences = True  # every item so far a sequence (str or tuple): an edit rate means something

    def update(self, candidate: list, reference: list) -> None:
        for c, r in zip(candidate, reference):
            self.n += 1
            self.same += int(c == r)
            if self.sequences and isinstance(c, (str, tuple)) and isinstance(r, (str, tuple)):
                self.edits += edit_distance(list(c), list(r))
                self.ref_len += len(r)
            else:
                self.sequences = False

    def figures(self) -> dict:
        if not self.n:
            return {"samples": 0}
        out = {"samples": self.n, "decoded_agreement": self.same / self.n, "decoded_same": self.same}
        if self.sequences:
            out["decoded_error_rate"] = self.edits / self.ref_len if self.ref_len else float(self.edits > 0)
        return out


class RunningScore:
    """A metric summed batch by batch: the mean of its per-sample scores, or of a user's function
    weighted by each batch's samples."""

    def __init__(self, metric):
        self.metric = metric
        self.total = 0.0
        self.n = 0

    def update(self, outputs: np.ndarray, targets: np.ndarray) -> None:
        k = len(outputs)
        if not k:
            return
        if self.metric.per_sample is not None:  # a few samples at a time: its float64 copies stay small
            step = max(1, min(4, SCORE_BYTES // max(1, outputs[:1].nbytes)))
            for i in range(0, k, step):
                self.total += float(np.sum(self.metric.per_sample(outputs[i:i + step], targets[i:i + step])))
        else:
            self.total += self.metric(outputs, targets) * k
        self.n += k

    @property
    def value(self) -> float | None:
        return self.total / self.n if self.n else None
