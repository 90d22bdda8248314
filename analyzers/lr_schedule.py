"""lr-schedule: the learning rate dies while the loss still falls, or a warm-up never ends.

What it detects
    From the learning rate of every step (`lr/*` scalars), for each param group:
    - died early: after its peak the LR ends at `drop` of that peak or less, and settles
      (below `floor` of the peak, or at the value it ends at: a schedule's final LR) for at
      least `min_dead_share` of the run, longer than its decay from a tenth of the peak took;
      and just before it first fell below half its peak the loss was still falling: its
      median fell from the first to the last third of that window (the later half of the
      high stretch, at least `min_steps`) by more than the loss's own step-to-step noise; and
      the LR was held at half its peak or more for fewer steps than it then stays down. An
      LR that fell before `min_steps` steps were trained and stays down for half the run is
      flagged as such, and so is one whose loss had learned nothing: the medians of that
      window and of the stretch the LR stays down both within `max_explained` of the loss of
      the best prediction that ignores the input (the entropy of the class shares, the
      targets' variance) or above it; a ReduceLROnPlateau, which cuts the LR because the
      loss stalled, is not judged so. This is the signature of an epoch scheduler (StepLR,
      MultiStepLR, ExponentialLR, a cosine sized in epochs) stepped after every batch, or of
      a schedule sized in optimizer steps stepped on every micro-batch under gradient
      accumulation (it runs out after 1/k of the run).
    - wrapped: a CosineAnnealingLR's LR falls to `drop` of its peak and rises back to half
      of it: the schedule anneals once over T_max steps, so it was stepped more than T_max
      times (per batch, with T_max in epochs); CosineAnnealingWarmRestarts is another class.
      Where no CosineAnnealingLR was recorded (a LambdaLR, or an LR set by hand), the LR's
      own shape: it fell from half its peak to below `floor` of the peak and climbed back to
      half of it, both through two or more levels in between (an annealing, not a jump).
    - never warmed up: the LR stays below `floor` of the group's configured LR (`initial_lr`,
      which a scheduler writes into the group; without a scheduler, the group's lr when the
      recorder saw it) on every step of the run, or it rose on every step of the run and
      ended at `warm_share` of it or less: a warm-up longer than the run, or a schedule that
      starts at 0 and never rises.

Why it matters
    An LR at a thousandth of its peak moves the weights a thousand times less: training stops
    while the loss still had far to go, and the run looks converged. A scheduler built for
    epochs and stepped per batch reaches its last decay after a few hundred steps.

Example
    lr/0 fell from 0.1 to 1e-05 (below 1e-3 of its peak) at step 91, with 85 % of the run
    left; the loss had fallen from 1.4 to 0.9 while the LR was high, then stayed at 0.9.

How to fix
    Step an epoch scheduler once per epoch (after the loop over batches), or give its sizes in
    batches (step_size, milestones or T_max times the batches per epoch); under gradient
    accumulation step the scheduler with the optimizer, not on every micro-batch; make a
    warm-up end within the run (warm-up steps a few percent of the total).

False positives
    Cosine or linear decay to ~0 at the end of a run is quiet: the LR is below a thousandth of
    its peak only in the last few percent of the steps, less than `min_dead_share`. A decay
    whose loss had already flattened while the LR was high is quiet (ReduceLROnPlateau cuts
    the LR only after the loss stops improving) unless that loss never left the constant
    prediction's level (a model stopped before it learned anything), and so is a slow decay (ExponentialLR per
    epoch) that takes longer to go from a tenth of the peak to the floor than the run spends
    below it. A step decay stepped per epoch holds its first LR (at half the peak or more) at
    least as long as its last (torchvision's StepLR 30/30/30 epochs to 1e-2 or 1e-3 of the
    peak, MultiStepLR at 50 % and 75 %, a short run that stops within its last stage), so a
    run whose LR stays high that long is quiet; an epoch scheduler stepped per batch shrinks
    every stage but the last. Warm-up from 0 is quiet
    once the LR rises past `floor` of its configured value, and a warm-up cut by the run's end
    past `warm_share` of it; cyclic schedules that restart (CosineAnnealingWarmRestarts) never
    stay below the floor and jump back up, and a recorded CyclicLR is left alone. A triangular
    cycle written by hand whose base LR is 0 would read as a cosine stepped past its end.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import MAD_TO_STD, OUTCOME, fmt, name_list
from tracelab.analyzers._learning_rate import group_of, groups_of
from tracelab.analyzers._loss_contracts import constant_loss
from tracelab.core import causes
from tracelab.core.causes import explains
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import LR_PREFIX, META_SCHEDULERS, TRAIN, Needs

CYCLIC = ("CosineAnnealingWarmRestarts", "CyclicLR")  # schedules that cycle by design
# Why an LR that settled early counts (`_died`).
FELL_WHILE_FALLING, UNTRAINED, UNLEARNED = "falling", "untrained", "unlearned"


@rule(name="lr-schedule", code="TL210", requires=(Needs.LEARNING_RATE, Needs.LOSS),
      plot=Plot.LEARNING_RATE,
      links=(explains("update-ratio", "optimizer-step-missing", *OUTCOME,
                      why="a learning rate near 0 leaves the weights where they are",
                      timing="overlap", when=causes.low_updates),))
def lr_schedule(run: Run, *, floor: float = 1e-3, drop: float = 0.1,
                min_dead_share: float = 0.2, min_steps: int = 10,
                warm_share: float = 0.5, max_explained: float = 0.05) -> list[Finding]:
    loss = run.loss().dropna()
    loss = loss[np.isfinite(loss.to_numpy(dtype=float))]
    # A plateau scheduler cuts the LR because the loss stopped improving: an LR it brought
    # down to nothing beside a loss that never learned is that loss's consequence.
    plateau = any(s.get("type") == "ReduceLROnPlateau" for s in _schedulers(run))
    bound = None if plateau else constant_loss(run)
    died, cold, cycles = [], [], []
    for name in _lr_names(run):
        lr = run.scalar(name).dropna()
        lr = lr[np.isfinite(lr.to_numpy(dtype=float))]
        if len(lr) < min_steps:
            continue
        found = _died(lr, loss, floor, drop, min_dead_share, min_steps, bound, max_explained)
        if found:
            died.append((name, *found))
            continue
        base = _configured(run, name)
        if base and base > 0 and (float(lr.max()) < floor * base
                                  or _still_warming(lr, base, warm_share)):
            cold.append((name, base, float(lr.max()), lr))
            continue
        wrapped = _wrapped(run, lr, drop, floor)
        if wrapped is not None:
            cycles.append((name, lr, wrapped))
    findings = []
    scheduler = _scheduler_types(run)
    if cycles:
        name, lr, (low_at, t_max) = cycles[0]
        findings.append(lr_schedule.finding(
            WARNING, name if len(cycles) == 1 else f"{name} (+{len(cycles) - 1} more)",
            (int(lr.index[0]), int(lr.index[-1])),
            "The cosine schedule ran past its end and started again: "
            f"{name_list([c[0] for c in cycles])} reached its floor at step {low_at} and "
            f"rose back to half its peak or more, so "
            + (f"CosineAnnealingLR (T_max {t_max})" if t_max is not None else
               "an annealing to 0 (CosineAnnealingLR or the like)")
            + " was stepped more than T_max times (after every batch with T_max counted in "
            "epochs, or for more epochs than T_max).",
            {"kind": "wrapped", "groups": len(cycles), "low_step": low_at, "t_max": t_max},
            "Step the scheduler once per epoch, or set T_max to the number of times it is "
            "stepped (epochs times batches per epoch when stepped per batch)."))
    if died:
        name, lr, peak, dead_at, level, high_from, high_to, why = \
            max(died, key=lambda d: -d[3])
        untrained = why == UNTRAINED
        left = float(np.mean(lr.index >= dead_at))
        loss_text = (f"it fell before {min_steps} steps were trained, and the loss went from "
                     f"{fmt(high_from)} to {fmt(high_to)} over the run" if untrained else
                     f"the loss never left {fmt(bound)}, the loss of the best prediction that "
                     f"ignores the input: {fmt(high_from)} just before the LR fell, "
                     f"{fmt(high_to)} over the steps it stayed down, so training stopped "
                     "before the model learned anything" if why == UNLEARNED else
                     f"just before it fell the loss was still falling, from {fmt(high_from)} "
                     f"to {fmt(high_to)}{_after(loss, dead_at)}")
        findings.append(lr_schedule.finding(
            WARNING, name if len(died) == 1 else f"{name} (+{len(died) - 1} more)",
            (dead_at, int(lr.index[-1])),
            "The learning rate fell to a fraction of its peak and stayed there: "
            f"{name_list([d[0] for d in died])} "
            f"fell from its peak {fmt(peak)} to {fmt(level)} ({fmt(level / peak)} of it) by "
            f"step {dead_at} and stayed there for the last {left:.0%} of the run; "
            f"{loss_text}."
            + (f" Scheduler: {scheduler}." if scheduler else ""),
            {"kind": "died", "groups": len(died), "peak_lr": peak, "dead_step": dead_at,
             "dead_share": left, "lr_at_death": level, "loss_high_from": high_from,
             "loss_high_to": high_to, "before_training": untrained,
             "before_learning": why == UNLEARNED,
             **({"constant_loss": bound} if why == UNLEARNED else {})},
            "Step an epoch scheduler once per epoch, after the loop over batches, or give its "
            "sizes in batches (step_size, milestones, T_max times the batches per epoch); under "
            "gradient accumulation step the scheduler with the optimizer, not on every "
            "micro-batch; so that the learning rate decays over the whole run."))
    if cold:
        name, base, top, lr = cold[0]
        findings.append(lr_schedule.finding(
            WARNING, name if len(cold) == 1 else f"{name} (+{len(cold) - 1} more)",
            (int(lr.index[0]), int(lr.index[-1])),
            "The learning rate never reached its configured value: "
            f"{name_list([c[0] for c in cold])} "
            f"stayed at or below {fmt(top)} on all {len(lr)} steps, {fmt(top / base)} of the "
            f"configured {fmt(base)}"
            + (", still rising at the last step: a warm-up longer than the run"
               if top >= floor * base else
               ": a warm-up far longer than the run, or a schedule that starts at 0 and does "
               "not rise") + "."
            + (f" Scheduler: {scheduler}." if scheduler else ""),
            {"kind": "never_warmed_up", "groups": len(cold), "configured_lr": base,
             "max_lr": top, "steps": len(lr)},
            "Make the warm-up end within the run (a few percent of the total steps), and check "
            "the schedule's factor at step 0 and after the warm-up."))
    return findings


def _lr_names(run: Run) -> list[str]:
    sc = run.scalars
    if not len(sc):
        return []
    names = sc.loc[sc["split"] == TRAIN, "name"].astype(str).unique()
    return sorted(n for n in names if n.startswith(LR_PREFIX))


def _died(lr: pd.Series, loss: pd.Series, floor: float, drop: float, min_dead_share: float,
          min_steps: int, bound: float | None = None, max_explained: float = 0.05):
    """(lr, peak, step the LR settled at, its value there, loss at the start and end of the
    window before its fall, why it counts: FELL_WHILE_FALLING, UNTRAINED (it fell before
    training began) or UNLEARNED (the loss was and stayed at `bound`, the constant
    prediction's, see `_unlearned`)) when the LR settled early while the loss fell or before
    it learned anything, else None."""
    values = lr.to_numpy(dtype=float)
    peak_at = int(np.argmax(values))
    peak = float(values[peak_at])
    if not peak > 0 or not values[-1] <= drop * peak:
        return None
    # settled: below the floor, or at the value it ends at (a schedule's final LR)
    level = max(floor * peak, float(values[-1]) * (1 + 1e-6))
    above = np.flatnonzero(values > level)
    dead_from = int(above[-1]) + 1 if len(above) else 0
    rest = len(values) - dead_from
    if rest < max(min_steps, min_dead_share * len(values)):
        return None
    tenth = peak_at + int(np.argmax(values[peak_at:] < 0.1 * peak))
    if dead_from - tenth >= rest:
        return None  # a decay as long as what follows it: a schedule, not a unit mistake
    fall = peak_at + int(np.argmax(values[peak_at:] < 0.5 * peak))
    if fall - int(np.argmax(values >= 0.5 * peak)) >= rest:
        # held high at least as long as it then stays down: a step decay stepped per epoch
        # (30/30/30 epochs, 50/25/25 %, a run stopped within its last stage); an epoch
        # scheduler stepped per batch shrinks every stage but the last
        return None
    before = loss[loss.index < lr.index[fall]]
    width = max(min_steps, (fall - peak_at) // 2)
    window = before.iloc[-width:]
    if len(window) < min_steps:
        # it fell before training could begin: only a run that then stays there is judged
        if rest < 0.5 * len(values) or len(loss) < min_steps:
            return None
        return (lr, peak, int(lr.index[dead_from]), float(values[dead_from]),
                float(loss.iloc[0]), float(loss.iloc[-min_steps:].median()), UNTRAINED)
    third = max(1, len(window) // 3)
    start, end = float(window.iloc[:third].median()), float(window.iloc[-third:].median())
    steps = np.diff(window.to_numpy(dtype=float))
    noise = MAD_TO_STD * float(np.median(np.abs(steps - np.median(steps)))) / np.sqrt(2)
    if start - end > noise:
        return (lr, peak, int(lr.index[dead_from]), float(values[dead_from]), start, end,
                FELL_WHILE_FALLING)
    down = loss[loss.index >= lr.index[dead_from]]
    if _unlearned(window, down, bound, max_explained, min_steps):
        return (lr, peak, int(lr.index[dead_from]), float(values[dead_from]), end,
                float(down.median()), UNLEARNED)
    return None


def _unlearned(before: pd.Series, down: pd.Series, bound: float | None, max_explained: float,
               min_steps: int) -> bool:
    """Whether the loss had learned nothing when the LR fell and learned nothing after: the
    medians of the window before the fall (`before`) and of the stretch the LR stayed down
    (`down`, `min_steps` losses or more) are both within `max_explained` of `bound` or above
    it, the loss of the best prediction that ignores the input (the entropy of the class
    shares, the targets' variance). A loss that flattened there was never trained, not
    converged: a plateau a decay can follow is one below it."""
    if bound is None or not bound > 0 or len(down) < min_steps or not len(before):
        return False
    level = (1 - max_explained) * bound
    return float(before.median()) >= level and float(down.median()) >= level


def _wrapped(run: Run, lr: pd.Series, drop: float, floor: float) -> tuple[int, object] | None:
    """(the step of the first low, T_max) when a CosineAnnealingLR's LR fell to `drop` of its
    peak or less and rose back to half the peak: it anneals once over T_max steps, so it was
    stepped more often than that."""
    recorded = _schedulers(run)
    cosine = [s for s in recorded if s.get("type") == "CosineAnnealingLR"]
    values = lr.to_numpy(dtype=float)
    peak = float(values.max())
    if not peak > 0:
        return None
    if len(cosine) == 1:
        low = np.flatnonzero(values <= drop * peak)
        if not len(low) or not (values[low[0]:] >= 0.5 * peak).any():
            return None
        return int(lr.index[low[0]]), (cosine[0].get("settings") or {}).get("T_max")
    if any(s.get("type") in CYCLIC for s in recorded):
        return None
    # no CosineAnnealingLR recorded: read the cycle from the LR itself. An annealing that
    # fell from half its peak to 0 (below `floor` of the peak) and climbed back to half the
    # peak, both through several levels, ran past its end; a warm restart jumps back up in
    # one step, and a warm-up set after a first epoch at the optimizer's LR jumps down to 0.
    high = values >= 0.5 * peak
    low = np.flatnonzero((values <= floor * peak) & (np.cumsum(high) > 0))
    if not len(low):
        return None
    fell = values[:low[0]][::-1]
    fell = fell[:int(np.argmax(fell >= 0.5 * peak))]
    after = values[low[0]:]
    back = np.flatnonzero(after >= 0.5 * peak)
    if not len(back) or not (_levels(fell, floor, peak) and _levels(after[:back[0]], floor,
                                                                    peak)):
        return None
    return int(lr.index[low[0]]), None


def _levels(values: np.ndarray, floor: float, peak: float) -> bool:
    """Whether `values` pass through at least 2 distinct levels between `floor` and half of the
    peak: a gradual fall or climb, not a jump."""
    between = values[(values > floor * peak) & (values < 0.5 * peak)]
    return len(np.unique(between)) >= 2


def _schedulers(run: Run) -> list[dict]:
    found = run.meta.get(META_SCHEDULERS)
    return [s for s in (found.values() if isinstance(found, dict) else ())
            if isinstance(s, dict)]


def _after(loss: pd.Series, dead_at: int) -> str:
    after = loss[loss.index >= dead_at]
    if len(after) < 2:
        return ""
    return (f", and after the LR died it went from {fmt(float(after.iloc[:5].median()))} to "
            f"{fmt(float(after.iloc[-5:].median()))}")


def _configured(run: Run, name: str) -> float | None:
    """The group's configured LR: the `initial_lr` a scheduler writes into it."""
    optimizers = run.optimizers()
    found = group_of(name, optimizers)
    if found is None:
        return None
    key, index = found
    groups = groups_of(optimizers.get(key))
    if index >= len(groups):
        return None
    value = groups[index].get("initial_lr")
    if not isinstance(value, (int, float)) and not _schedulers(run):
        # no scheduler: the LR the group was built with, before the loop set it by hand
        value = groups[index].get("lr")
    return float(value) if isinstance(value, (int, float)) else None


def _still_warming(lr: pd.Series, base: float, warm_share: float) -> bool:
    """The LR rose on the whole run (never fell) and ended at `warm_share` of the configured
    LR or less: a warm-up that had not ended when the run did."""
    values = lr.to_numpy(dtype=float)
    top = float(values[-1])
    return (top > float(values[0]) and top <= warm_share * base
            and bool((np.diff(values) >= -1e-9 * top).all()))


def _scheduler_types(run: Run) -> str:
    schedulers = run.meta.get(META_SCHEDULERS)
    found = schedulers.values() if isinstance(schedulers, dict) else ()
    return ", ".join(str(s.get("type")) for s in found if isinstance(s, dict))
