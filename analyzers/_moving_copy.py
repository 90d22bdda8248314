"""Whether the model holds a copy of its own trained weights that moves without gradients: a
momentum (EMA) key encoder (MoCo), a BYOL/DINO target network, a mean teacher, a DQN's target
network. Its outputs (keys, a queue of negatives filled from them, targets) enter the loss, so the
objective moves with the model; and whether an overshoot shows against the optimizer kind's usual
step (`kind_overshoot`), which both such objectives and bootstrapped targets ask. Pure functions;
no rule lives here."""
from __future__ import annotations

from typing import Any

import numpy as np

from tracelab.analyzers._dynamics import matrix_params
from tracelab.analyzers._learning_rate import (OVERSHOOT_UPDATE, lr_raised, moving_targets,
                                               overshoot_facts)
from tracelab.analyzers._slow_updates import NORMALIZED
from tracelab.core.run import Run
from tracelab.core.schema import LR_PREFIX, TRAIN, WEIGHT

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
    NaN/Inf, updates 100x the usual size of the optimizer's kind, a learning rate raised
    tenfold mid-run: `kind_overshoot`)."""
    return bool(moving_copy(run)) and not kind_overshoot(run)


def targets_level_uninformative(run: Run) -> bool:
    """Whether the recorded targets move with the model (`moving_targets`: bootstrapped
    returns or TD targets) and no optimization fact shows an overshoot, read against the
    optimizer kind's usual step (`kind_overshoot`)."""
    return moving_targets(run) and not kind_overshoot(run)


def kind_overshoot(run: Run) -> bool:
    """`overshoot_facts` read against the optimizer kind's usual step. Where every optimizer
    is a normalized one (Adam, RMSprop...: `NORMALIZED`), each step moves each weight by about
    its learning rate whatever the gradient (RMSprop's first steps by lr / sqrt(1 - alpha),
    10 lr), so a layer initialized small (an actor's head scaled by 1e-3) shows update ratios
    far above 1e-3 of its norm in its first steps by design: there an update counts as an
    overshoot only where the learning rate itself is OVERSHOOT_UPDATE of the layer's weights'
    usual size or more (lr * sqrt(numel) against the median norm the layer held over the run).
    NaN/Inf and a learning rate raised tenfold mid-run count as before; for other optimizers
    (SGD, whose step scales with the gradient) this is `overshoot_facts`."""
    try:
        opts = run.meta.get("optimizers")
        kinds = [o.get("type") for o in opts.values()] if isinstance(opts, dict) else []
        if not kinds or not all(k in NORMALIZED for k in kinds):
            return overshoot_facts(run)
        loss = run.loss().to_numpy(dtype=float, na_value=np.nan)
        if (loss.size and not np.isfinite(loss).all()) or lr_raised(run):
            return True
        lrs = [float(g.get("lr")) for o in opts.values() for g in o.get("groups") or ()
               if isinstance(g, dict) and isinstance(g.get("lr"), (int, float))]
        sc = run.scalars
        if len(sc):
            rows = sc[(sc["split"] == TRAIN) & sc["name"].astype(str).str.startswith(LR_PREFIX)]
            lrs += [float(v) for v in np.asarray(rows["value"], dtype=float) if np.isfinite(v)]
        if not lrs:
            return overshoot_facts(run)
        lr = max(lrs)
        w = run.stat(WEIGHT, "norm")
        info = run.parameters()
        for name in matrix_params(run, list(w.columns)):
            shape = (info.get(name) or {}).get("shape") or ()
            numel = float(np.prod([float(s) for s in shape])) if shape else 0.0
            norm = float(w[name].median())
            if numel > 0 and np.isfinite(norm) and norm > 0 and \
                    lr * np.sqrt(numel) / norm >= OVERSHOOT_UPDATE:
                return True
        return False
    except (KeyError, TypeError, ValueError, AttributeError):
        return False
