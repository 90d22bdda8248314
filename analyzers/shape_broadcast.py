"""shape-broadcast: the outputs and targets of an element-wise loss broadcast to a larger shape.

What it detects
    `step(outputs=..., targets=...)` records whether the two shapes broadcast to more
    elements than either has: an `(N, 1)` prediction against `(N,)` targets becomes an
    `(N, N)` grid that compares every prediction with every target. The rule fires when that
    holds on at least `min_share` of the profiled train steps and the loss compares element
    by element: MSE, L1, smooth L1 and Huber losses named by `Recorder(loss_fn=...)`, or an
    unknown loss. For a squared error the grid's mean is sum_i (o_i - mean t)^2 / N + var(t):
    never below the batch's target variance (population variance, from the targets profile).
    Where a mean MSELoss went below it on a profiled step, the loss did not compare the grid
    (the outputs given were squeezed before it) and the rule stays quiet. An unknown loss
    (the recorded loss may add other terms, as PPO's adds a policy term to its value loss)
    is judged on its shapes alone, and only when they differ by one dimension of 1 (a
    warning).
    Outputs expanded along the targets' shape are the same mistake one step earlier: an
    `(N, 1)` prediction against `(N, N)` targets, same rank and batch size, every output
    dimension the targets' or 1, and the targets' expanded dimension the batch size (a
    reward of shape `(N,)` added to an `(N, 1)` bootstrap gives an `(N, N)` target). The grid
    is then the targets' own shape, so the per-step fact stays 0; meta.json's output layout
    says it, on the profiled steps since it appeared, and a named element-wise loss is
    required. No variance floor applies (the bound is the variance within each sample's
    targets, not recorded).

Why it matters
    torch broadcasts silently (MSE and L1 only warn once). Every prediction is pulled towards
    every target, so the best the model can do is predict the batch mean for all samples: the
    loss plateaus at the targets' variance and the model learns nothing per sample.

Example
    On 10 of 10 profiled steps outputs of shape [32, 1] and targets of shape [32] broadcast to
    [32, 32] in MSELoss: each prediction is compared with all 32 targets.

How to fix
    Make the shapes equal before the loss: `out.squeeze(-1)` (or `targets.unsqueeze(-1)`,
    `targets.view_as(out)`).

False positives
    BCELoss and BCEWithLogitsLoss refuse different sizes, and classification losses take
    `(N, C)` against `(N,)` by design: they stay quiet, as does a run that passes the
    unsqueezed output as `outputs` while its MSELoss goes below the target variance.
    `outputs` is the tensor the loss read: a run that squeezes it in an unnamed or L1 loss
    but records it unsqueezed is flagged. Checked against regression with matching shapes.
    Outputs wider than their targets (K ensemble heads against one `(N, 1)` target) compare
    each prediction with one target and stay quiet; an expanded layout with an unnamed loss
    is not judged. An `(N, 1)` prediction against `(N, K)` targets with K not the batch size
    (K sampled returns or K annotators of one quantity) stays quiet: the broadcast MSE has
    the gradient of the MSE against each sample's mean target, a deliberate shortcut.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import OUTCOME, fmt
from tracelab.analyzers._loss_contracts import (ABSOLUTE, SQUARED, loss_type, mean_reduced,
                                                output_facts, output_shapes)
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import OUTPUT_BROADCAST, TRAIN, Needs


def _broadcast_shape(a: list[int], b: list[int]) -> list[int] | None:
    try:
        return list(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        return None


def _singleton_apart(a: list[int], b: list[int]) -> bool:
    """Whether one shape is the other with one more dimension of size 1."""
    short, long = sorted((list(a), list(b)), key=len)
    return len(long) == len(short) + 1 and any(
        long[i] == 1 and long[:i] + long[i + 1:] == short for i in range(len(long)))


def _outputs_expanded(a: list[int], b: list[int]) -> bool:
    """Whether outputs of shape `a` are expanded along a batch-sized dimension of the targets'
    shape `b`: both of one rank with the same batch size N (first dimension, above 1), every
    dimension of `a` either `b`'s or 1, and some 1 where `b` has N. An (N, 1) prediction
    against (N, N) targets (r of shape (N,) added to an (N, 1) bootstrap broadcasts the
    target to (N, N)): each prediction meets every sample's target and can fit only their
    mean. (N, K) targets with K not N are K samples of one quantity (sampled returns,
    annotators): the broadcast MSE has the gradient of the MSE against their mean. Outputs
    wider than their targets (K ensemble heads against one (N, 1) target) are each compared
    with one target."""
    try:
        a, b = [int(d) for d in a], [int(d) for d in b]
    except (TypeError, ValueError):
        return False
    return len(a) == len(b) >= 2 and a[0] == b[0] > 1 and \
        all(x == y or x == 1 for x, y in zip(a, b)) and \
        any(x == 1 and y == b[0] for x, y in zip(a[1:], b[1:]))


def _since_layout(run: Run, facts: pd.Series, step) -> pd.Index:
    """The profiled steps since meta.json's output layout was first seen (it holds the latest
    layout and the step it appeared at); none where that step is unknown."""
    try:
        first = int(step)
    except (TypeError, ValueError):
        return facts.index[:0]
    return facts.index[facts.index >= first]


def _variance_floor(run: Run, steps: pd.Index) -> pd.Series:
    """The population variance of each profiled step's targets (one target feature only)."""
    tg = run.targets
    rows = tg[(tg["split"] == TRAIN) & tg["step"].isin(steps)]
    if not len(rows) or rows["feature"].nunique() != 1:
        return pd.Series(dtype=float)
    rows = rows.groupby("step").last()
    n = rows["count"].astype(float)
    return (rows["std"].astype(float) ** 2 * (n - 1) / n).dropna()


