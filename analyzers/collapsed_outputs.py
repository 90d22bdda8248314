"""collapsed-outputs: the model's final outputs (logits) span a tiny range.

What it detects
    The range (max - min over the batch, and over the classes for logits) of the last recorded
    module's outputs: the model's logits or predictions. It is flagged when its median over the
    last third of the recorded steps is below `min_range`: the model outputs nearly one value
    for every input (and every class).

Why it matters
    A model whose logits are all nearly equal predicts the same thing for every input, whatever
    the loss says. It is the trace of a frozen or dead network, of a layer norm frozen by
    mistake, or of a loss that is minimized by predicting the mean.

Example
    A regression MLP whose ReLUs all died outputs its bias: `head` ranged over 2.3 at step 0
    and over 0.004 over the last 100 steps.

How to fix
    Look at the other findings for dead units, frozen parameters or vanishing gradients; check
    the loss and labels (a regression target's scale, class weights), and lower the learning
    rate if the network died early.

False positives
    A regression model whose targets themselves vary by less than `min_range` (unscaled
    targets in small units) needs a smaller threshold. A classifier on imbalanced classes that
    collapsed to its class priors keeps a wider range (its biases differ) and is missed; the
    dead or frozen layers behind it are reported by their own rules.
"""
from __future__ import annotations

import numpy as np

from tracelab.analyzers._dynamics import OUTCOME, finite_stat, fmt, tail
from tracelab.core.causes import explains
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import ACTIVATION, Needs


@rule(name="collapsed-outputs", code="TL207", requires=(Needs.ACTIVATIONS,),
      plot=Plot.OUTPUT_SPREAD,
      links=(explains(*OUTCOME, why="outputs that no longer vary cannot fit the labels",
                      timing="overlap"),))
def collapsed_outputs(run: Run, *, min_range: float = 0.1, window: float = 1 / 3,
                      min_recordings: int = 4) -> list[Finding]:
    hi, lo = finite_stat(run, ACTIVATION, "max"), finite_stat(run, ACTIVATION, "min")
    if hi.empty:
        return []
    module = str(hi.columns[-1])
    span = (hi[module] - lo[module]).dropna()
    span = span[np.isfinite(span.to_numpy(dtype=float))]
    if len(span) < min_recordings:
        return []
    recent = tail(span, window, minimum=2)
    start = float(span.iloc[0])
    level = float(recent.median())
    if not level < min_range:
        return []
    return [collapsed_outputs.finding(
        WARNING, module, (int(recent.index[0]), int(recent.index[-1])),
        f"The outputs of the final module '{module}' span only {fmt(level)} (max - min over the "
        f"batch, median of its last {len(recent)} recordings; {fmt(start)} at the start): the "
        "model gives nearly the same output for every input.",
        {"range": level, "range_start": start, "recordings": len(recent)},
        "Look for dead, frozen or saturated layers among the other findings, and check the loss "
        "against the labels.")]
