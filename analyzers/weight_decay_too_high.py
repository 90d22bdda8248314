"""weight-decay-too-high: weight decay strong enough to shrink every layer while the loss stays
high.

What it detects
    D, the decay budget: how far decay alone would shrink the weights over the run, as
    exp(-D), from meta.json's optimizers (weight_decay, momentum) and the `lr/` scalars.
    AdamW (decoupled) multiplies the weights by (1 - lr * wd) at each step: D = wd * sum(lr).
    SGD adds wd * w to the gradient, which momentum m carries: D = wd * sum(lr) / (1 - m).
    Adam, RMSprop and Adagrad add it too, then divide each element by the gradients' scale,
    about ||g|| / sqrt(numel) at the start: D = wd * sum(lr) * sqrt(numel) / ||g|| (the layer
    where that is least). The rule fires when, for a param group, D is at least `min_decay`,
    the norm of every weight matrix the group holds ends below where it started (their
    geometric mean at most `max_shrink` of it), and the train loss ended at more than
    `min_loss_ratio` of where it started: the decay won over the gradients. Optimizers whose
    step is not measured in learning rates (Adadelta, LBFGS) are not judged.

Why it matters
    Decay pulls the weights towards 0 at a rate set by lr * wd; when that outweighs the
    gradients the model is held near zero weights and cannot fit: the loss stalls far above
    what the same model reaches with the usual decay, and it looks like a capacity problem.

Example
    Adam with lr 1e-3 and weight_decay 0.1 (AdamW's value, given to Adam as an L2 term):
    decay budget 0.6 over 150 steps; all 3 weight matrices shrank (to 0.4 of their initial
    norm on average) while the loss went from 1.37 to 1.36.

How to fix
    Lower weight_decay to the usual range for the optimizer: about 1e-5 to 1e-3 for SGD and
    for Adam's L2 term, 1e-4 to 0.1 for AdamW (whose decay is multiplied by the learning
    rate); exclude biases and normalization weights from decay.

False positives
    Ordinary decay (5e-4 with SGD, 0.01 to 0.1 with AdamW) gives a small budget on short runs;
    on long runs the budget grows but the loss falls, which keeps the rule quiet. Weights that
    shrink under normalization layers (scale-invariant) while the loss falls are quiet too. A
    loss whose start is already near its best (fine-tuning a converged model) could be
    flagged when the decay is large; the loss ratio guards against the common case.
"""
from __future__ import annotations

import numpy as np

from tracelab.analyzers._dynamics import OUTCOME, edge_len, fmt, initial, matrix_params
from tracelab.analyzers._learning_rate import lr_name
from tracelab.core.causes import explains
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import GRAD, META_OPTIMIZERS, WEIGHT, Needs


@rule(name="weight-decay-too-high", code="TL211",
      requires=(Needs.OPTIMIZERS, Needs.LEARNING_RATE, Needs.WEIGHTS, Needs.LOSS),
      plot=Plot.WEIGHT_CHANGE,
      links=(explains("update-ratio", "learning-rate-too-high", "vanishing-gradients", "dead-units",
                      "collapsed-outputs", *OUTCOME,
                      why="decay that outweighs the gradients holds the weights near zero",
                      timing="overlap"),))