@rule(name="shape-broadcast", code="TL608", requires=(Needs.OUTPUTS,), plot=Plot.LOSS,
      links=(explains("collapsed-outputs", *OUTCOME,
                      why="broadcast predictions are each compared with every target, so the "
                          "best the model can do is predict the batch mean",
                      timing="overlap"),
             explains("loss-oscillation", "loss-spike",
                      why="a broadcast squared error is at least the batch's target variance, "
                          "which swings from batch to batch", timing="overlap")))
def shape_broadcast(run: Run, *, min_share: float = 0.9,
                    tolerance: float = 1e-3) -> list[Finding]:
    facts = output_facts(run)[OUTPUT_BROADCAST].dropna()
    if not len(facts):
        return []
    kind = loss_type(run)
    if kind is not None and kind not in SQUARED | ABSOLUTE:
        return []
    shapes = output_shapes(run)
    shape, target = shapes.get("shape"), shapes.get("targets_shape")
    grid = _broadcast_shape(shape, target) if shape and target else None
    # Outputs expanded along the targets' own shape: the grid is the targets' shape, so the
    # per-step fact (more elements than either) is 0; meta.json's layout says it, since the
    # step it appeared at. Judged in a named element-wise loss only.
    expanded = kind is not None and bool(grid) and _outputs_expanded(shape, target)
    held = _since_layout(run, facts, shapes.get("step")) if expanded else facts.index[facts > 0]
    if len(held) < min_share * len(facts):
        return []
    floor = _variance_floor(run, held)
    loss = run.loss().reindex(floor.index)
    judged = loss.notna() & floor.notna()
    # The recorded loss is the named squared error: it bounds what the loss compared. Expanded
    # outputs are bounded by the variance within each sample's targets, which is not recorded.
    squared = kind in SQUARED and mean_reduced(run) and bool(judged.any()) and not expanded
    if squared and (loss[judged] < floor[judged] * (1 - tolerance)).any():
        return []  # the loss went below what a broadcast squared error allows
    if kind is None and not (grid and _singleton_apart(shape, target)):
        return []
    where = (f"outputs of shape {shape} and targets of shape {target} broadcast to {grid}"
             if grid else "outputs and targets broadcast to a larger shape")
    each = f" all {target[0]}" if target and len(target) else " every"
    if expanded:
        many = int(np.prod(grid) // max(int(np.prod(shape)), 1))
        each = f" {many} of its sample's"
    variance = (f" Its lowest profiled value ({fmt(float(loss[judged].min()))}) never went "
                f"below the targets' variance ({fmt(float(floor[judged].min()))}), as a "
                "broadcast squared error cannot." if squared else "")
    fix = ("Make the shapes equal before the loss: out.squeeze(-1) (or targets.unsqueeze(-1), "
           "targets.view_as(out)).")
    if expanded:
        # The expanded dimension is the batch's: a (N,) term met an (N, 1) one while the
        # targets were computed.
        variance = (" The targets were themselves broadcast before the loss: a term of shape "
                    f"({target[0]},) meeting one of shape {shape} gives {target}.")
        fix = ("Give every term of the target the outputs' shape before combining them "
               "(reward.unsqueeze(1) before adding mask * gamma * next_q of shape (N, 1)); "
               "assert target.shape == out.shape before the loss.")
    return [shape_broadcast.finding(
        ERROR if kind is not None else WARNING, "outputs", (int(held[0]), int(held[-1])),
        f"On {len(held)} of {len(facts)} profiled steps {where} in "
        f"{kind or 'the loss'}: each prediction is compared with{each} targets.{variance}",
        {"loss_fn": kind, "outputs_shape": shape, "targets_shape": target,
         "broadcast_shape": grid, "profiled_steps": len(facts), "broadcast_steps": len(held),
         "outputs_expanded": expanded},
        fix)]
