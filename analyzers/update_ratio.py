"""update-ratio: parameter updates far too large or far too small against the weights.

What it detects
    For each weight matrix or kernel, the ratio ||update|| / ||weight|| per step, where the
    update is the change the optimizer applied. A healthy ratio is around 1e-3 (1e-4 to 1e-2 is
    common). Layers whose median ratio exceeds `high` are flagged as learning too fast; layers
    whose ratio stays below `low` even at its 90th percentile are flagged as barely learning.
    Layers that never change are left to frozen-parameters. In a run whose loss does not fall
    (less than 3 % below its start), it also names updates the learning rate keeps too small
    to move the model: every weight matrix's reach per step at the run's largest learning
    rate below 10^-3.5 (analyzers/_slow_updates.py): lr / rms(w) for Adam and the optimizers
    that normalize by the gradients' root mean square (their per-element step is about lr),
    the recorded ratio (lr * grad / w) for SGD.

Why it matters
    The update ratio is the most direct reading of the effective learning rate per layer. Far
    above 1e-3, each step rewrites a large part of the weights and training is unstable; far
    below, the layer effectively does not train within the run's budget.

Example
    Every layer's median update ratio is 2e-07 (SGD with lr=1e-6): the learning rate is about
    a thousand times too low.

How to fix
    Scale the learning rate by the ratio's distance from 1e-3 (or run an LR range test), and
    use warm-up for the first steps; for a single outlying layer, give it its own param group.

False positives
    The first steps of Adam-type optimizers and of warm-up schedules are uneven, hence the
    median. A recorded step's update sums every optimizer step the loop took before
    Recorder.step() (an inner loop: a critic's 80 steps per epoch, PPO's minibatch epochs):
    where the recorder counted them (`optimizer/steps`; in older traces with several
    optimizers, the watched parameter's backward passes, each after a reset and a move of the
    weights), the high side judges one update, the recorded ratio divided by that count
    (`per_update`): a lower bound of one step's size, since inner steps that partly cancel
    sum to less, so a too-large inner step can go unseen here (learning-rate-too-high reads
    the same bound together with the loss's and the gradients' votes).
    Parameters held by LBFGS are not judged: one of its steps runs a whole inner
    loop of iterations with a line search, so its change per step is no single update's.
    Large updates are named only where the loss does not show that they work: a
    run whose training loss ends `min_fall` (a tenth) or more below where it started (its
    first value, before any update acted, or its first steps' median, whichever is lower)
    and never grew learns at that step size (a large SGD learning rate held in check by
    gradient clipping, as in the PyTorch transformer tutorial's lr 5.0), and stays quiet on
    that side; without 30 finite losses the ratio alone is judged; a converged run's updates shrink at the end, hence the 90th percentile for the
    low side, read over the recordings where the layer moved at all: an update of exactly zero
    is no small step but none (a float32 weight moves for any step above 6e-8 of it), as when
    its units died after its first steps or it was frozen mid-run (dead-units and
    frozen-parameters say why). Biases and normalization scales are not judged. The reach per step is judged
    only in a run whose loss does not fall (a fine-tuning run with a small learning rate
    whose loss falls is healthy), at the largest learning rate the run used (a schedule's
    late, small steps say nothing of it), and never for LBFGS, Adadelta or Rprop, whose lr
    means something else. Its fix presumes that an optimizer's learning rate moves these
    weights: where no optimizer holds any of the model's trained parameters (meta.json's
    optimizers), the diagnosis ranks below every one the recorded facts do not contradict.
    Softmax rows given to a loss that expects logits starve the gradients and make updates
    tiny too: for a classification loss (or an unknown one) recorded without what enters it,
    the diagnosis says to pass step(outputs=logits).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import (OUTCOME, edge_len, finite, fmt, matrix_params,
                                          name_list, subject_of)
from tracelab.analyzers._learning_rate import (LR_KNOWN, LR_MOVES_THE_MODEL, loss_grew, lr_fix,
                                               lr_known)
from tracelab.analyzers._loss_contracts import BCE_LOGITS, CROSS_ENTROPY, NLL, loss_type
from tracelab.analyzers._slow_updates import (MIN_LOSSES, NORMALIZED, inner_loop_held,
                                              per_update, too_small_to_move)
from tracelab.core import causes
from tracelab.core.causes import HOLDS, Premise, Verdict, explains, unknown
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import UPDATE, WEIGHT, Needs


def _low_side(cause: Finding, effect: Finding) -> bool:
    return causes.update_side(cause) == "low"


def _loss_reads_what_it_expects(run: Run, finding: Finding) -> Verdict:
    kind = loss_type(run)
    if (kind is not None and kind not in CROSS_ENTROPY | NLL | BCE_LOGITS) \
            or Needs.OUTPUTS in run.available:  # loss-input-contract judges what was recorded
        return HOLDS
    return unknown("what enters the loss (softmax rows given to a loss that expects logits "
                   "also make the updates tiny)", "pass step(outputs=logits) to record it")


# Tiny updates call for a larger learning rate only when the gradients are not starved by
# probabilities given to a loss that expects logits.
LOSS_READS_LOGITS = Premise("the loss reads the logits or log-probabilities it expects",
                            _loss_reads_what_it_expects,
                            when=lambda f: causes.update_side(f) == "low")


@rule(name="update-ratio", code="TL206", requires=(Needs.UPDATES, Needs.WEIGHTS),
      plot=Plot.UPDATE_RATIOS,
      links=(explains("frozen-parameters", *OUTCOME,
                      why="updates far below 1e-3 of the weights leave the model where it started",
                      timing="overlap", when=_low_side),),
      presumes=(LR_MOVES_THE_MODEL, LOSS_READS_LOGITS))
def update_ratio(run: Run, *, high: float = 0.1, low: float = 1e-5,
                 min_steps: int = 5, min_fall: float = 0.1) -> list[Finding]:
    upd, w = run.stat(UPDATE, "norm"), run.stat(WEIGHT, "norm")
    inner = inner_loop_held(run)  # an LBFGS step is a whole inner optimization: not judged
    names = matrix_params(run, [n for n in upd.columns if n in w.columns and n not in inner])
    if len(upd) < min_steps or not names:
        return []
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = (upd[names] / w[names].reindex(upd.index)).replace([np.inf, -np.inf], np.nan)
    moving = [n for n in names if (ratio[n].dropna() > 0).any()]
    if not moving:
        return []
    ratio = ratio[moving]
    median, upper = per_update(run, ratio).median(), _steps_taken(ratio).quantile(0.9)
    steps = (int(upd.index[0]), int(upd.index[-1]))
    findings = []
    for side, layers in (("high", median[median > high]), ("low", upper[upper < low])):
        if layers.empty or (side == "high" and _steps_pay_off(run, min_fall)):
            continue
        worst = str(layers.idxmax() if side == "high" else layers.idxmin())
        flagged = list(layers.index)
        which = f"all {len(flagged)} layers" if len(flagged) == len(moving) else \
            f"{len(flagged)} of {len(moving)} layers ({name_list(flagged)})"
        if side == "high":
            text = (f"Updates are too large in {which}: '{worst}' changes by "
                    f"{fmt(layers[worst])} of its norm per step (median), "
                    f"{fmt(layers[worst] / 1e-3)}x the usual 1e-3.")
            fix = lr_fix(run, "Lower the learning rate until the ratio nears 1e-3, or add "
                         "warm-up; give an outlying layer its own param group.")
        else:
            text = (f"Updates are too small in {which}: '{worst}' changes by at most "
                    f"{fmt(layers[worst])} of its norm per step (90th percentile), "
                    f"{fmt(1e-3 / max(layers[worst], 1e-30))}x below the usual 1e-3.")
            fix = lr_fix(run, "Raise the learning rate of these layers; an LR range test "
                         "finds a good one.")
        findings.append(update_ratio.finding(
            WARNING, subject_of(flagged), steps, text,
            {"layers": len(flagged), "of_layers": len(moving),
             "worst_ratio": float(layers[worst]), "median_ratio_all": float(median.median()),
             LR_KNOWN: lr_known(run)},
            fix))
    if not any(causes.update_side(f) == "low" for f in findings):
        findings += _too_small_to_move(run, ratio, w, steps)
    return findings


def _steps_taken(ratio: pd.DataFrame) -> pd.DataFrame:
    """`ratio` without the recordings where its layer did not move at all (an update of
    exactly zero): no learning rate, however small, leaves every weight of a layer where it
    was while its gradient is not zero (a float32 weight moves for any step above 6e-8 of it),
    so a layer that stopped there -- its units died, its gradient was cut, its optimizer did
    not step -- took no step, not a small one, and dead-units, frozen-parameters or
    optimizer-step-missing say why. A layer that never moved is frozen-parameters' alone."""
    return ratio.where(ratio != 0)


