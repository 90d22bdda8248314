"""Updates too small to move the model: how far the learning rate lets each weight move.

The reach of one step against a weight matrix follows from the optimizer's update rule:
- Adam and the optimizers that divide by a running root mean square of the gradients (AdamW,
  Adamax, NAdam, RAdam, RMSprop, Adagrad) move each element by about the learning rate or less,
  whatever the gradients' scale: the reach is lr / rms(w).
- Plain and momentum SGD move the weights by lr * grad: the recorded ||update|| / ||weight||.
Other optimizers (LBFGS's line search, Adadelta and Rprop, whose `lr` scales a step they size
themselves) and parameters no recorded optimizer holds are not judged.

A run is judged with the largest learning rate it used (its `lr/` scalars, else meta.json's),
so that the late, small steps of a decaying schedule say nothing of the learning rate the run
chose; plain SGD's recorded ratio is scaled by the peak's ratio to the step's learning rate.
Only a run whose loss does not fall (loss-plateau's sense: less than 3 % below where it
started, and not growing) is judged: a fine-tuning run with a small learning rate whose loss
falls is healthy however small its updates. Nor is a run whose loss starts below the loss of
the best prediction that ignores the input (`constant_loss`, paired with the first steps'
own batches where profiled) by NOT_LEARNING or more: a trained model, resumed or fine-tuned
at a small learning rate, has little left to fall. Where that level is not known (no
recorded loss function, or one without it) a finished model cannot be told from a starved
one, and the run is not judged.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import edge_len, finite
from tracelab.analyzers._learning_rate import groups_of, loss_grew, lr_name, watched_parameter
from tracelab.analyzers._loss_contracts import constant_loss, constant_losses
from tracelab.core.run import Run
from tracelab.core.schema import (BACKWARD_PASSES, BACKWARD_RESETS, BACKWARD_WEIGHTS_MOVED,
                                   OPTIMIZER_STEPS, WEIGHT)

NORMALIZED = frozenset({"Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad",
                        "SparseAdam"})
PLAIN = frozenset({"SGD", "ASGD"})
# Optimizers whose one step() runs an inner loop of iterations with a line search (LBFGS's
# max_iter): a step's change is a whole optimization's, not one gradient step's.
INNER_LOOP = frozenset({"LBFGS"})
# The usual update ratio is 1e-3; half a decade below it, a step moves a weight by less than
# a third of that, at the very bottom of the common 1e-4..1e-2 range.
TOO_SMALL = 10 ** -3.5
# loss-plateau's min_drop: a loss that falls less than this fraction does not learn.
NOT_LEARNING = 0.03
MIN_LOSSES = 30


def loss_fall(run: Run) -> float | None:
    """The training loss's relative fall from its first to its last steps (medians of each
    end), or None with fewer than MIN_LOSSES finite losses."""
    values = finite(run.loss()).to_numpy(dtype=float)
    if len(values) < MIN_LOSSES:
        return None
    k = edge_len(len(values))
    start, end = float(np.median(values[:k])), float(np.median(values[-k:]))
    return (start - end) / max(abs(start), 1e-12)


def starts_unlearned(run: Run, min_points: int = 3) -> bool:
    """Whether the training loss's first steps (their median, as `loss_fall`) are no more
    than NOT_LEARNING below the best input-free prediction's loss: over the first steps whose
    batches were profiled (`constant_losses`, `min_points` of them or more) the loss summed
    against that prediction's loss on the very same batches, else against `constant_loss`.
    False where neither is known."""
    loss = finite(run.loss())
    if len(loss) < MIN_LOSSES:
        return False
    first = loss.iloc[:edge_len(len(loss))]
    per = constant_losses(run)
    if per is not None:
        per = per[np.isfinite(per.to_numpy(dtype=float)) & (per > 0)]
        per = per[per.index.isin(first.index)]
    if per is not None and len(per) >= min_points:
        level, bound = float(first.reindex(per.index).sum()), float(per.sum())
    else:
        level, bound = float(first.median()), constant_loss(run) or float("nan")
    return bool(math.isfinite(bound) and bound > 0 and level >= (1 - NOT_LEARNING) * bound)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and value > 0 else None


def _holders(run: Run) -> dict[str, tuple[str, str, float]]:
    """Each held parameter's (optimizer type, its group's `lr/` scalar name, the group's lr)."""
    optimizers = run.optimizers()
    held = {}
    for key, summary in optimizers.items():
        kind = str(summary.get("type", "")) if isinstance(summary, dict) else ""
        for index, group in enumerate(groups_of(summary)):
            lr = _number(group.get("lr"))
            params = group.get("params")
            if lr is None or not isinstance(params, list):
                continue
            for name in params:
                held[str(name)] = (kind, lr_name(str(key), index, len(optimizers)), lr)
    return held


def inner_loop_held(run: Run) -> set[str]:
    """The parameters an optimizer of INNER_LOOP holds (meta.json's optimizers): their change
    per recorded step is no single update's."""
    return {name for name, (kind, _, _) in _holders(run).items() if kind in INNER_LOOP}


def _lr(run: Run, scalar: str, lr: float, steps: pd.Index) -> tuple[pd.Series, float]:
    """The learning rate at `steps` (its `lr/` scalar carried forward, else the group's) and
    the largest the run used."""
    series = finite(run.scalar(scalar)) if len(run.scalars) else pd.Series(dtype=float)
    series = series[series > 0]
    if series.empty:
        return pd.Series(lr, index=steps), lr
    at = series.reindex(series.index.union(steps)).ffill().bfill().reindex(steps)
    return at, float(series.max())


