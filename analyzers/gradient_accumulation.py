"""gradient-accumulation: gradient accumulation undone by zero_grad() between its backward passes.

What it detects
    The recorder counts each step's backward passes that reached the model (`backward/passes`,
    from the optimizer's step or `Recorder.step()`, whichever came last) and the passes after
    the first that found the watched parameter's grad reset although an earlier pass of the
    step had added to it (`backward/resets`: None, or zero). The rule fires when at least
    `min_steps` steps, and at least `min_share` of the steps, took several backward passes and
    the grads were reset between them on at least `min_share` of those steps: `zero_grad()`
    runs inside the accumulation loop, so each optimizer step applies the last micro-batch's
    gradient only. Steps whose weights moved between their passes (`backward/weights_moved`:
    the watched parameter's value at a later pass differed from the first's) are not
    accumulation and are not judged. With 3 or more passes a step the finding is an ERROR; with
    exactly 2 a WARNING, since a two-pass method reads the same (False positives).

    The loop's other inversion, `optimizer.step()` inside the accumulation loop and
    `zero_grad()` after it: the run's config declares an accumulation count k >= 2
    (`gradient_accumulation_steps`, `accumulation_steps`, `grad_accum`...), yet the optimizer
    stepped after every backward pass (`backward/passes` 1 on at least `min_share` of the
    steps) and found the grads of the passes before still in `.grad` (`grad_leftover` above 0
    on at least `min_share` of them): each micro-batch takes a step with the running sum of the
    grads so far, k steps per intended one.

    The other fault of the same loop, micro-batch losses not divided by the accumulation count
    k, cannot be seen in what is recorded: the sum of k mean-reduced gradients applied at a
    learning rate lr is exactly the update of their mean at k * lr (and Adam-type optimizers
    cancel the factor altogether), so the grads' scale, the update sizes and the loss curve
    match a run whose learning rate was chosen k times larger. The loss recorded at `step()`
    is whatever the loop handed the recorder (divided or not), not what entered `backward()`.
    Telling them apart would take the gradient that reached the model's output, compared with
    the derivative of the recorded `loss_fn` and its reduction; that is not recorded. On such
    a run this rule stays quiet; the learning-rate rules judge the steps it takes.

Why it matters
    Accumulating k micro-batches is meant to train as one batch k times larger. With the grads
    reset before each micro-batch, k - 1 of every k micro-batches are computed and thrown
    away: each step follows one small batch's noisy gradient, and when each loss was divided
    by k, at a k-times smaller step, so training is slower and noisier than the loop intends.

Example
    On 98 of 100 steps that took 4 backward passes each, the grads were reset before 3 of
    them: zero_grad() runs between the micro-batches, and each optimizer step used the last
    micro-batch's gradient only.

How to fix
    Call `optimizer.zero_grad()` once per optimizer step, right after `optimizer.step()` (or
    before the first micro-batch of each step), never between the micro-batches' `backward()`
    calls; divide each micro-batch's loss by the number of micro-batches.

False positives
    Correct accumulation (zero_grad after the step, each loss divided by k) and ordinary
    one-pass training read no resets. A loop that now and then skips a batch after its backward
    (no optimizer step: a spike check, an exception caught) gives the next step two passes with
    a reset between them; such steps are a minority and are not judged. Runs with several
    optimizers are not judged: a GAN's generator pass reaches the discriminator, whose grads its
    own `zero_grad()` may reset between passes of one step on purpose. Grads assembled by hand
    from several passes (gradient surgery: each task's backward read and reset, their
    combination written into `.grad`) reset on purpose too; when the recorded grads the
    optimizer used (`grad_norm/step`) are larger than those of the last backward pass
    (`grad_norm/backward`) on most steps where both were recorded, they were written after
    backward and the rule is quiet. A watched parameter whose gradient is exactly zero in every
    pass reads as never added to, and is not judged.
    Two-pass methods take two backward passes with `zero_grad()` between them by design.
    Sharpness-aware minimization (SAM: backward, perturb the weights, zero_grad, backward
    again, restore, step) moves every weight between its passes, which the recorder notes;
    those steps are not judged. Adversarial training (FGSM, PGD: a backward for the input's
    gradient, zero_grad, a backward on the perturbed batch) leaves the weights where they were,
    and whether the two passes saw the same batch is not recorded, so it cannot be told apart
    from a 2-micro-batch accumulation with zero_grad inside; nor can SAM in a trace recorded
    before the weights' movement was. The finding is then a WARNING that names them; with 3
    or more passes a step (a two-pass method has exactly 2) it stays an ERROR.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import OUTCOME
from tracelab.core import causes
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import (BACKWARD_PASSES, BACKWARD_RESETS, BACKWARD_WEIGHTS_MOVED,
                                  GRAD_LEFTOVER, GRAD_NORM_BACKWARD, GRAD_NORM_STEP, Needs)

# A config key that declares how many micro-batches one optimizer step accumulates.
_ACCUM_KEY = re.compile(r"^(grad(ient)?_)?accum(ulat(e|ion))?(_steps|_iters|_batches)?$")


@rule(name="gradient-accumulation", code="TL613", requires=(Needs.GRAD_RESETS,),
      plot=Plot.NONE,
      links=(explains("loss-oscillation", "loss-spike", "missing-zero-grad", *OUTCOME,
                      why="each optimizer step applies one micro-batch's gradient, the other "
                          "micro-batches' reset before it",
                      timing="overlap", when=causes.not_input),))
def gradient_accumulation(run: Run, *, min_share: float = 0.5,
                          min_steps: int = 5) -> list[Finding]:
    if len(run.optimizers()) > 1:
        return []
    passes = run.signal(BACKWARD_PASSES)
    resets = run.signal(BACKWARD_RESETS).reindex(passes.index)
    moved = run.signal(BACKWARD_WEIGHTS_MOVED).reindex(passes.index)
    # Weights that moved between a step's passes: a two-pass optimizer (SAM), not accumulation.
    still = ~(moved.to_numpy(dtype=float) >= 1)
    several = passes.index[(passes >= 2).to_numpy() & still]
    # Accumulation is the loop's rule: most steps take several passes. A step that follows a
    # batch skipped after its backward (no optimizer step) takes two passes now and then.
    if len(several) < min_steps or len(several) < min_share * len(passes):
        return _stepped_inside(run, passes, min_share=min_share, min_steps=min_steps)
    reset = resets.loc[several].to_numpy(dtype=float) >= 1
    share = float(np.mean(reset))
    if share < min_share or _written_after_backward(run):
        return []
    steps = several[reset]
    k = float(np.median(passes.loc[steps]))
    lost = float(np.median(resets.loc[steps]))
    message = (f"On {int(reset.sum())} of {len(several)} steps that took several backward "
               f"passes (median {k:g}), the grads were reset between them (median {lost:g} "
               "resets a step): zero_grad() runs inside the accumulation loop, so each "
               "optimizer step applies the last micro-batch's gradient only.")
    known = bool(moved.loc[steps].notna().all())
    if k < 3:  # a two-pass method takes exactly 2, its zero_grad between them on purpose
        methods = ("adversarial training (FGSM, PGD: a backward for the input's gradient, "
                   "zero_grad, a backward on the perturbed batch)")
        if not known:
            methods = ("sharpness-aware minimization (SAM; this trace does not record whether "
                       "the weights moved between the passes) or " + methods)
        message += (f" Unless this is a two-pass method by design: {methods}, whose two passes "
                    "read the same; the recorded facts do not tell them apart.")
    return [gradient_accumulation.finding(
        ERROR if k >= 3 else WARNING, "optimizer", (int(steps[0]), int(steps[-1])),
        message,
        {"steps_reset": int(reset.sum()), "steps_accumulating": len(several), "share": share,
         "median_passes": k, "median_resets": lost,
         "steps_weights_moved": int((moved >= 1).sum()), "weights_moved_recorded": known},
        "Call optimizer.zero_grad() once per optimizer step, right after optimizer.step(), "
        "not between the micro-batches' backward() calls; divide each micro-batch's loss by "
        "the number of micro-batches.")]


def _declared_accumulation(config) -> int | None:
    """The accumulation count the run's config declares (2 or more), else None."""
    if not isinstance(config, dict):
        return None
    for key, value in config.items():
        if _ACCUM_KEY.match(str(key).lower()) and isinstance(value, (int, float)) \
                and not isinstance(value, bool) and np.isfinite(value) and value >= 2:
            return int(value)
    return None


