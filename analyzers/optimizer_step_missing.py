"""optimizer-step-missing: gradients are computed, yet no weight ever changes.

What it detects
    A run given an optimizer whose loss is recorded and whose gradients are non-zero, while no
    trainable parameter the optimizers hold changes over the recorded steps (every recorded
    update exactly 0, or every weight statistic the same from first to last). The cause is
    named from what the optimizer's step pre-hook saw:
    - it never ran (no `grad_norm/step`, no update recorded): `optimizer.step()` is never
      called, or called on another optimizer object than the one given to the Recorder;
    - it ran on grads of norm 0 or None while backward produced non-zero ones: `zero_grad()`
      runs between `backward()` and `step()`;
    - it ran on non-zero grads: every param group's learning rate is 0, or the step skips.

Why it matters
    The loss is computed and backpropagated on every step and nothing learns: the curves look
    like a plateau, and the cost of the run is spent for nothing.

Example
    Over 120 steps the grads' total norm was 0.3 to 2.1 at the end of backward, the
    optimizer's step pre-hook never ran, and no weight changed.

How to fix
    Call `optimizer.step()` after `loss.backward()` on every step (or every accumulation
    cycle), on the optimizer given to the Recorder; call `optimizer.zero_grad()` before
    `backward()` or after `step()`, never between them.

False positives
    A run without an optimizer object (meta.json `optimizers: {}`) is not judged; a step that
    an AMP GradScaler skips for Inf/NaN gradients is left to amp-overflow; a model whose
    parameters no optimizer holds is left to param-not-in-optimizer. Parameters frozen with
    `requires_grad=False` are not tracked.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import OUTCOME, fmt, param_info
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import (AMP_SKIPPED, GRAD, GRAD_NORM_BACKWARD, GRAD_NORM_STEP,
                                  LR_PREFIX, TRAIN, UPDATE, WEIGHT, Needs)


@rule(name="optimizer-step-missing", code="TL212",
      requires=(Needs.OPTIMIZERS, Needs.LOSS, Needs.WEIGHTS),
      plot=Plot.WEIGHT_CHANGE,
      links=(explains("frozen-parameters", "update-ratio", *OUTCOME,
                      why="weights that no optimizer step changes do not learn",
                      timing="overlap"),))
def optimizer_step_missing(run: Run, *, rtol: float = 1e-7,
                           min_steps: int = 5) -> list[Finding]:
    norms = run.stat(WEIGHT, "norm")
    info = param_info(run)
    held = [n for n in norms.columns
            if info.get(n, {}).get("requires_grad", True)
            and info.get(n, {}).get("in_optimizer") is not False]
    if len(norms) < min_steps or not held or run.loss().dropna().empty:
        return []
    if run.signal(AMP_SKIPPED).sum() > 0:  # amp-overflow names skipped steps
        return []
    upd = run.stat(UPDATE, "norm")
    if any(not _unchanged(run, upd, n, rtol) for n in held):
        return []
    grads = run.stat(GRAD, "norm")
    cols = [n for n in held if n in grads.columns]
    peak = float(np.nanmax(grads[cols].to_numpy(dtype=float))) if cols else 0.0
    backward = run.signal(GRAD_NORM_BACKWARD).dropna()
    if not (peak > 0 or (backward > 0).any()):
        return []  # no gradient reached the weights: vanishing-gradients and frozen-parameters
    used = _used_norms(run)
    ran = not used.empty or not upd.dropna(how="all").empty
    steps = (int(norms.index[0]), int(norms.index[-1]))
    largest = max(peak, float(backward.max()) if len(backward) else 0.0)
    seen = f"the grads' largest norm was {fmt(largest)}"
    if not ran:
        cause, kind = ("the optimizer's step pre-hook never ran: optimizer.step() is never "
                       "called, or is called on another optimizer than the one given to the "
                       "Recorder (or an AMP GradScaler not given to it skipped every step)"), \
            "not_called"
        fix = ("Call optimizer.step() after loss.backward() on every step (or every "
               "accumulation cycle), on the optimizer given to Recorder(optimizer=...).")
    elif not (used > 0).any() and (backward > 0).any():
        cause, kind = ("the optimizer stepped on gradients that were zero or None while "
                       "backward produced non-zero ones: zero_grad() runs between backward() "
                       "and step()"), "zeroed_before_step"
        fix = ("Call optimizer.zero_grad() before loss.backward() (or right after "
               "optimizer.step()), never between backward() and step().")
    elif _all_zero_lr(run):
        cause, kind = "every param group's learning rate is 0", "zero_lr"
        fix = "Set a non-zero learning rate, and check the schedule's factor at every step."
    else:
        cause, kind = ("the optimizer stepped on non-zero gradients and still changed nothing "
                       "(a step that skips, or an update that is undone)"), "no_change"
        fix = ("Check what the optimizer's step does with these parameters (a wrapper or a "
               "closure that skips the update, weights restored after the step).")
    return [optimizer_step_missing.finding(
        ERROR, "optimizer", steps,
        f"No weight changed over {len(norms)} recorded steps ({steps[0]}-{steps[1]}) although "
        f"the loss was computed and {seen}: {cause}.",
        {"cause": kind, "steps": len(norms), "parameters": len(held), "grad_norm_max": largest,
         "step_norms_recorded": int(len(used))},
        fix)]


def _unchanged(run: Run, upd, name: str, rtol: float) -> bool:
    if name in upd.columns and upd[name].notna().any():
        return bool((upd[name].dropna() == 0).all())
    for stat in ("norm", "mean", "min", "max"):
        col = run.stat(WEIGHT, stat)[name].dropna().to_numpy(dtype=float)
        if len(col) < 2 or np.any(np.abs(col - col[0]) > rtol * max(abs(col[0]), 1e-30)):
            return False
    return True


def _used_norms(run: Run):
    """The grads' total norms every optimizer's step pre-hook saw, over the steps."""
    sg = run.signals
    if not len(sg):
        return run.signal(GRAD_NORM_STEP)
    names = [n for n in sg["name"].astype(str).unique()
             if n == GRAD_NORM_STEP or n.startswith(GRAD_NORM_STEP + "/")]
    values = [run.signal(n).dropna() for n in names]
    return pd.concat(values) if values else run.signal(GRAD_NORM_STEP)


def _all_zero_lr(run: Run) -> bool:
    sc = run.scalars
    if not len(sc):
        return False
    rows = sc[(sc["split"] == TRAIN) & sc["name"].astype(str).str.startswith(LR_PREFIX)]
    return len(rows) > 0 and bool((rows["value"].astype(float) == 0).all())