def too_small_to_move(run: Run, ratio: pd.DataFrame, weight: pd.DataFrame) -> dict | None:
    """Where a run does not learn from where an untrained model starts (`starts_unlearned`)
    and every judged weight matrix's median reach per step, at the run's peak learning rate,
    is below TOO_SMALL: the reaches by name, the loss's fall, the optimizer types and the
    peak learning rates. None otherwise, or where any matrix
    cannot be judged (its optimizer unknown, or one whose lr means something else)."""
    fall = loss_fall(run)
    if fall is None or fall >= NOT_LEARNING or loss_grew(run) or not len(ratio.columns):
        return None
    if not starts_unlearned(run):
        return None  # a trained model has little left to fall, or the level is not known
    holders, numel = _holders(run), run.numel(WEIGHT)
    reach, kinds, peaks = {}, set(), {}
    for name in ratio.columns:
        if name not in holders:
            return None
        kind, scalar, lr = holders[name]
        at, peak = _lr(run, scalar, lr, ratio.index)
        if kind in NORMALIZED:
            size = _number(numel.get(name))
            if size is None:
                return None
            rms = weight[name].reindex(ratio.index) / math.sqrt(size)
            per_step = peak / rms.where(rms > 0)
        elif kind in PLAIN:
            per_step = ratio[name] * peak / at
        else:
            return None
        value = float(per_step.replace([np.inf, -np.inf], np.nan).median())
        if not math.isfinite(value) or value >= TOO_SMALL:
            return None
        reach[name], peaks[name] = value, peak
        kinds.add(kind)
    if not reach:
        return None
    return {"reach": reach, "fall": fall, "kinds": sorted(kinds), "peaks": peaks}



def steps_per_record(run: Run) -> list[tuple[set[str] | None, pd.Series]]:
    """How many optimizer steps each recorded step's update spans, where the recorded facts
    say: the recorder snapshots the weights at a recorded step's first `optimizer.step()`, so
    its `update` rows sum every step the loop takes before `Recorder.step()` (an inner loop:
    spinningup's 80 value-function steps per epoch, PPO's epochs of minibatches). Each entry
    is (the parameters it speaks for, None for all; the count per step, where 2 or more).
    The recorder counts each optimizer's `step()` calls (`optimizer/steps`,
    `optimizer/steps/<name>` with several). Traces without that count say it for the
    optimizer that holds the watched parameter on a step whose `backward/passes` (k of them,
    2 or more) each found its grad reset (`backward/resets` k - 1) and whose weights moved
    between them (`backward/weights_moved`): zero_grad, backward and step ran k times (a
    two-pass method, SAM, takes one step: k bounds the count from above; with one optimizer
    the passes are counted from its last step, so this says nothing there)."""
    sig = run.signals
    if not len(sig) or not {"name", "split", "step", "value"} <= set(sig.columns):
        return []
    optimizers = run.optimizers()
    held = {str(key): {str(n) for g in groups_of(summary) if isinstance(g.get("params"), list)
                       for n in g["params"]}
            for key, summary in optimizers.items()}
    names = {str(n) for n in sig["name"].unique()}
    counted = []
    for name in sorted(n for n in names if n == OPTIMIZER_STEPS
                       or n.startswith(OPTIMIZER_STEPS + "/")):
        key = name[len(OPTIMIZER_STEPS) + 1:]
        params = None if not key else held.get(key)
        if key and not params:
            continue  # an optimizer whose parameters are not named
        count = pd.to_numeric(run.signal(name), errors="coerce")
        count = count[count >= 2]
        if len(count):
            counted.append((params, count))
    if counted or any(n.startswith(OPTIMIZER_STEPS) for n in names) or len(optimizers) < 2:
        return counted
    passes = pd.to_numeric(run.signal(BACKWARD_PASSES), errors="coerce")
    resets = pd.to_numeric(run.signal(BACKWARD_RESETS), errors="coerce").reindex(passes.index)
    moved = pd.to_numeric(run.signal(BACKWARD_WEIGHTS_MOVED),
                          errors="coerce").reindex(passes.index)
    inner = passes[(passes >= 2) & (moved >= 1) & (resets >= passes - 1)]
    watched = watched_parameter(run.meta)
    owner = next((params for params in held.values() if watched in params), None)
    return [(owner, inner)] if len(inner) and owner else []


def per_update(run: Run, ratio: pd.DataFrame) -> pd.DataFrame:
    """`ratio` (recorded update / weight norms, steps by parameters) where a recorded step's
    update spans several optimizer steps (an inner loop before Recorder.step():
    `steps_per_record`) divided by how many it spans at most. That is a lower bound of one
    optimizer step's size, not the size itself: the count is an upper bound (a count inferred
    from backward passes; SAM's two passes take one step), and an inner loop's steps that
    partly cancel sum to less than their count times one step. What judges updates as too
    large reads this (a too-large inner step whose steps cancel can go unseen there); what
    judges them as too small keeps the recorded ratio: a step whose optimizer steps all
    together moved the weights that little moved them too little. Malformed facts: `ratio`."""
    per = ratio.copy()
    try:
        for held, count in steps_per_record(run):
            columns = [n for n in ratio.columns if held is None or n in held]
            if columns:
                count = count[~count.index.duplicated(keep="last")]
                divisor = count.reindex(ratio.index).where(lambda k: k >= 1).fillna(1.0)
                per[columns] = per[columns].div(divisor, axis=0)
    except (KeyError, TypeError, ValueError):  # malformed facts: the recorded ratio
        return ratio
    return per
