"""loss-plateau: the training loss never decreases, with a hint at why.

What it detects
    A run whose training loss at the end (median of the last steps) is not at least `min_drop`
    below its loss at the start (median of the first steps), nor more than `max_rise` above it
    (a rising loss is left to loss-oscillation and exploding-gradients). It then reads the
    gradients and updates to say why: gradients never computed or all zero mean `backward()`
    was never called (or never reaches the parameters) -- unless trainable weights change
    without any gradient recorded: torch's optimizers skip a parameter whose `.grad` is None,
    so backward() ran and the recorder read the gradients after `zero_grad()`; the share of
    parameter values with `requires_grad=False` is then named when it is half or more (see
    frozen-parameters); weights that never move mean
    `optimizer.step()` never ran; most weight matrices with zero gradients point to dead
    units; early layers with vanishing gradients point to the architecture; updates tiny
    against the weights mean the learning rate is far too low, large ones that it is too high.

Why it matters
    A flat loss is the most common "nothing happens" failure, and its causes are cheap to fix
    once named. Without gradient and update data the loss alone cannot tell them apart.

Example
    Loss 2.303 at the start and 2.301 at the end over 300 steps; every recorded gradient norm
    is 0, so `loss.backward()` is missing from the loop.

How to fix
    Call `loss.backward()` and `optimizer.step()` every step (after `zero_grad()`); pass
    `model.parameters()` to the optimizer; raise the learning rate when updates are tiny;
    check the label format against the loss and normalize inputs.

False positives
    A run resumed from an already converged checkpoint, or a fine-tuning run meant to move
    little, has a flat loss by design; ignore the rule there. In an adversarial game (two or
    more optimizers holding parameters, a loss that did not grow: a GAN's players) each
    player's loss stays level by design while both learn, so a plateau is reported there only
    when something does not move: no gradients, weights that never change, or one player
    whose parameters all stay still. A loss that rose a little is no exception there (a GAN's
    generator loss rises as its discriminator learns), and parameters that no recorded
    optimizer holds but that changed count as one more player (an optimizer not given to the
    Recorder). An optimizer that runs many iterations per step (L-BFGS's `max_iter`) is judged
    from the first recorded loss, the only one taken before it iterated. A run that steps
    several times on each batch and whose loss falls on most of those steps
    (`descends_per_batch`: PPO's epochs over one rollout, whose returns are normalized anew
    per rollout) learns on each batch it holds, and its level from one batch to the next
    follows the batch (the policy's new rollout), not the training: a plateau is reported
    there only where a recorded fact says why (no gradients, weights that never change, dead
    units, vanishing gradients, updates far too small or large). So it is where the loss's
    own step-to-step noise would hide a drop of `min_drop`: where the standard error of the
    drop, from the spread (MAD) of the first and last steps, exceeds `noise` times it
    (mixup, a policy's rollouts, a heavy-tailed per-batch loss), the drop measured is the
    seed's, not the run's, and only such a fact is reported. Runs shorter
    than `min_steps` recorded losses are not judged.
"""
from __future__ import annotations

import numpy as np

from tracelab.analyzers._learning_rate import descends_per_batch, groups_of, \
    iterations_per_step, lower_lr_fix, lr_fix, several_players
from tracelab.analyzers._dynamics import (MAD_TO_STD, edge_len, finite, finite_stat, fmt,
                                          matrix_params, name_list, update_ratios,
                                          weights_unchanged)
from tracelab.analyzers.dead_units import RELU_TYPES
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import ACTIVATION, GRAD, UPDATE, WEIGHT, Needs


@rule(name="loss-plateau", code="TL103", requires=(Needs.LOSS,), plot=Plot.LOSS,
      links=(explains("metric-stagnation",
                      why="a loss that does not fall leaves the metrics at chance",
                      timing="overlap"),))
