"""weight-decay-too-high: weight decay strong enough to shrink every layer while the loss stays
high, or coupled L2 in an adaptive optimizer far above its usual range.

What it detects
    How the optimizer applies weight_decay (meta.json's optimizers) sets both its usual range
    and how its effect is measured. AdamW (decoupled) multiplies the weights by (1 - lr * wd)
    at each step; SGD adds wd * w to the gradient, which momentum m carries: both are scaled by
    the learning rate. Adam, RMSprop and Adagrad add wd * w to the gradient too, then divide
    each element by the gradients' scale: where the L2 term outweighs the gradient it pulls
    each weight towards 0 by up to lr at every step, however small lr * wd is.
    - D, the decay budget: how far decay alone would shrink the weights over the run, as
      exp(-D), from the `lr/` scalars: wd * sum(lr) for AdamW, wd * sum(lr) / (1 - m) for SGD,
      wd * sum(lr) * sqrt(numel) / ||g|| for the adaptive ones (the layer where that is least,
      ||g|| at the start). The rule fires when, for a param group, D is at least `min_decay`,
      the norm of every weight matrix the group holds ends below where it started (their
      geometric mean at most `max_shrink` of it), and the train loss ended at more than
      `min_loss_ratio` of where it started: the decay won over the gradients.
    - Coupled L2 above its usual range (USUAL_DECAY: 1e-5 to 1e-3 for Adam's L2 term; AdamW
      1e-4 to 0.1, SGD 1e-5 to 1e-3 are judged by their budget): the rule fires, whatever the
      loss did, when every weight matrix whose L2 term wd * ||w|| was at least its gradient's
      norm at the start ended below its first norm (geometric mean at most `max_shrink`), and
      those are most of the group's matrices or most of them ended at `max_shrink` of their
      first norm or less; where only a few were outweighed (an embedding's sparse
      gradients), only with the loss stalled.
    - SGD's weight_decay above its usual range (1e-3) with a budget D of at least
      `min_decay`: the rule fires, whatever the loss did, when the tensors it decays (weight
      matrices and normalization scales) ended at `max_shrink` of their first norm or less
      overall (geometric mean), most of them below it: the scales, whose gradients are small,
      collapse and the matrices shrink while the output layer grows and the loss still falls.
    - A decay that halves the weights (or worse) at every step: AdamW's and SGD's per-step
      factor 1 - lr * wd (at the run's median learning rate) at most `max_factor`, beyond any
      usual range whatever the loss and the recorded norms did (the weights are recorded after
      each step, already decayed: weights wiped out at every step show no shrinking norm).
    Optimizers whose step is not measured in learning rates (Adadelta, LBFGS) are not judged.

Why it matters
    Decay pulls the weights towards 0; when that outweighs the gradients the model is held near
    zero weights and cannot fit: the loss stalls far above what the same model reaches with the
    usual decay, and it looks like a capacity problem. AdamW's value (0.1) given to Adam is
    100 times Adam's usual L2 term, and Adam's normalization makes it dominate every small
    gradient: the layers it outweighs collapse while the loss still falls, to a worse end.

Example
    Adam with lr 5e-4 and weight_decay 0.1 (AdamW's value, given to Adam as an L2 term): the
    L2 term outweighed the gradient of 6 of the 13 weight matrices at the start, and they
    shrank to 0.085 of their first norm over 175 steps while the loss went from 0.96 to 0.21
    (0.07 with AdamW).

How to fix
    Lower weight_decay to the usual range for the optimizer: about 1e-5 to 1e-3 for SGD and
    for Adam's L2 term, 1e-4 to 0.1 for AdamW (whose decay is multiplied by the learning
    rate), or use AdamW where its value was meant; exclude biases and normalization weights
    from decay.

False positives
    Ordinary decay (5e-4 with SGD, 0.01 to 0.1 with AdamW, up to 1e-3 as Adam's L2 term)
    gives a small budget on short runs; on long runs the budget grows but the loss falls,
    which keeps the rule quiet. Weights that shrink under normalization layers
    (scale-invariant) while the loss falls are quiet too, unless the decay is Adam's L2 term
    above its range. A loss whose start is already near its best (fine-tuning a converged
    model) could be flagged when the decay is large; the loss ratio guards against the
    common case.
"""
from __future__ import annotations

import numpy as np

from tracelab.analyzers._dynamics import OUTCOME, edge_len, fmt, initial, matrix_params, \
    param_shapes
from tracelab.analyzers._learning_rate import groups_of, lr_name
from tracelab.core.causes import explains
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import GRAD, WEIGHT, Needs


