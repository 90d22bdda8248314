"""batchnorm-small-batch: BatchNorm trained on batches of fewer than 8 samples.

What it detects
    On the first step that records activations the recorder keeps each module's input
    shapes (meta.json's `module_shapes`). In training mode BatchNorm normalizes each channel
    with the mean and variance of the batch it is given: dim 0 of its input. The rule fires
    when every call of a BatchNorm module (BatchNorm1d/2d/3d; SyncBatchNorm pools the batches
    of every process and is left alone) saw fewer than `min_batch` samples while the model's
    BatchNorm modules were in training mode on most training steps.

Why it matters
    With a handful of samples the batch statistics are noisy estimates of the data's, and
    each sample's normalization depends on the few others in its batch: training is noisy,
    and the running statistics used at evaluation differ from what training saw, so
    validation is much worse than training. Group Normalization's study (Wu and He, 2018)
    measured BatchNorm's error rising steeply below 8 images per batch, where GroupNorm's
    does not.

Example
    BatchNorm2d 'bn1' and 2 more normalized batches of 4 samples (input [4, 16, 32, 32]).

How to fix
    Train with batches of at least 8 (16 or more is safer; accumulate gradients for a large
    effective batch only if the per-step batch stays large), replace BatchNorm by GroupNorm
    or LayerNorm, use SyncBatchNorm across processes, or freeze BatchNorm (eval mode) when
    fine-tuning a pretrained model on small batches.

False positives
    GroupNorm, LayerNorm and InstanceNorm do not depend on the batch and are never judged;
    BatchNorm frozen in eval mode (fine-tuning) and batches of 8 or more stay quiet. Batch
    sizes are those of the first recorded step; a run whose first batch alone is small would
    be judged by it.
"""
from __future__ import annotations

from tracelab.analyzers._batches import BATCH_NORMS, POOLED_BATCH_NORMS, input_shapes
from tracelab.analyzers._dynamics import OUTCOME, name_list, subject_of
from tracelab.core import causes
from tracelab.core.causes import explains
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import META_MODULE_SHAPES, TRAIN_MODE_NORM, Needs

# BatchNorm that normalizes with this process's batch alone (SyncBatchNorm pools them all).
_PER_PROCESS = BATCH_NORMS - POOLED_BATCH_NORMS


def _large_updates(_: Finding, effect: Finding) -> bool:
    return causes.update_side(effect) == "high"


@rule(name="batchnorm-small-batch", code="TL610",
      requires=(Needs.MODULE_SHAPES, Needs.MODEL, Needs.TRAIN_MODES), plot=Plot.NONE,
      links=(explains("overfitting", "loss-oscillation", "loss-spike", *OUTCOME,
                      why="batch statistics of a few samples are noisy and differ from the "
                          "running statistics used at evaluation"),
             explains("update-ratio",
                      why="the gradient of a few samples, normalized by their own noisy "
                          "statistics, makes steps large for the weights",
                      when=_large_updates)))
def batchnorm_small_batch(run: Run, *, min_batch: int = 8,
                          min_share: float = 0.5) -> list[Finding]:
    types = run.module_types()
    shapes = run.meta.get(META_MODULE_SHAPES)
    small = {}
    for name, calls in shapes.items() if isinstance(shapes, dict) else ():
        inputs = [s for s in input_shapes(calls) if len(s) >= 2]  # (batch, channels, ...)
        if types.get(name) in _PER_PROCESS and inputs and max(s[0] for s in inputs) < min_batch:
            small[name] = (max(s[0] for s in inputs), inputs[0])
    norm = run.signal(TRAIN_MODE_NORM)
    if not small or not len(norm) or float((norm > 0).mean()) < min_share:
        return []
    names = list(small)
    batch = max(b for b, _ in small.values())
    first = small[names[0]][1]
    steps = (int(norm.index[0]), int(norm.index[-1]))
    return [batchnorm_small_batch.finding(
        WARNING, subject_of(names), steps,
        f"{types[names[0]]} {name_list(names)} normalized batches of {batch} samples or fewer "
        f"in training mode (input {first}): batch statistics of so few samples are noisy and "
        "differ from the running statistics used at evaluation.",
        {"subjects": names, "batch": batch, "input_shape": first, "min_batch": min_batch},
        f"Train with batches of at least {min_batch} samples, replace BatchNorm by GroupNorm "
        "or LayerNorm, use SyncBatchNorm across processes, or keep BatchNorm in eval mode "
        "when fine-tuning on small batches.")]