def loss_plateau(run: Run, *, min_steps: int = 30, min_drop: float = 0.03,
                 max_rise: float = 0.25, low_update_ratio: float = 1e-5,
                 noise: float = 2.0) -> list[Finding]:
    loss = finite(run.loss())
    if len(loss) < min_steps:
        return []
    values = loss.to_numpy(dtype=float)
    k = edge_len(len(values))
    start, end = float(np.median(values[:k])), float(np.median(values[-k:]))
    if iterations_per_step(run) > 1:  # L-BFGS: the second loss already follows many iterations
        start = float(values[0])
    scale = max(abs(start), 1e-12)
    drop = (start - end) / scale
    if drop >= min_drop or drop < -max_rise:  # a rising loss is not a plateau
        return []
    severity, hint, evidence, fix = _hint(run, low_update_ratio)
    if severity is WARNING and not evidence and (
            descends_per_batch(run)  # it falls on each batch it holds; its level follows it
            or _edge_noise(values, k) / scale > noise * min_drop):  # it hides such a drop
        return []
    if several_players(run) and severity is not ERROR:
        still = _players_still(run)
        if not still:
            return []  # a player's loss stays level by design while both players learn
        one = len(still) == 1
        hint = (f"the parameters of optimizer{'' if one else 's'} "
                f"{name_list([repr(p) for p in still])} never change, so "
                f"{'that player' if one else 'those players'} never learn"
                f"{'s' if one else ''} (see optimizer-step-missing)")
        evidence = {"players_still": len(still)}
        fix = ("Call each player's own optimizer.step() after its backward pass, on an "
               "optimizer built from that player's parameters.")
    fix = lower_lr_fix(run, fix)
    first, last = int(loss.index[0]), int(loss.index[-1])
    evidence.update(start_loss=start, end_loss=end, relative_drop=drop, steps=len(values))
    return [loss_plateau.finding(
        severity, "loss", (first, last),
        f"Train loss did not decrease over {len(values)} steps: {fmt(start)} at the start, "
        f"{fmt(end)} at the end ({_change(drop)}); {hint}.", evidence, fix)]