def weight_decay_too_high(run: Run, *, min_decay: float = 0.5, max_shrink: float = 0.5,
                          min_loss_ratio: float = 0.5, min_steps: int = 5) -> list[Finding]:
    norms = run.stat(WEIGHT, "norm")
    loss = run.loss().dropna()
    loss = loss[np.isfinite(loss.to_numpy(dtype=float))]
    if len(norms) < 2 or len(loss) < min_steps:
        return []
    start = initial(loss.to_numpy(dtype=float))
    end = float(loss.iloc[-edge_len(len(loss)):].median())
    if not (start > 0 and end > min_loss_ratio * start):
        return []
    first, last = int(norms.index[0]), int(norms.index[-1])
    optimizers = run.meta.get(META_OPTIMIZERS) or {}
    findings = []
    for key, summary in optimizers.items():
        groups = (summary or {}).get("groups") or []
        kind = str((summary or {}).get("type", ""))
        for i, group in enumerate(groups):
            wd = group.get("weight_decay")
            if not isinstance(wd, (int, float)) or wd <= 0:
                continue
            name = lr_name(key, i, len(optimizers))
            lr = run.scalar(name).dropna()
            lr = lr[(lr.index >= first) & (lr.index < last)]
            names = matrix_params(run, [n for n in group.get("params") or []
                                        if n in norms.columns])
            budget = _budget(run, kind, group, float(wd), float(lr.sum()), names)
            if not names or not budget >= min_decay:
                continue
            ends = norms[names].ffill().iloc[-1] / norms[names].bfill().iloc[0]
            ends = ends[np.isfinite(ends.to_numpy(dtype=float))]
            if len(ends) < len(names) or not (ends < 1).all():
                continue
            shrink = float(np.exp(np.mean(np.log(ends.clip(lower=1e-30)))))
            if shrink > max_shrink:
                continue
            where = "the optimizer" if len(optimizers) == 1 else f"optimizer '{key}'"
            group_name = f"param group {i} of {where}" if len(groups) > 1 else where
            findings.append(weight_decay_too_high.finding(
                WARNING, name, (first, last),
                f"Weight decay outweighs the gradients: {group_name} ({kind}, weight_decay "
                f"{fmt(wd)}, lr up to {fmt(float(lr.max()))}) has a decay budget of "
                f"{fmt(budget)} over steps {first}-{last} (decay alone would leave "
                f"{fmt(float(np.exp(-budget)))} of the weights), and all {len(names)} of its "
                f"weight matrices shrank, to {fmt(shrink)} of their first norm on average, "
                f"while the loss went from {fmt(start)} to {fmt(end)}.",
                {"weight_decay": float(wd), "optimizer": kind, "decay_budget": budget,
                 "shrink": shrink, "layers": len(names), "loss_start": start,
                 "loss_end": end},
                f"Lower weight_decay (now {fmt(wd)}) to the usual range for "
                f"{kind or 'the optimizer'}: about 1e-5 to 1e-3 for SGD and Adam's L2 term, "
                "1e-4 to 0.1 for AdamW; exclude biases and normalization weights from decay."))
    return findings



# Optimizers that divide each step by a running scale of the gradients (per element).
_ADAPTIVE = ("Adam", "NAdam", "RAdam", "Adamax", "RMSprop", "Adagrad")


def _budget(run: Run, kind: str, group: dict, wd: float, lr_sum: float,
            names: list[str]) -> float:
    """D, the log of how much decay alone shrinks the weights over the run (NaN for an
    optimizer whose step is not measured in learning rates, such as Adadelta or LBFGS)."""
    if kind == "AdamW" or group.get("decoupled_weight_decay") is True:
        return wd * lr_sum  # w <- w (1 - lr wd)
    if kind == "SGD":
        momentum = group.get("momentum")
        carry = 1 / (1 - momentum) if isinstance(momentum, (int, float)) and \
            0 <= momentum < 1 else 1.0
        return wd * lr_sum * carry  # wd w added to the gradient, carried by momentum
    if kind in _ADAPTIVE and names:
        # wd w added to the gradient, then divided per element by the gradients' scale,
        # about ||g|| / sqrt(numel) at the start: the decay's share of a step of size lr
        grads = run.stat(GRAD, "norm")
        if not set(names) <= set(grads.columns):
            return float("nan")
        scale = grads[names].iloc[:5].median() / np.sqrt(
            run.numel(WEIGHT).reindex(names).astype(float))
        scale = scale[scale > 0]
        return wd * lr_sum / float(scale.max()) if len(scale) == len(names) else float("nan")
    return float("nan")
