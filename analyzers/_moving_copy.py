"""Whether the model holds a copy of its own trained weights that moves without gradients: a
momentum (EMA) key encoder (MoCo), a BYOL/DINO target network, a mean teacher, a DQN's target
network. Its outputs (keys, a queue of negatives filled from them, targets) enter the loss, so the
objective moves with the model. Pure functions; no rule lives here."""
from __future__ import annotations

from typing import Any

from tracelab.core.run import Run

# Summary fields compared between the start and the close (model.parameters[*].values and
# frozen_at_close), and the relative change that counts as moved (float32 round-off is ~1e-7).
FIELDS = ("mean", "std", "min", "max", "abs_mean")
MOVED = 1e-4


def _moved(start: Any, stop: Any) -> bool:
    if not isinstance(start, dict) or not isinstance(stop, dict):
        return False
    try:
        if float(start["numel"]) != float(stop["numel"]) or float(start["numel"]) < 2:
            return False
        return any(abs(float(stop[k]) - float(start[k])) > MOVED * max(abs(float(start[k])), 1e-12)
                   for k in FIELDS if k in start and k in stop)
    except (KeyError, TypeError, ValueError):
        return False


def moving_copy(run: Run) -> list[str]:
    """The parameters with requires_grad=False, still frozen when the recorder closed
    (meta.json's frozen_at_close), whose values changed between the start and the close, and
    whose shape is that of a trained parameter (requires_grad=True) of the same model: a copy
    of the trained weights that follows them without gradients (a momentum key encoder, an EMA
    target network). Weights frozen at the start and trained later are not listed (no longer
    frozen at close), nor frozen weights that never changed (a pretrained backbone), nor a
    frozen tensor of a shape no trained one has. [] where the facts are missing or
    malformed."""
    try:
        info = run.parameters()
        end = run.meta.get("frozen_at_close")
        if not isinstance(info, dict) or not isinstance(end, dict):
            return []
        trained = {tuple(p.get("shape") or ()) for p in info.values()
                   if isinstance(p, dict) and p.get("requires_grad") is True}
        found = []
        for name, entry in info.items():
            if not isinstance(entry, dict) or entry.get("requires_grad") is not False:
                continue
            shape = tuple(entry.get("shape") or ())
            if len(shape) >= 2 and shape in trained and _moved(entry.get("values"),
                                                                end.get(name)):
                found.append(str(name))
        return found
    except (KeyError, TypeError, ValueError, AttributeError):
        return []


def copy_level_uninformative(run: Run) -> bool:
    """Whether the loss's level and swings must abstain as evidence of a step too large because
    a moving copy of the model (`moving_copy`) computes part of the objective (keys, queued
    negatives, targets), and no optimization fact shows an overshoot (`overshoot_facts`:
    NaN/Inf, updates 100x the usual size, a learning rate raised tenfold mid-run)."""
    from tracelab.analyzers._learning_rate import overshoot_facts

    return bool(moving_copy(run)) and not overshoot_facts(run)