def _hint(run: Run, low_update_ratio: float, high_update_ratio: float = 0.1) -> tuple:
    have = run.available
    grads = run.stat(GRAD, "norm") if Needs.GRADS in have else None
    moved = _trained_moved(run) if Needs.WEIGHTS in have and (grads is None or grads.empty) \
        else []
    if moved:
        # torch's optimizers skip a parameter whose .grad is None: weights that change had
        # gradients when the optimizer stepped, so backward() runs; the recorder read them
        # after they were reset (zero_grad() before Recorder.step(), gradient accumulation).
        hint = (f"no gradients were recorded at step(), yet {len(moved)} trainable "
                "parameters change, so backward() and optimizer.step() run (as when "
                "zero_grad() comes before Recorder.step())")
        share = _frozen_share(run)
        if share is not None and share >= 0.5:
            hint += (f"; {fmt(100 * share)}% of the model's parameter values have "
                     "requires_grad=False, so only the rest can learn (see frozen-parameters)")
        return (WARNING, hint, {"moving_parameters": len(moved), "frozen_share": share},
                "Check that the parameters meant to train require grad and are in the "
                "optimizer; call Recorder.step() before optimizer.zero_grad() so that "
                "gradients are recorded.")
    if Needs.WEIGHTS in have and (grads is None or grads.empty or _all_zero(grads)):
        what = "none were recorded" if grads is None or grads.empty else "all are zero"
        return (ERROR, f"gradients: {what}, so loss.backward() was never called or never "
                "reaches the parameters", {"grad_norm_max": _max(grads)},
                "Call loss.backward() before optimizer.step() in every training step.")
    if grads is None or grads.empty:
        return (WARNING, "no gradients or weights were recorded to say why", {},
                "Record gradients and weights (Recorder with a model) to diagnose the plateau.")
    if _all_zero(run.stat(UPDATE, "norm")) and _weights_still(run):
        return (ERROR, "gradients are non-zero but the weights never change, so "
                "optimizer.step() never ran or the optimizer holds other parameters",
                {"grad_norm_max": _max(grads)},
                "Call optimizer.step() every step, on an optimizer built from "
                "model.parameters().")
    matrices = matrix_params(run, grads.columns)
    peaks = grads[matrices].iloc[len(grads) // 2:].max()  # the second half: after a collapse
    zero = [n for n in matrices if peaks[n] == 0]
    if matrices and len(zero) * 2 >= len(matrices):
        return (WARNING, f"{len(zero)} of {len(matrices)} weight matrices get exactly zero "
                "gradients, as when dead ReLUs block them (see dead-units)",
                {"zero_grad_layers": len(zero)},
                "Lower the learning rate, fix the bias initialization or use LeakyReLU so "
                "units stay alive.")
    dead = _dead_layers(run)
    if dead:
        return (WARNING, f"most units of {name_list([repr(m) for m in dead])} are dead "
                "(see dead-units)",
                {"dead_layers": len(dead)},
                "Lower the learning rate, fix the bias initialization or use LeakyReLU so "
                "units stay alive.")
    rms = (grads[matrices] / np.sqrt(run.numel(GRAD)[matrices])).median()
    rms = rms[rms > 0]
    if len(rms) > 1 and rms.min() < 1e-3 * rms.max():
        return (WARNING, f"gradients vanish: the smallest layer gets {fmt(rms.min() / rms.max())}"
                "x the gradient of the largest (see vanishing-gradients)",
                {"grad_ratio": float(rms.min() / rms.max())},
                "Use ReLU-family activations, normalization layers or residual connections.")
    ratio = _update_ratio(run)
    if ratio is not None and ratio < low_update_ratio:
        return (WARNING, f"even the fastest layer's updates are only {fmt(ratio)} of its "
                "weights' norm per step, so the learning rate is far too low",
                {"update_ratio": ratio},
                lr_fix(run, "Raise the learning rate (an LR range test finds a good one)."))
    if ratio is not None and ratio > high_update_ratio:
        return (WARNING, f"updates reach {fmt(ratio)} of the weights' norm per step, so the "
                "learning rate is too high to settle (see loss-oscillation)",
                {"update_ratio": ratio},
                "Lower the learning rate (3-10x) and add warm-up.")
    return (WARNING, "gradients and updates look ordinary, so check the labels' format "
            "against the loss and the inputs' scaling", {},
            "Check that labels match the loss (class indices vs one-hot) and normalize inputs.")


def _trained_moved(run: Run) -> list[str]:
    """Parameters not marked requires_grad=False whose recorded weights (two recordings or
    more) or updates changed over the run; [] where none was recorded. A frozen copy that
    changes (an EMA teacher) is not among them."""
    info = run.parameters()
    norms = run.stat(WEIGHT, "norm")
    names = set(norms.columns[norms.notna().sum() >= 2]) | set(run.names(UPDATE))
    return sorted(n for n in names if info.get(n, {}).get("requires_grad") is not False
                  and not weights_unchanged(run, n))


def _frozen_share(run: Run) -> float | None:
    """The share of the model's parameter values (meta.json's shapes) with requires_grad=
    False; None without a model summary that gives every shape."""
    sizes = {}
    for name, entry in run.parameters().items():
        try:
            sizes[name] = int(np.prod([int(d) for d in entry["shape"]]))
        except (KeyError, TypeError, ValueError):
            return None
    total = sum(sizes.values())
    if not total:
        return None
    return sum(n for name, n in sizes.items()
               if run.parameters()[name].get("requires_grad") is False) / total


def _edge_noise(values: np.ndarray, k: int) -> float:
    """The standard error of the difference between the medians of the first and the last
    `k` values, from their spread (MAD): how far the loss's own step-to-step noise alone
    moves the measured drop."""
    head, tail = values[:k], values[-k:]
    spread = [MAD_TO_STD * float(np.median(np.abs(x - np.median(x)))) for x in (head, tail)]
    return 1.2533 * float(np.hypot(*spread)) / np.sqrt(k)  # a median's error: sqrt(pi / 2)


def _players_still(run: Run) -> list[str]:
    """The optimizers (meta.json's keys) whose listed parameters, those with recorded weights
    or updates, all never changed (weights_unchanged); [] where none lists any."""
    still = []
    for key, summary in run.optimizers().items():
        params = [str(p) for g in groups_of(summary) for p in (g.get("params") or ())]
        judged = [p for p in params if p in run.names(WEIGHT) or p in run.names(UPDATE)]
        if judged and all(weights_unchanged(run, p) for p in judged):
            still.append(key)
    return still


def _dead_layers(run: Run) -> list[str]:
    """ReLU modules whose units are mostly dead over the second half of the run."""
    if Needs.ACTIVATIONS not in run.available:
        return []
    types = run.module_types()
    dead = finite_stat(run, ACTIVATION, "dead_frac")
    late = dead.iloc[len(dead) // 2:].median()
    return [m for m in dead.columns if types.get(m) in RELU_TYPES and late[m] >= 0.5]


def _change(drop: float) -> str:
    return f"{fmt(100 * drop)}% lower" if drop >= 0 else f"{fmt(-100 * drop)}% higher"


def _all_zero(frame) -> bool:
    values = frame.to_numpy(dtype=float)
    values = values[np.isfinite(values)]
    return values.size == 0 or bool(np.all(values == 0))


def _max(frame) -> float:
    if frame is None or frame.empty:
        return float("nan")
    values = frame.to_numpy(dtype=float)
    values = values[np.isfinite(values)]
    return float(values.max()) if values.size else float("nan")


def _weights_still(run: Run) -> bool:
    norms = run.stat(WEIGHT, "norm")
    if len(norms) < 2:
        return False
    return bool(np.allclose(norms.iloc[0], norms.iloc[-1], rtol=1e-7, atol=0, equal_nan=True))


def _update_ratio(run: Run) -> float | None:
    """The fastest weight matrix's median update ratio over the second half of the run."""
    ratios = update_ratios(run, 0.5)
    return float(ratios.max()) if len(ratios) else None
