"""missing-zero-grad: gradients accumulate across optimizer steps.

What it detects
    The recorder watches one small parameter and notes, at the first backward pass after each
    optimizer step, whether its gradient was reset (`zero_grad()` sets it to None or zero) or
    still held the previous step's gradient. The rule fires when the gradient was left over on
    at least `min_share` of the observed steps (after the first), over at least `min_steps`.

Why it matters
    `backward()` adds to `.grad`; without `optimizer.zero_grad()` every step applies the sum of
    all gradients so far. The effective learning rate grows with the step count, the loss
    oscillates or spikes and the model trains on stale directions. Loss and gradient-norm
    curves look like an unstable learning rate, so the missing line goes unnoticed. The
    current batch is 1/t of the gradient applied at step t and nothing decays the sum, so the
    model may learn almost nothing and its outputs look unrelated to their inputs: where the
    reset was missing on nearly every step from the start, this explains target-problems'
    finding (a model that never beat the constant prediction).

Example
    On 119 of 119 steps the watched parameter's gradient still held the previous step's
    gradient (largest |grad| 0.42) when the next backward pass began.

How to fix
    Call `optimizer.zero_grad()` once per optimizer step, before `loss.backward()` (or right
    after `optimizer.step()`); with gradient accumulation, after each optimizer step.

False positives
    Legitimate gradient accumulation (several backward passes, then one optimizer step, then
    `zero_grad()`) stays quiet: only the first backward pass after an optimizer step is looked
    at, and accumulation resets the gradients before it. A run that zeroes only some
    parameters by hand, and not the watched one (the model's smallest), would be flagged; a
    parameter that gets no gradient reads as reset: where its recorded gradient norm was exactly
    0 around the step before (the units it feeds died), a zero found proves no reset and that
    step is left out of the count. Its fix presumes that zero_grad() would
    reset the watched parameter: when no optimizer holds it (meta.json's model.parameters
    `in_optimizer`), optimizer.zero_grad() never touches its gradient, the loop may well call
    it, and the diagnosis ranks below every one the facts do not contradict.
    With several optimizers (a GAN's generator and discriminator) a backward pass adds to the
    other player's grads by design (the generator's pass through the discriminator), so the
    recorder does not judge the first pass after any step: it notes whether the watched grad
    was reset anywhere between two steps of the optimizer that holds it, and the finding says
    which optimizer's zero_grad() is missing. Only that optimizer's parameters are watched: a
    reset left out of another optimizer's loop is not seen.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import OUTCOME, fmt
from tracelab.analyzers._learning_rate import (groups_of, held_parameters, watched_parameter,
                                               without_optimizer)
from tracelab.core import causes
from tracelab.core.causes import HOLDS, Premise, Verdict, contradicted, explains, unknown
from tracelab.core.findings import ERROR, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import GRAD, GRAD_LEFTOVER, Needs


def _zero_grad_resets_it(run: Run, finding: Finding) -> Verdict:
    if without_optimizer(run):  # the loop's own update is the step, its own reset the fix
        return HOLDS
    name = watched_parameter(run.meta)
    held = held_parameters(run)
    if name is None or held is None:
        return unknown("which parameters the optimizer holds (meta.json's model.parameters)",
                       "pass model= and optimizer= to the Recorder")
    if name not in held:
        return contradicted(f"the watched parameter '{name}' is in no optimizer, so "
                            "optimizer.zero_grad() never resets its gradient: the gradient "
                            "left over is that of a parameter no optimizer holds, not a sign "
                            "that the loop skips zero_grad()")
    return HOLDS


ZERO_GRAD_RESETS_IT = Premise("optimizer.zero_grad() resets the watched parameter's gradient",
                              _zero_grad_resets_it)


def _reset_missing_throughout(cause: Finding, effect: Finding, *,
                               min_share: float = 0.9, lead: float = 0.1) -> bool:
    """For `when`: a model that never beat the constant prediction (target-problems) is
    explained by the missing reset only if gradients piled up on nearly every step
    (`min_share` of those observed) from the effect's first tenth on: steps that did reset
    would have trained normally, so a run that learned nothing while resetting is not this
    cause's doing."""
    share = cause.evidence.get("share")
    if not isinstance(share, (int, float)) or share < min_share:
        return False
    if cause.steps is None or effect.steps is None:
        return False
    first, last = effect.steps
    return cause.steps[0] <= first + lead * max(last - first, 0) and cause.steps[1] >= (
        last - lead * max(last - first, 0))


