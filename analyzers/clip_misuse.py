"""clip-misuse: a gradient clip that binds on every step far below the gradients, or that runs
after optimizer.step() and changes nothing.

What it detects
    Two contracts of `torch.nn.utils.clip_grad_norm_`, read from the grads' total norm at the
    end of backward (`grad_norm/backward`), in the optimizer's step pre-hook (`grad_norm/step`:
    the grads the optimizer used) and at `Recorder.step()` (the `grad` rows); under AMP the
    backward norm is divided by the GradScaler's scale (`amp/scale`, `Recorder(scaler=...)`):
    - too small: a binding clip leaves the total norm at exactly max_norm. When the norm the
      optimizer used sits at one value (within `rtol`) on at least `min_share` of the steps,
      below the unclipped norm each time, and the unclipped norm is at least `ratio` times
      that value (median), max_norm is far below every gradient: one optimizer only. From
      `note_ratio` (an order of magnitude) up to `ratio` the clip is noted at info level under
      an optimizer that steps along the gradient's length (SGD): every update is that many
      times shorter, which a tuned learning rate may offset, so the note names the cause only
      when the run shows the cost, a loss or metric that does not move (its link to
      loss-plateau / metric-stagnation makes the pair a warning diagnosis), and the recorded
      facts show the clip is why: its steps move the weights by less than TOO_SMALL (10^-3.5)
      of their norm (`update_ratio`: the recorded ||update|| / ||weight|| of the parameters
      the optimizer holds, on the clipped steps; without update rows, SGD's bound
      lr * max_norm / (1 - momentum) / ||weight||), while the same steps unclipped, `factor`
      times longer, would reach it. A loss flat beside clipped steps that do move the model
      (labels that carry nothing, dead units, a data bug) is not put on the clip.
    - after the step: the grads read at `step()` differ from those the optimizer used (one
      tensor, unless something changed it in between) on at least `min_clipped` steps, sit
      at one value (within `rtol`) on each of them, and never above it on any step (their
      norm is read on every step): a clip ran after `optimizer.step()`, on grads that were
      already applied. A clip that never binds changes nothing and cannot be seen.

Why it matters
    A max_norm a hundred times below the gradients turns every update into the same short
    step: plain SGD then trains with its learning rate divided by that factor, and the loss
    creeps. A clip after the step protects nothing: the optimizer applied the unclipped
    grads, so the spikes it was meant to stop get through.

Example
    The optimizer used a total grad norm of 0.001 on 118 of 120 steps while backward produced
    a median of 2.3 (2,300x): clip_grad_norm_(max_norm=0.001) binds on every step.

How to fix
    Set max_norm near the usual unclipped norm (its median, or a little above: 1.0 is common),
    so that only spikes are clipped; call clip_grad_norm_ between `loss.backward()` (after
    `scaler.unscale_(optimizer)` with AMP) and `optimizer.step()`.

False positives
    Clipping at a sane max_norm that binds on some steps only (transformer recipes at 1.0, the
    word-language-model example at 0.25) stays quiet: the clip must bind on nearly every step
    and sit `ratio` times below the median norm for a warning (`note_ratio` times for an info
    note, which a run that learns leaves a note, and which explains a flat loss only where
    its steps are too short to move the model). Adam-type optimizers divide by the gradients'
    running scale, which cancels most of a constant rescale: a too-small clip there is noted
    at info level. With several optimizers only the clip after the step is judged (the
    backward norm covers all of their grads together).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import OUTCOME, fmt
from tracelab.analyzers._learning_rate import groups_of
from tracelab.analyzers._slow_updates import TOO_SMALL
from tracelab.core import causes
from tracelab.core.causes import explains
from tracelab.core.findings import INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import (AMP_SCALE, GRAD, GRAD_NORM_BACKWARD, GRAD_NORM_STEP,
                                   OPTIMIZER_STEPS, UPDATE, WEIGHT, Needs)

# Optimizers that divide each step by a running scale of the gradients.
ADAPTIVE = ("Adam", "AdamW", "Adamax", "NAdam", "RAdam", "SparseAdam", "RMSprop", "Adagrad",
            "Adadelta", "Adafactor", "Lamb", "LAMB", "Lion")


def _kind_is(kind: str):
    return lambda cause, effect: cause.evidence.get("kind") == kind


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and np.isfinite(value) and value > 0 else None


def stalls(cause: Finding, _: Finding) -> bool:
    """For `when`: the clip is what keeps the model from moving. Its clipped steps move the
    weights by less than TOO_SMALL of their norm (the `update_ratio` its evidence holds), and
    the same steps unclipped, `factor` times longer, would reach TOO_SMALL: a flat loss beside
    steps that do move the model has another cause (labels that carry nothing, dead units),
    and one beside steps too short even unclipped has its learning rate to answer for."""
    ratio, factor = (_number(cause.evidence.get(k)) for k in ("update_ratio", "factor"))
    return ratio is not None and factor is not None and ratio < TOO_SMALL <= ratio * factor


@rule(name="clip-misuse", code="TL209", requires=(Needs.GRAD_NORMS,), plot=Plot.NONE,
      links=(explains("update-ratio", *OUTCOME,
                      why="a clip far below every gradient shrinks every update by the same "
                          "large factor",
                      timing="overlap",
                      when=lambda c, e: _kind_is("too_small")(c, e) and stalls(c, e)
                      and causes.low_updates(c, e)),
             explains("exploding-gradients", "loss-spike", "nonfinite-values",
                      why="a clip after optimizer.step() leaves the applied gradients unclipped",
                      timing="overlap", when=_kind_is("after_step"))))
def clip_misuse(run: Run, *, ratio: float = 100.0, note_ratio: float = 10.0,
                min_share: float = 0.9, rtol: float = 1e-3, min_steps: int = 5,
                min_clipped: int = 2) -> list[Finding]:
    backward = run.signal(GRAD_NORM_BACKWARD)
    scale = run.signal(AMP_SCALE)
    if len(scale):  # backward ran on the scaled loss; the optimizer sees unscaled grads
        during = scale.shift(1).fillna(scale)  # the scale is recorded after each step
        backward = backward / during.reindex(backward.index).ffill().bfill()
    optimizers = run.optimizers()
    findings = []
    if len(optimizers) <= 1:
        found = _too_small(run, backward, run.signal(GRAD_NORM_STEP), optimizers, ratio=ratio,
                           note_ratio=note_ratio, min_share=min_share, rtol=rtol,
                           min_steps=min_steps)
        findings += [found] if found else []
    names = list(optimizers) if len(optimizers) > 1 else [None]
    for name in names:
        used = run.signal(GRAD_NORM_STEP if name is None else f"{GRAD_NORM_STEP}/{name}")
        found = _after_step(run, used, _params(optimizers, name), name, rtol=rtol,
                            min_clipped=min_clipped)
        findings += [found] if found else []
    return findings


def _params(optimizers: dict, name) -> list[str] | None:
    """The tracked parameters an optimizer holds (None: all, when unknown)."""
    summary = optimizers.get(name) if name is not None else next(iter(optimizers.values()), None)
    groups = groups_of(summary)
    if not groups or any(not isinstance(g.get("params"), list) for g in groups):
        return None
    return [p for g in groups for p in g["params"]]


def _times(factor: float) -> str:
    return f"{factor:,.0f}x" if factor >= 100 else f"{fmt(factor)}x"


def _constant(values: np.ndarray, rtol: float) -> float | None:
    """The value every one of `values` sits at (within rtol of their median), if any."""
    if not len(values):
        return None
    level = float(np.median(values))
    return level if level > 0 and np.all(np.abs(values - level) <= rtol * level) else None


def _too_small(run: Run, backward: pd.Series, used: pd.Series, optimizers: dict, *,
               ratio: float, note_ratio: float, min_share: float, rtol: float,
               min_steps: int) -> Finding | None:
    both = pd.concat([backward.rename("b"), used.rename("s")], axis=1).dropna()
    both = both[np.isfinite(both.to_numpy()).all(axis=1) & (both["s"] > 0)]
    if len(both) < min_steps:
        return None
    bound = both[both["s"] < both["b"] * (1 - rtol)]
    level = _constant(bound["s"].to_numpy(dtype=float), rtol)
    if level is None or len(bound) < min_share * len(both):
        return None
    factor = float(np.median(bound["b"] / bound["s"]))
    kind = (next(iter(optimizers.values()), {}) or {}).get("type", "")
    adaptive = kind in ADAPTIVE
    # an Adam-type step barely depends on a constant rescale: only a far-off clip is noted
    if factor < (ratio if adaptive else note_ratio):
        return None
    steps = bound.index
    reach = None if adaptive else _reach(run, steps, optimizers, level)
    why = (f"{kind} divides by the gradients' running scale, which cancels most of this "
           "rescale, but every step now weighs the same whatever its gradient"
           if adaptive else
           f"every update is {_times(factor)} shorter than its gradient asks: the learning "
           "rate is in effect divided by as much" + (
               "" if factor >= ratio else
               " (a learning rate tuned with this clip may offset it; it matters where the "
               "loss crawls)"))
    return clip_misuse.finding(
        INFO if adaptive or factor < ratio else WARNING, "gradient clip",
        (int(steps[0]), int(steps[-1])),
        f"The gradient clip binds on {len(bound)} of {len(both)} steps far below the "
        f"gradients: the optimizer used a total grad norm of {fmt(level)} each time while "
        f"backward produced a median {fmt(float(bound['b'].median()))} ({_times(factor)}), so "
        f"max_norm is about {fmt(level)}; {why}.",
        {"kind": "too_small", "max_norm": level, "clipped_steps": len(bound),
         "steps_observed": len(both), "median_unclipped": float(bound["b"].median()),
         "factor": factor, "optimizer": kind,
         **({"update_ratio": reach} if reach is not None else {})},
        f"Set clip_grad_norm_'s max_norm near the usual unclipped norm (median "
        f"{fmt(float(both['b'].median()))}), so that only spikes are clipped.")


def _reach(run: Run, steps: pd.Index, optimizers: dict, max_norm: float) -> float | None:
    """How far the clipped steps moved the weights the optimizer holds: the median over
    `steps` of ||update|| / ||weight|| (all held parameters together, per optimizer step where
    one recorded step spans several). Where no update rows were recorded on those steps,
    plain SGD's bound, lr * max_norm / (1 - momentum) / ||weight||. None where neither is
    known."""
    params = _params(optimizers, None)
    upd, weight = run.stat(UPDATE, "norm"), run.stat(WEIGHT, "norm")
    cols = [c for c in weight.columns if params is None or c in params]
    if not cols:
        return None
    weight = weight[cols].astype(float)
    size = np.sqrt((weight ** 2).sum(axis=1, min_count=len(cols)))
    moved = [c for c in cols if c in upd.columns]
    if len(moved) == len(cols):
        count = pd.to_numeric(run.signal(OPTIMIZER_STEPS), errors="coerce")
        count = count.where(count >= 1).reindex(upd.index).fillna(1.0)
        step = np.sqrt((upd[cols].astype(float) ** 2).sum(axis=1, min_count=len(cols))) / count
        ratio = (step / size.reindex(step.index)).reindex(steps)
    else:
        summary = next(iter(optimizers.values()), {}) or {}
        groups = groups_of(summary)
        lrs = [_number(g.get("lr")) for g in groups]
        momentum = [g.get("momentum", 0.0) for g in groups]
        if summary.get("type") not in ("SGD", "ASGD") or not lrs or None in lrs or \
                not all(isinstance(m, (int, float)) and 0 <= m < 1 for m in momentum):
            return None
        reach = max(lr / (1 - m) for lr, m in zip(lrs, momentum)) * max_norm
        ratio = (reach / size).reindex(steps)
    ratio = ratio.replace([np.inf, -np.inf], np.nan).dropna()
    ratio = ratio[ratio > 0]
    return float(ratio.median()) if len(ratio) else None


def _after_step(run: Run, used: pd.Series, params: list[str] | None, name,
                *, rtol: float, min_clipped: int) -> Finding | None:
    norms = run.stat(GRAD, "norm")
    cols = [c for c in norms.columns if params is None or c in params]
    if used.empty or not cols:
        return None
    squares = norms[cols].astype(float) ** 2
    read = np.sqrt(squares[squares.notna().any(axis=1)].sum(axis=1, min_count=1)).dropna()
    both = pd.concat([used.rename("s"), read.rename("r")], axis=1).dropna()
    both = both[np.isfinite(both.to_numpy()).all(axis=1) & (both["s"] > 0)]
    # the optimizer's grads and those read after its step are one tensor unless something
    # changed the grads in between
    differ = both[np.abs(both["r"] - both["s"]) > rtol * both["s"]]
    if len(differ) < min_clipped:
        return None
    level = _constant(differ["r"].to_numpy(dtype=float), rtol)
    finite = read[np.isfinite(read.to_numpy(dtype=float))]
    if level is None or (finite > level * (1 + rtol)).any() or \
            (differ["r"] > differ["s"]).any():
        return None
    steps = differ.index
    which = "the optimizer" if name is None else f"optimizer '{name}'"
    return clip_misuse.finding(
        WARNING, "gradient clip", (int(steps[0]), int(steps[-1])),
        f"The gradients were clipped after optimizer.step(): on {len(differ)} of {len(both)} "
        f"steps {which} used grads of total norm {fmt(float(differ['s'].median()))} (median), "
        f"and afterwards they sat at {fmt(level)} each time, so the clip changed grads that "
        "had already been applied and stopped nothing.",
        {"kind": "after_step", "max_norm": level, "clipped_steps": len(differ),
         "steps_observed": len(both), "median_used": float(differ["s"].median()),
         **({"optimizer": name} if name is not None else {})},
        "Call clip_grad_norm_ between loss.backward() (after scaler.unscale_(optimizer) with "
        "AMP) and optimizer.step().")