def _steps_pay_off(run: Run, min_fall: float) -> bool:
    """Whether the training loss shows that the large steps work: it ends (the median of its
    last steps) `min_fall` or more below where it started -- the lower of its first recorded
    value, taken before any update acted, and the median of its first steps, so that a loss
    that jumps at the first large update and falls back only to its start is not counted --
    and it never grew nor turned non-finite (`loss_grew`). False with fewer than MIN_LOSSES
    finite losses, or a start that is not positive (a loss that can go negative has no
    relative fall): the ratio alone is judged then."""
    values = finite(run.loss()).to_numpy(dtype=float)
    if len(values) < MIN_LOSSES or loss_grew(run):
        return False
    k = edge_len(len(values))
    start = min(float(values[0]), float(np.median(values[:k])))
    end = float(np.median(values[-k:]))
    return start > 0 and (start - end) / start >= min_fall


def _too_small_to_move(run: Run, ratio, weight, steps: tuple[int, int]) -> list[Finding]:
    """Updates that the optimizer's learning rate keeps too small to move the model, in a run
    whose loss does not fall (analyzers/_slow_updates.py)."""
    try:
        slow = too_small_to_move(run, ratio, weight)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):  # malformed facts: not judged
        return []
    if slow is None:
        return []
    reach = pd.Series(slow["reach"])
    worst = str(reach.idxmax())
    kinds = "/".join(slow["kinds"])
    how = ("lr / rms(w): its per-element step is about the learning rate"
           if set(slow["kinds"]) <= NORMALIZED else "lr * |grad| / |w|")
    text = (f"Updates are too small to move the model: with {kinds} at learning rate "
            f"{fmt(slow['peaks'][worst])} (the run's largest), a step moves none of the "
            f"{len(reach)} weight matrices by more than {fmt(reach[worst])} of its typical "
            f"weight ('{worst}' the most; {how}), {fmt(1e-3 / reach[worst])}x below the usual "
            f"1e-3, and the loss fell {fmt(100 * slow['fall'])} % over the run.")
    fix = lr_fix(run, "Raise the learning rate until the update ratio nears 1e-3 (about "
                 f"{fmt(1e-3 / reach[worst])}x here); an LR range test finds a good one.")
    return [update_ratio.finding(
        WARNING, subject_of(list(reach.index)), steps, text,
        {"layers": len(reach), "of_layers": len(reach), "worst_ratio": float(reach[worst]),
         "reach_per_step": {k: float(v) for k, v in reach.items()},
         "loss_fall": float(slow["fall"]), "optimizers": slow["kinds"],
         LR_KNOWN: lr_known(run)},
        fix)]