@rule(name="weight-decay-too-high", code="TL211",
      requires=(Needs.OPTIMIZERS, Needs.LEARNING_RATE, Needs.WEIGHTS, Needs.LOSS),
      plot=Plot.WEIGHT_CHANGE,
      links=(explains("update-ratio", "learning-rate-too-high", "vanishing-gradients", "dead-units",
                      "collapsed-outputs", *OUTCOME,
                      why="decay that outweighs the gradients holds the weights near zero",
                      timing="overlap"),))
def weight_decay_too_high(run: Run, *, min_decay: float = 0.5, max_shrink: float = 0.5,
                          min_loss_ratio: float = 0.5, max_factor: float = 0.5,
                          min_steps: int = 5) -> list[Finding]:
    norms = run.stat(WEIGHT, "norm")
    loss = run.loss().dropna()
    loss = loss[np.isfinite(loss.to_numpy(dtype=float))]
    if len(norms) < 2 or len(loss) < min_steps:
        return []
    start = initial(loss.to_numpy(dtype=float))
    end = float(loss.iloc[-edge_len(len(loss)):].median())
    if not start > 0:
        return []
    stalled = end > min_loss_ratio * start
    first, last = int(norms.index[0]), int(norms.index[-1])
    findings = []
    optimizers = run.optimizers()
    for key, summary in optimizers.items():
        groups = groups_of(summary)
        kind = str(summary.get("type", ""))
        for i, group in enumerate(groups):
            wd = group.get("weight_decay")
            decay = _decay_kind(kind, group)
            if decay is None or isinstance(wd, bool) or not isinstance(wd, (int, float)) or \
                    not wd > 0:
                continue
            wd = float(wd)
            name = lr_name(key, i, len(optimizers))
            lr = run.scalar(name).dropna()
            lr = lr[(lr.index >= first) & (lr.index < last)]
            params = group.get("params")
            names = matrix_params(run, [str(n) for n in params if str(n) in norms.columns]
                                  if isinstance(params, list) else [])
            if not names:
                continue
            budget = _budget(run, decay, group, wd, float(lr.sum()), names)
            factor = _step_factor(decay, wd, lr)
            # Decay scaled by the learning rate: its budget, with the loss stalled. Coupled L2
            # in an adaptive optimizer is also judged by its usual range: normalized with the
            # gradient, it pulls each weight towards 0 by up to the learning rate at every
            # step wherever it outweighs the gradient, whatever lr * wd comes to.
            judged = names if stalled and budget >= min_decay else []
            shrink = _shrink(norms, judged)
            outweighed = decay == L2_ADAPTIVE and wd > USUAL_DECAY[decay][1] and (
                shrink is None or shrink > max_shrink)
            sgd_above = decay == SGD_COUPLED and wd > USUAL_DECAY[decay][1] and (
                shrink is None or shrink > max_shrink)
            if sgd_above and budget >= min_decay:
                # SGD's L2 term above its usual range, with the budget to matter: when the
                # tensors it decays (matrices and normalization scales) ended at `max_shrink` of
                # their first norm or less overall, most of them below it, the decay held them
                # even where the loss still fell (the output layer grows while the rest shrink).
                decayed = names + _scales(run, params, norms)
                overall = _overall(norms, decayed)
                if overall is not None and overall <= max_shrink:
                    judged, shrink, names = decayed, overall, decayed
            if outweighed:
                judged = _outweighed(run, norms, names, wd)
                shrink = _shrink(norms, judged)
                if not (stalled or _most(norms, names, judged, max_shrink)):
                    # One matrix the L2 term outweighs (an embedding's sparse gradients) that
                    # shrank, while the rest of the model learns: the decay holds no model.
                    shrink = None
            halving = factor is not None and factor <= max_factor
            if (shrink is None or shrink > max_shrink) and not halving:
                continue
            if halving and (shrink is None or shrink > max_shrink):
                # Decay alone halves the weights (or worse) at every step: the weights are
                # recorded after each step, already decayed, so their norms need not show it.
                outweighed, judged = False, names
                shrink = _shrink(norms, names)
            findings.append(_finding(key, i, kind, decay, wd, lr, budget, shrink, judged, names,
                                     outweighed, (start, end), (first, last), len(optimizers),
                                     len(groups), factor, halving))
    return findings