def _stepped_inside(run: Run, passes: pd.Series, *, min_share: float,
                    min_steps: int) -> list[Finding]:
    """optimizer.step() inside a declared accumulation loop, zero_grad() after it: one pass
    per optimizer step, each finding the earlier passes' grads still in .grad."""
    k = _declared_accumulation(run.meta.get("config"))
    if k is None or len(passes) < min_steps:
        return []
    single = passes.index[(passes == 1).to_numpy()]
    if len(single) < min_share * len(passes):
        return []
    left = run.signal(GRAD_LEFTOVER).reindex(single).dropna()
    if len(left) < min_steps:
        return []
    kept = left.index[(left > 0).to_numpy()]
    if len(kept) < min_share * len(left):
        return []
    return [gradient_accumulation.finding(
        ERROR, "optimizer", (int(kept[0]), int(kept[-1])),
        f"The config declares {k} micro-batches per optimizer step, yet the optimizer stepped "
        f"after every backward pass (1 pass per step on {len(single)} of {len(passes)} steps) "
        f"and found the earlier passes' grads still in .grad on {len(kept)} of {len(left)}: "
        "optimizer.step() runs inside the accumulation loop and zero_grad() after it, so each "
        f"micro-batch takes a step with the running sum of the grads, {k} steps per intended "
        "one.",
        {"declared_accumulation": k, "steps_single_pass": len(single),
         "steps_grads_left": len(kept), "steps_judged": len(left)},
        "Call optimizer.step() and optimizer.zero_grad() once per k micro-batches, after the "
        "last one's backward(), outside the micro-batch loop.")]


def _written_after_backward(run: Run) -> bool:
    """Whether the grads the optimizer used were larger than the last backward pass left them
    on most steps where both were recorded (beyond float rounding): written by hand after
    backward, from grads read between the passes. A clip only makes them smaller."""
    backward = run.signal(GRAD_NORM_BACKWARD)
    used = run.signal(GRAD_NORM_STEP).reindex(backward.index)
    both = pd.DataFrame({"backward": backward, "used": used}).dropna()
    both = both[np.isfinite(both).all(axis=1)]
    if not len(both):
        return False
    larger = both["used"] > both["backward"] * (1 + 1e-5)
    return bool(larger.mean() > 0.5)
