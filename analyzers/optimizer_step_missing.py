"""optimizer-step-missing: gradients are computed, yet no weight ever changes.

What it detects
    A run given an optimizer whose loss is recorded and whose gradients are non-zero, while no
    trainable parameter that optimizer holds changes over the recorded steps (every recorded
    update exactly 0, or every weight statistic the same from first to last); each optimizer
    is judged on its own (a GAN whose discriminator's step was left out). The cause is named
    from what the optimizer's step pre-hook saw:
    - it never ran (no `grad_norm/step`, no update recorded): `optimizer.step()` is never
      called, or called on another optimizer object than the one given to the Recorder;
    - it ran on grads of norm 0 or None while backward produced non-zero ones: `zero_grad()`
      runs between `backward()` and `step()`;
    - it ran on non-zero grads: every param group's learning rate is 0, or the step skips;
    - the optimizers hold parameters and none of them is the model's (meta.json's group
      `n_params` above 0, every parameter's `in_optimizer` false): each step moves another
      model object, one the optimizer was built on before the model was created again or
      copied (the step is called, on the wrong parameters).

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
    A run without an optimizer object (meta.json `optimizers: {}`) is not judged; nor is an
    optimizer whose step ran on no gradient at all (`grad_norm/step` 0) where no backward pass
    of its own gave one: its loss does not reach its parameters (a generator's samples
    detached in its own step), which frozen-parameters names; a step that
    an AMP GradScaler skips for Inf/NaN gradients is left to amp-overflow; a model whose
    parameters no optimizer holds is left to param-not-in-optimizer, unless the optimizers
    hold none of the model's parameters but others (the case above). Parameters frozen with
    `requires_grad=False` are not tracked.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import OUTCOME, fmt, weights_unchanged
from tracelab.analyzers._learning_rate import group_of
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import (AMP_SKIPPED, GRAD, GRAD_NORM_BACKWARD, GRAD_NORM_STEP,
                                  META_OPTIMIZERS, META_UNREGISTERED, TRAIN, UPDATE, WEIGHT,
                                  Needs)


def _steps_another_model(cause: Finding, _: Finding) -> bool:
    return cause.evidence.get("cause") == "other_model"


@rule(name="optimizer-step-missing", code="TL212",
      requires=(Needs.OPTIMIZERS, Needs.LOSS, Needs.WEIGHTS),
      plot=Plot.WEIGHT_CHANGE,
      links=(explains("frozen-parameters", "update-ratio", *OUTCOME,
                      why="weights that no optimizer step changes do not learn",
                      timing="overlap"),
             explains("missing-zero-grad",
                      why="optimizer.zero_grad() resets the gradients of the model the "
                          "optimizer holds, not of the one the loop trains, so these pile up",
                      timing="overlap", when=_steps_another_model)))
def optimizer_step_missing(run: Run, *, rtol: float = 1e-7,
                           min_steps: int = 5) -> list[Finding]:
    norms = run.stat(WEIGHT, "norm")
    if len(norms) < min_steps or run.loss().dropna().empty:
        return []
    if run.signal(AMP_SKIPPED).sum() > 0:  # amp-overflow names skipped steps
        return []
    optimizers = run.meta.get(META_OPTIMIZERS) or {}
    foreign = held_elsewhere(run)
    if foreign:
        found = _another_model(run, norms, foreign, len(optimizers), rtol)
        return [found] if found else []
    findings = []
    for key, held in _held(run, norms, optimizers).items():
        found = _judge(run, norms, key, held, len(optimizers), rtol)
        findings += [found] if found else []
    return findings


def held_elsewhere(run: Run) -> int:
    """How many parameters the optimizers given to the Recorder hold, where they hold some
    and none of them is the model's (every trainable parameter's `in_optimizer` false, no
    unregistered parameter of the loss's graph held either): they step another model object,
    one built (or copied) before the model the loop trains. 0 otherwise, and when the counts
    were not recorded."""
    optimizers = run.meta.get(META_OPTIMIZERS)
    info = run.parameters()
    if not isinstance(optimizers, dict) or not optimizers or not info:
        return 0
    counts = []
    for summary in optimizers.values():
        groups = (summary or {}).get("groups") if isinstance(summary, dict) else None
        if not isinstance(groups, list) or not groups:
            return 0
        for g in groups:
            n = g.get("n_params") if isinstance(g, dict) else None
            if not isinstance(n, int) or isinstance(n, bool) or g.get("params"):
                return 0
            counts.append(n)
    trainable = [p for p in info.values() if p.get("requires_grad", True)]
    graph = run.meta.get(META_UNREGISTERED)
    if not trainable or any(p.get("in_optimizer") is not False for p in trainable) or (
            isinstance(graph, list)
            and any(isinstance(p, dict) and p.get("in_optimizer") for p in graph)):
        return 0
    return sum(counts)


def _another_model(run: Run, norms: pd.DataFrame, foreign: int, count: int,
                   rtol: float) -> Finding | None:
    """The model's weights never changed, its gradients are non-zero, and the optimizers
    hold `foreign` parameters, none of them the model's."""
    info = run.parameters()
    held = [n for n in norms.columns if info.get(n, {}).get("requires_grad", True)]
    if not held or any(not weights_unchanged(run, n, rtol) for n in held):
        return None
    grads = run.stat(GRAD, "norm")
    cols = [n for n in held if n in grads.columns]
    peak = float(np.nanmax(grads[cols].to_numpy(dtype=float))) if cols else 0.0
    backward = run.signal(GRAD_NORM_BACKWARD).dropna()
    largest = max(peak if np.isfinite(peak) else 0.0,
                  float(backward.max()) if len(backward) else 0.0)
    if not largest > 0:
        return None
    steps = (int(norms.index[0]), int(norms.index[-1]))
    which = "the optimizer" if count == 1 else f"the {count} optimizers"
    return optimizer_step_missing.finding(
        ERROR, "optimizer" if count == 1 else "optimizers", steps,
        f"No weight of the model changed over {len(norms)} recorded steps ({steps[0]}-"
        f"{steps[1]}) although the loss was computed and the grads' largest norm was "
        f"{fmt(largest)}: {which} given to the Recorder hold{'s' if count == 1 else ''} "
        f"{foreign} parameters and none of them is the model's, so each step moves another "
        "model object (the model built again, or copied, after the optimizer was built on the "
        "first one).",
        {"cause": "other_model", "steps": len(norms), "parameters": len(held),
         "held_elsewhere": foreign, "grad_norm_max": largest},
        "Build the optimizer from the model the loop trains, after its last re-creation or "
        "copy (optimizer = Adam(model.parameters()) after model = Net(...)), and give the "
        "Recorder that model and that optimizer.")