def _finding(key: str, i: int, kind: str, decay: str, wd: float, lr, budget: float,
             shrink: float, judged: list[str], names: list[str], outweighed: bool,
             loss: tuple[float, float], steps: tuple[int, int], optimizers: int,
             groups: int, factor: float | None = None, halving: bool = False) -> Finding:
    usual = USUAL_DECAY[decay]
    where = "the optimizer" if optimizers == 1 else f"optimizer '{key}'"
    group_name = f"param group {i} of {where}" if groups > 1 else where
    which = (f"all {len(judged)} of its weight matrices" if len(judged) == len(names) else
             f"{len(judged)} of its {len(names)} weight matrices")
    said = (f"Weight decay outweighs the gradients: {group_name} ({kind}, weight_decay "
            f"{fmt(wd)}, lr up to {fmt(float(lr.max()))})")
    if outweighed:
        text = (f"{said} added an L2 term larger than the gradient to {which} at the start, "
                f"and they shrank, to {fmt(shrink)} of their first norm on average, over steps "
                f"{steps[0]}-{steps[1]} (the loss went from {fmt(loss[0])} to {fmt(loss[1])}): "
                f"{fmt(wd)} is above the usual range of {kind}'s L2 term ({fmt(usual[0])} to "
                f"{fmt(usual[1])}); added to the gradient and normalized with it, it pulls each "
                "weight towards 0 by up to the learning rate at every step where it outweighs "
                "the gradient.")
    elif halving:
        shrunk = (f", and {which} ended at {fmt(shrink)} of their first recorded norm "
                  "(recorded after each step's decay)" if shrink is not None else "")
        text = (f"{said} multiplies the weights by 1 - lr * weight_decay = {fmt(factor)} at "
                f"every step (lr {fmt(float(lr.median()))} x weight_decay {fmt(wd)}): decay "
                f"alone takes away {1 - factor:.0%} of each weight at every step, whatever the "
                f"gradient adds; weight_decay is far beyond its usual range for {kind} "
                f"({fmt(usual[0])} to {fmt(usual[1])}){shrunk}; the loss went from "
                f"{fmt(loss[0])} to {fmt(loss[1])}.")
    else:
        above = (f" ({fmt(wd)} is above {kind}'s usual range, {fmt(usual[0])} to "
                 f"{fmt(usual[1])})" if decay == SGD_COUPLED and wd > usual[1] else "")
        text = (f"{said} has a decay budget of {fmt(budget)} over steps {steps[0]}-{steps[1]} "
                f"(decay alone would leave {fmt(float(np.exp(-budget)))} of the weights){above}, "
                f"and {which} shrank, to {fmt(shrink)} of their first norm on average, while "
                f"the loss went from {fmt(loss[0])} to {fmt(loss[1])}.")
    return weight_decay_too_high.finding(
        WARNING, lr_name(key, i, optimizers), steps, text,
        {"weight_decay": wd, "optimizer": kind, "decay": decay, "usual_range": list(usual),
         "above_usual_range": wd > usual[1], "l2_outweighs_gradient": outweighed,
         "decay_budget": budget, "shrink": shrink, "step_factor": factor,
         "halves_each_step": halving, "layers": len(judged),
         "loss_start": loss[0], "loss_end": loss[1]},
        _fix(kind, decay, wd))


def _shrink(norms, names: list[str]) -> float | None:
    """The geometric mean of how much each of `names` ended at of its first norm, where every
    one of them ended below it (None otherwise, or where there are none)."""
    if not names:
        return None
    ends = norms[names].ffill().iloc[-1] / norms[names].bfill().iloc[0]
    ends = ends[np.isfinite(ends.to_numpy(dtype=float))]
    if len(ends) < len(names) or not (ends < 1).all():
        return None
    return float(np.exp(np.mean(np.log(ends.clip(lower=1e-30)))))


def _scales(run: Run, params, norms) -> list[str]:
    """The group's normalization scales (1-D, not biases) with recorded norms."""
    shapes = param_shapes(run)
    return [str(n) for n in (params if isinstance(params, list) else [])
            if str(n) in norms.columns and len(shapes.get(str(n), ())) == 1
            and not str(n).endswith("bias")]


def _overall(norms, names: list[str]) -> float | None:
    """The geometric mean of how much each of `names` ended at of its first norm, where most
    of them ended below it (None otherwise, or where there are none)."""
    if not names:
        return None
    ends = norms[names].ffill().iloc[-1] / norms[names].bfill().iloc[0]
    ends = ends[np.isfinite(ends.to_numpy(dtype=float)) & (ends > 0)]
    if 2 * int((ends < 1).sum()) <= len(names):
        return None
    return float(np.exp(np.mean(np.log(ends))))


def _most(norms, names: list[str], judged: list[str], max_shrink: float) -> bool:
    """Whether the decay holds most of the group's weight matrices: more than half of them
    outweighed by the L2 term, or more than half of them ended at `max_shrink` of their
    first norm or less."""
    if not names or not judged:
        return False
    if 2 * len(judged) > len(names):
        return True
    ends = norms[names].ffill().iloc[-1] / norms[names].bfill().iloc[0]
    return bool(2 * int((ends <= max_shrink).sum()) > len(names))


