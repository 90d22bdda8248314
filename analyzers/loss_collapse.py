"""loss-collapse: the loss falls to near zero early in the run and stays there.

What it detects
    The train loss reaches `ratio` of its starting value (or `floor`, whichever is larger)
    within the first `within` share of the run, and at least `stay` of the later steps stay
    within ten times that level. When a validation loss is recorded, it must have collapsed
    too (the median of its last third within ten times that level); a train loss that
    collapses alone is memorization, which `overfitting` judges.

Why it matters
    Real tasks carry irreducible noise: a loss that drops to near zero within a few dozen steps
    and stays there means the model is not learning the task. The usual causes are a target
    that leaked into the inputs (a feature computed from the label, the label column left in
    the features) or a loss computed on the wrong tensors (the targets against themselves, a
    detached copy of the output). Accuracy looks perfect, and the model is useless.

Example
    Train loss 1.39 at step 0, 1.4e-05 at step 20 (7% of 300 steps) and below 1e-3 ever
    after; the validation loss falls to 2e-4 as well.

How to fix
    Check that no input feature is derived from the target (drop the label column and every
    feature computed from it) and that the loss compares the model's output with the targets
    (not the targets with themselves, or a tensor the model does not produce).

False positives
    A noiseless synthetic task (a lookup table, a copy task, a toy image task whose class is a
    bright square) can be solved exactly: its loss falls to near zero too, but more gradually.
    The collapse must reach `ratio` (1e-4) of the starting loss within the first `within`
    (20%) of the run, and stay: a toy CNN task that reaches 1e-4 of its start at 27% of the
    run stays quiet, a leaked one-hot label reaches it at 7%. Runs
    shorter than `min_steps` are not judged. A train-only collapse with a validation loss that
    stays high is left to overfitting. A loss that goes below zero (a Gaussian negative
    log-likelihood, an ELBO) has no floor at zero, and is not judged: falling through zero on
    its way down is no collapse.
"""
from __future__ import annotations

import numpy as np

from tracelab.analyzers._dynamics import EVAL_SPLITS, finite, fmt, initial
from tracelab.core import causes
from tracelab.core.causes import explains
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import Needs


@rule(name="loss-collapse", code="TL601", requires=(Needs.LOSS,), plot=Plot.SCALAR,
      links=(explains("loss-plateau", "update-ratio", "frozen-parameters", "vanishing-gradients",
                      "metric-stagnation",
                      why="a loss already at zero leaves nothing to learn: it stays flat "
                          "and its gradients vanish",
                      timing="overlap", when=causes.low_updates),))
def loss_collapse(run: Run, *, ratio: float = 1e-4, floor: float = 1e-6, within: float = 0.2,
                  stay: float = 0.9, min_steps: int = 50) -> list[Finding]:
    loss = finite(run.loss())
    if len(loss) < min_steps:
        return []
    values, steps = loss.to_numpy(dtype=float), loss.index.to_numpy()
    start = initial(values)
    level = max(ratio * abs(start), floor)
    if values.min() < -10 * level:
        return []  # a loss that goes below zero (a Gaussian NLL, an ELBO) has no floor there
    below = np.flatnonzero(np.abs(values) <= level)
    if not len(below) or below[0] > within * len(values):
        return []
    at = int(below[0])
    after = values[at:]
    share = float(np.mean(np.abs(after) <= 10 * level))
    if share < stay:
        return []
    val_note, evidence = "", {}
    split = next((s for s in EVAL_SPLITS if s in run.splits()), None)
    val = finite(run.loss(split)) if split else None
    if val is not None and len(val):
        v = val.to_numpy(dtype=float)
        tail = float(np.median(v[-max(1, len(v) // 3):]))
        if abs(tail) > 10 * level:
            return []  # memorization of the training data: overfitting's to judge
        val_note = f"; the {split} loss collapsed too ({fmt(tail)})"
        evidence = {f"{split}_loss_tail": tail}
    step = int(steps[at])
    evidence.update(start_loss=start, collapse_step=step, collapse_loss=values[at],
                    share_of_run=at / len(values), later_share_near_zero=share)
    return [loss_collapse.finding(
        WARNING, "loss", (step, int(steps[-1])),
        (f"Train loss was near zero ({fmt(values[at])}) from the first step" if at == 0 else
         f"Train loss fell from {fmt(start)} to {fmt(values[at])} by step {step} "
         f"({at / len(values):.0%} of the run)")
        + f" and stayed near zero on {share:.0%} of the later steps{val_note}: the target "
        "likely leaked into the inputs, or the loss is computed "
        "on the wrong tensors.",
        evidence,
        "Check that no input feature is derived from the target (drop the label column and "
        "features computed from it) and that the loss compares the model's output with the "
        "targets.")]