def _held(run: Run, norms: pd.DataFrame, optimizers: dict) -> dict[str, list[str]]:
    """Each optimizer's trainable parameters with recorded weights (a single optimizer without
    parameter names: every parameter some optimizer holds)."""
    info = run.parameters()
    trainable = [n for n in norms.columns if info.get(n, {}).get("requires_grad", True)]
    held = {}
    for key, summary in optimizers.items():
        groups = (summary or {}).get("groups") or []
        if groups and all("params" in g for g in groups):
            names = {p for g in groups for p in g["params"]}
            held[key] = [n for n in trainable if n in names]
        elif len(optimizers) == 1:
            held[key] = [n for n in trainable if info.get(n, {}).get("in_optimizer") is not False]
    return {k: v for k, v in held.items() if v}


def _judge(run: Run, norms: pd.DataFrame, key: str, held: list[str], count: int,
           rtol: float) -> Finding | None:
    upd = run.stat(UPDATE, "norm")
    if any(not weights_unchanged(run, n, rtol) for n in held):
        return None
    grads = run.stat(GRAD, "norm")
    cols = [n for n in held if n in grads.columns]
    peak = float(np.nanmax(grads[cols].to_numpy(dtype=float))) if cols else 0.0
    peak = peak if np.isfinite(peak) else 0.0
    backward = run.signal(GRAD_NORM_BACKWARD).dropna() if count == 1 else pd.Series(dtype=float)
    if not (peak > 0 or (backward > 0).any()):
        return None  # no gradient reached the weights: vanishing-gradients, frozen-parameters
    used = run.signal(GRAD_NORM_STEP if count == 1 else f"{GRAD_NORM_STEP}/{key}").dropna()
    if len(used) and not (used > 0).any() and not (backward > 0).any():
        # Its step ran, on no gradient, and no pass of its own left one: its loss does not
        # reach its parameters (a detach() on their path), which frozen-parameters names.
        return None
    # the step pre-hook records the grads' norm, and with one optimizer the update snapshot
    ran = not used.empty or (count == 1 and not upd.dropna(how="all").empty)
    steps = (int(norms.index[0]), int(norms.index[-1]))
    largest = max(peak, float(backward.max()) if len(backward) else 0.0)
    which = "the optimizer" if count == 1 else f"optimizer '{key}'"
    call = "optimizer.step()" if count == 1 else f"the step() of optimizer '{key}'"
    if not ran:
        cause, kind = (f"{which}'s step pre-hook never ran: {call} is never called, or "
                       "another optimizer is stepped in its place (or an AMP GradScaler not "
                       "given to the Recorder skipped every step)"), "not_called"
        fix = (f"Call {call} after loss.backward() on every step (or every accumulation "
               "cycle), on the optimizer that holds these parameters.")
    elif not (used > 0).any() and (backward > 0).any():
        cause, kind = (f"{which} stepped on gradients that were zero or None while backward "
                       "produced non-zero ones: zero_grad() runs between backward() and "
                       "step()"), "zeroed_before_step"
        fix = ("Call optimizer.zero_grad() before loss.backward() (or right after "
               "optimizer.step()), never between backward() and step().")
    elif _all_zero_lr(run, key):
        cause, kind = f"every param group of {which} has learning rate 0", "zero_lr"
        fix = "Set a non-zero learning rate, and check the schedule's factor at every step."
    else:
        cause, kind = (f"{which} stepped on non-zero gradients and still changed nothing (a "
                       "step that skips, or an update that is undone)"), "no_change"
        fix = ("Check what the optimizer's step does with these parameters (a wrapper or a "
               "closure that skips the update, weights restored after the step).")
    return optimizer_step_missing.finding(
        ERROR, "optimizer" if count == 1 else f"optimizer '{key}'", steps,
        f"No weight {which} holds changed over {len(norms)} recorded steps "
        f"({steps[0]}-{steps[1]}) although the loss was computed and the grads' largest norm "
        f"was {fmt(largest)}: {cause}.",
        {"cause": kind, "steps": len(norms), "parameters": len(held), "grad_norm_max": largest,
         "step_norms_recorded": int(len(used)), **({"optimizer": key} if count > 1 else {})},
        fix)


def _all_zero_lr(run: Run, key: str) -> bool:
    sc = run.scalars
    if not len(sc):
        return False
    optimizers = run.meta.get(META_OPTIMIZERS)
    rows = sc[sc["split"] == TRAIN]
    mine = rows["name"].map(lambda n: (group_of(n, optimizers) or (None,))[0] == key)
    rows = rows[mine.astype(bool)]
    return len(rows) > 0 and bool((rows["value"].astype(float) == 0).all())
