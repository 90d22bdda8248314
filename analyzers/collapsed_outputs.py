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
    Where the outputs predict the targets one for one (meta.json's outputs: one shape, real-
    valued targets) and their recorded targets span little too, outputs are flagged only when
    they span less than `target_share` of the targets' range: a value head fitting returns
    that differ little, a discriminator judged against constant labels. Without recorded
    targets, a regression model whose targets themselves vary by less than `min_range`
    (unscaled targets in small units) needs a smaller threshold. A module whose output holds
    one element (an actor-critic's value head run on one state at a time) spans 0 by
    construction: the rule reads the last module whose output holds two or more (the policy
    head beside it), and stays quiet where none does. One unbounded score per sample (outputs
    (N,) or (N, 1)) that no probability loss scores (no loss_fn, or a regression or other
    loss) has no unit of its own: a WGAN critic with weights clipped to [-0.01, 0.01] scores
    in hundredths. Such a score is flagged only where its range also fell below `score_share`
    of the widest it showed before the last third, or where its outputs are equal to float32
    resolution (a dead critic, a regression head that outputs its bias). A policy's softmax that grows near-
    deterministic widens its logits' range: convergence, not collapse. A classifier on
    imbalanced classes that collapsed to its class priors keeps a wider range (its biases
    differ) and is missed; the dead or frozen layers behind it are reported by their own
    rules.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import OUTCOME, finite_stat, fmt, tail
from tracelab.analyzers._loss_contracts import BCE, BCE_LOGITS, CROSS_ENTROPY, NLL, loss_type
from tracelab.core.causes import explains
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import ACTIVATION, TRAIN, Needs


@rule(name="collapsed-outputs", code="TL207", requires=(Needs.ACTIVATIONS,),
      plot=Plot.OUTPUT_SPREAD,
      links=(explains(*OUTCOME, why="outputs that no longer vary cannot fit the labels",
                      timing="overlap"),))
def collapsed_outputs(run: Run, *, min_range: float = 0.1, window: float = 1 / 3,
                      min_recordings: int = 4, target_share: float = 0.5,
                      score_share: float = 0.1) -> list[Finding]:
    hi, lo = finite_stat(run, ACTIVATION, "max"), finite_stat(run, ACTIVATION, "min")
    if hi.empty:
        return []
    module = _final_module(run, [str(c) for c in hi.columns])
    if module is None:
        return []
    span = (hi[module] - lo[module]).dropna()
    span = span[np.isfinite(span.to_numpy(dtype=float))]
    if len(span) < min_recordings:
        return []
    recent = tail(span, window, minimum=2)
    start = float(span.iloc[0])
    level = float(recent.median())
    if not level < min_range:
        return []
    if _unitless_score(run, module):
        # a score in the network's own units: only a fall from its own spread, or outputs
        # equal to float32 resolution, is a collapse
        magnitude = float(np.nanmax(np.abs(np.r_[hi[module].reindex(recent.index),
                                                 lo[module].reindex(recent.index)])))
        before = span.loc[:recent.index[0]].iloc[:-1]
        widest = float(before.max()) if len(before) else 0.0
        if not (level <= FLOAT32_EPS * magnitude or level < score_share * widest):
            return []
    targets = _target_range(run, int(recent.index[0]))
    if targets is not None and not level < target_share * targets:
        return []  # the targets the outputs fit span as little: no collapse
    return [collapsed_outputs.finding(
        WARNING, module, (int(recent.index[0]), int(recent.index[-1])),
        f"The outputs of the final module '{module}' {_spread(level)} (max - min over the "
        f"batch, median of its last {len(recent)} recordings; {fmt(start)} at the start): the "
        f"model gives {'the same' if level == 0 else 'nearly the same'} output for every input.",
        {"range": level, "range_start": start, "recordings": len(recent)},
        "Look for dead, frozen or saturated layers among the other findings, and check the loss "
        "against the labels.")]


def _spread(level: float) -> str:
    return "do not vary at all" if level == 0 else f"span only {fmt(level)}"


def _final_module(run: Run, modules: list[str]) -> str | None:
    """The last recorded module whose output holds two or more elements: one value (a value
    head's V(s) on one state, a scalar score) spans 0 by construction, and says nothing of
    how the model's outputs vary. Where the element counts are not recorded, the last module;
    None where every recorded module outputs a single element."""
    try:
        numel = pd.to_numeric(run.numel(ACTIVATION), errors="coerce")
    except (KeyError, ValueError, TypeError, AttributeError):
        return modules[-1]
    for module in reversed(modules):
        count = numel.get(module) if module in numel.index else None
        if count is None or not np.isfinite(count) or count >= 2:
            return module
    return None


# Losses that give the outputs a unit (logits and log-probabilities in nats, probabilities),
# and output modules bounded to a fixed interval: their ranges compare with `min_range`.
UNIT_LOSSES = CROSS_ENTROPY | NLL | BCE_LOGITS | BCE
BOUNDED_OUTPUTS = frozenset({"Sigmoid", "Softmax", "LogSoftmax", "Tanh", "Hardsigmoid",
                             "Hardtanh", "Softsign"})
FLOAT32_EPS = float(np.finfo(np.float32).eps)


def _unitless_score(run: Run, module: str) -> bool:
    """Whether `module` outputs one unbounded value per sample (every call recorded in
    meta.json's module_shapes of shape (N,) or (N, 1, ...)) that no probability loss scores:
    a critic's score, a value or a regression without recorded targets, in whatever units the
    network took (a WGAN critic's clipped weights make them hundredths). False where the
    shapes are not recorded."""
    if loss_type(run) in UNIT_LOSSES or run.module_types().get(module) in BOUNDED_OUTPUTS:
        return False
    calls = (run.meta.get("module_shapes") or {}).get(module)
    shapes = [c.get("output") for c in calls if isinstance(c, dict)] \
        if isinstance(calls, list) else []
    if not shapes:
        return False
    for shape in shapes:
        if not isinstance(shape, list) or not shape or \
                not all(isinstance(n, int) and not isinstance(n, bool) for n in shape) or \
                int(np.prod(shape[1:])) != 1:
            return False
    return True


def _target_range(run: Run, since: int) -> float | None:
    """The median range (max - min over the batch) of the real-valued train targets recorded
    from step `since` on (all of them where none is that late), where meta.json's outputs say
    the outputs and targets have one shape (a prediction of each target, not logits against
    class indices); None where that is not recorded."""
    spec = run.meta.get("outputs")
    spec = spec.get(TRAIN) if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or spec.get("targets_shape") is None or \
            spec.get("targets_shape") != spec.get("shape") or \
            not str(spec.get("targets_dtype", "")).startswith(("float", "bfloat")):
        return None
    rows = run.targets
    if not {"step", "split", "min", "max"} <= set(rows.columns):
        return None
    rows = rows[rows["split"] == TRAIN]
    span = (pd.to_numeric(rows["max"], errors="coerce")
            - pd.to_numeric(rows["min"], errors="coerce"))
    steps = pd.to_numeric(rows["step"], errors="coerce")
    span = span[np.isfinite(span.to_numpy(dtype=float))]
    late = span[steps.reindex(span.index) >= since]
    span = late if len(late) else span
    return float(span.median()) if len(span) else None