@rule(name="missing-zero-grad", code="TL602", requires=(Needs.GRAD_RESETS,), plot=Plot.NONE,
      links=(explains("loss-oscillation", "loss-spike", "update-ratio", "dead-units",
                      "exploding-gradients", "nonfinite-values", "collapsed-outputs",
                      "saturated-activations", *OUTCOME,
                      why="gradients summed over every step so far make each update larger "
                          "than the last",
                      timing="overlap", when=causes.not_input),
             explains("target-problems",
                      why="without a reset each step applies the sum of every gradient so "
                          "far: the current batch is 1/t of it, and with nothing decaying "
                          "the sum (a momentum of 1) it carries the weights past the minimum "
                          "and back, so the model learns little from any batch and its "
                          "outputs look unrelated to their inputs",
                      timing="overlap", when=_reset_missing_throughout),),
      presumes=(ZERO_GRAD_RESETS_IT,))
def missing_zero_grad(run: Run, *, min_share: float = 0.5, min_steps: int = 5) -> list[Finding]:
    leftover = run.signal(GRAD_LEFTOVER).iloc[1:]  # the first backward pass has nothing before
    leftover = leftover[_informative(run, leftover)]
    values = leftover.to_numpy(dtype=float)
    if len(values) < min_steps:
        return []
    kept = values != 0  # NaN or Inf left over is left over too
    share = float(np.mean(kept))
    if share < min_share:
        return []
    steps = leftover.index[kept]
    finite = np.abs(values[kept])[np.isfinite(values[kept])]
    typical = float(np.median(finite)) if len(finite) else float("nan")
    return [missing_zero_grad.finding(
        ERROR, "optimizer", (int(steps[0]), int(steps[-1])),
        f"Gradients were not reset between optimizer steps on {int(kept.sum())} of "
        f"{len(values)} steps: "
        + ("no backward pass between two steps of the optimizer holding the watched parameter "
           "found its gradient reset" if len(run.optimizers()) > 1 else
           "the next backward pass found the previous step's gradient still in .grad")
        + f" (median largest |grad| {fmt(typical)}), so every step applies the sum of all "
        "gradients so far.",
        {"steps_not_reset": int(kept.sum()), "steps_observed": len(values), "share": share,
         "median_leftover": typical},
        HAND_WRITTEN_RESET if without_optimizer(run) else _owner_fix(run))]


def _informative(run: Run, leftover: pd.Series) -> np.ndarray:
    """Which steps' leftover can tell a reset from none: a zero found where the watched
    parameter's previous backward pass gave it no gradient at all (its recorded gradient norm
    exactly 0 at the recordings on both sides of the step before: every unit it feeds dead, a
    branch the batch skipped) is what a missing reset leaves as well, so it proves nothing.
    Steps with a nonzero leftover, and every step where that norm was not recorded, count."""
    keep = np.ones(len(leftover), dtype=bool)
    name = watched_parameter(run.meta)
    if name is None or not len(leftover):
        return keep
    try:
        norms = run.stat(GRAD, "norm")
        if name not in norms.columns:
            return keep
        norm = norms[name].astype(float)
        norm = norm[~norm.index.duplicated(keep="last")].dropna().sort_index()
    except (KeyError, TypeError, ValueError):
        return keep
    if not len(norm):
        return keep
    before = leftover.index.to_numpy(dtype=float) - 1  # the previous step's backward pass
    values = norm.to_numpy()
    at = norm.index.to_numpy(dtype=float)
    left = np.searchsorted(at, before, side="right") - 1  # last recording at or before
    right = np.searchsorted(at, before, side="left")  # first recording at or after
    known = (left >= 0) & (right < len(at))
    silent = np.zeros(len(leftover), dtype=bool)
    silent[known] = (values[left[known]] == 0) & (values[right[known]] == 0)
    return keep & ~(silent & (leftover.to_numpy(dtype=float) == 0))


def _owner_fix(run: Run) -> str:
    """The fix, naming the optimizer that holds the watched parameter where there are
    several (meta.json's optimizers' groups)."""
    fix = ("Call optimizer.zero_grad() once per optimizer step, before loss.backward() (with "
           "gradient accumulation: after each optimizer.step()).")
    optimizers = run.optimizers()
    name = watched_parameter(run.meta)
    owners = [key for key, summary in optimizers.items()
              if any(isinstance(g.get("params"), list) and name in g["params"]
                     for g in groups_of(summary))] if name is not None else []
    if len(optimizers) < 2 or len(owners) != 1:
        return fix
    return (f"Call the zero_grad() of optimizer '{owners[0]}' (it holds '{name}', whose "
            "gradient was left over from one of its steps to the next), or that model's zero_grad(), once "
            "per its step, before its loss.backward(): with several optimizers each one's "
            "step needs its own reset.")


HAND_WRITTEN_RESET = ("Reset every parameter's gradient after the loop's hand-written update, "
                      "once per step (p.grad = None, or p.grad.zero_()): no optimizer object "
                      "was recorded, so there is no zero_grad() to call.")