def _outweighed(run: Run, norms, names: list[str], wd: float) -> list[str]:
    """The weight matrices whose L2 term's norm wd * ||w|| was at least their gradient's norm
    at the start (the median of the first 5 recorded steps): there the decay, not the loss,
    sets the direction of an adaptive optimizer's normalized step."""
    grads = run.stat(GRAD, "norm")
    names = [n for n in names if n in grads.columns]
    if not names:
        return []
    grad = grads[names].iloc[:5].median()
    weight = norms[names].bfill().iloc[:5].median()
    return [n for n in names if grad[n] > 0 and wd * weight[n] >= grad[n]]


# How an optimizer applies weight decay, and its usual range of weight_decay for each.
DECOUPLED = "decoupled"  # AdamW's: w <- w (1 - lr wd), apart from the gradient
SGD_COUPLED = "sgd"  # SGD's: wd w added to the gradient, scaled by lr like it
L2_ADAPTIVE = "l2"  # Adam's, RMSprop's, Adagrad's: wd w added to the gradient, then normalized
USUAL_DECAY = {DECOUPLED: (1e-4, 0.1), SGD_COUPLED: (1e-5, 1e-3), L2_ADAPTIVE: (1e-5, 1e-3)}
# Optimizers that divide each step by a running scale of the gradients (per element).
_ADAPTIVE = ("Adam", "NAdam", "RAdam", "Adamax", "RMSprop", "Adagrad")


def _decay_kind(kind: str, group: dict) -> str | None:
    """How the optimizer `kind` applies a param group's weight decay (None for an optimizer
    whose step is not measured in learning rates, such as Adadelta or LBFGS)."""
    if kind == "AdamW" or group.get("decoupled_weight_decay") is True:
        return DECOUPLED
    if kind == "SGD":
        return SGD_COUPLED
    return L2_ADAPTIVE if kind in _ADAPTIVE else None


def _fix(kind: str, decay: str, wd: float) -> str:
    low, high = USUAL_DECAY[decay]
    usual = f"about {fmt(low)} to {fmt(high)}"
    advice = {
        DECOUPLED: f"{usual} for {kind or 'AdamW'}, whose decay is multiplied by the "
                   "learning rate",
        SGD_COUPLED: f"{usual} for SGD (5e-4 is common), whose decay is multiplied by the "
                     "learning rate",
        L2_ADAPTIVE: f"{usual} for {kind}'s L2 term, or switch to AdamW (decoupled decay, 0.01 "
                     "to 0.1) if this value was meant for it",
    }[decay]
    return (f"Lower weight_decay (now {fmt(wd)}) to the usual range: {advice}; exclude biases "
            "and normalization weights from decay.")


def _step_factor(decay: str, wd: float, lr) -> float | None:
    """What decay alone leaves of the weights at each step, 1 - lr * wd at the run's median
    learning rate: AdamW's w <- w (1 - lr wd); SGD's wd w added to the gradient takes the same
    share at once (momentum then carries more). None for adaptive L2 (normalized with the
    gradient, it is judged by its range) or where no learning rate was recorded."""
    if decay not in (DECOUPLED, SGD_COUPLED) or not len(lr):
        return None
    rate = float(lr.median())
    return 1 - rate * wd if np.isfinite(rate) and rate > 0 else None


def _budget(run: Run, decay: str, group: dict, wd: float, lr_sum: float,
            names: list[str]) -> float:
    """D, the log of how much decay alone shrinks the weights over the run (NaN where the
    facts to judge it were not recorded)."""
    if decay == DECOUPLED:
        return wd * lr_sum  # w <- w (1 - lr wd)
    if decay == SGD_COUPLED:
        momentum = group.get("momentum")
        carry = 1 / (1 - momentum) if isinstance(momentum, (int, float)) and \
            0 <= momentum < 1 else 1.0
        return wd * lr_sum * carry  # wd w added to the gradient, carried by momentum
    # wd w added to the gradient, then divided per element by the gradients' scale, about
    # ||g|| / sqrt(numel) at the start: the decay's share of a step of size lr (the layer
    # where that is least)
    grads = run.stat(GRAD, "norm")
    if not set(names) <= set(grads.columns):
        return float("nan")
    scale = grads[names].iloc[:5].median() / np.sqrt(
        run.numel(WEIGHT).reindex(names).astype(float))
    scale = scale[scale > 0]
    return wd * lr_sum / float(scale.max()) if len(scale) == len(names) else float("nan")
