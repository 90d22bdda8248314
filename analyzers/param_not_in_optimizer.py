"""param-not-in-optimizer: parameters that get gradients but are in no optimizer.

What it detects
    Trainable parameters (`requires_grad=True`) that no optimizer given to the Recorder holds
    (meta.json's `model.parameters[*].in_optimizer` is false), that receive non-zero gradients,
    and whose weights never change over the run. Parameters that change anyway (another
    optimizer, not given to the Recorder, updates them) are not judged.
    Parameters of a module that is not registered (kept in a plain Python list or dict) are
    not the model's at all: the recorder finds them among the leaves of the first loss's
    graph (meta `unregistered_parameters`); those that got a gradient, that no optimizer
    holds and that did not change from the first step to the close are named too.

Why it matters
    Backward computes their gradients and nothing applies them: the module keeps its initial
    weights, typically a head or a layer added after the optimizer was built. Since
    `optimizer.zero_grad()` resets only the optimizer's own parameters, their gradients also
    pile up from step to step, which looks like a missing `zero_grad()`, whose fix would not
    help here.

Example
    head.weight and head.bias get gradients (largest total norm 3.1) on every step but are in
    no optimizer's param groups, and never changed in 200 steps.

How to fix
    Build the optimizer after the model is complete, from `model.parameters()`, or add the
    missing parameters with `optimizer.add_param_group({"params": module.parameters()})`;
    a part frozen on purpose should get `requires_grad_(False)`, which also saves its backward.

False positives
    Parameters frozen with `requires_grad=False` get no gradient and are not judged. Several
    optimizers given as a list or a dict (a GAN's generator and discriminator) count together.
    When the modules left out hold most of the model's elements and all run before every
    optimized one in the forward pass (a backbone under a trained head; the model's parameter
    order without activations), and their weights are no fresh default random draw (pretrained),
    the finding is information: that is how a backbone is often frozen, wastefully but
    harmlessly; a backbone at its random init was forgotten. An embedding left out runs first but is a small part,
    and a critic left out beside its actor runs after it: both are warnings. A network outside
    the model that the loss runs through (a loss network, a teacher) and that was left
    trainable is named among the unregistered parameters: freezing it is the fix there.
    An optimizer that holds parameters but none of the model's (built on a first instance of
    the model, which was then created again or copied) left nothing out: it steps another
    model object, which optimizer-step-missing names.
"""
from __future__ import annotations

import math

import numpy as np

from tracelab.analyzers._dynamics import OUTCOME, fmt, layer_of, name_list, \
    subject_of, weights_unchanged
from tracelab.analyzers._learning_rate import watched_parameter
from tracelab.analyzers._left_out import frozen_backbone
from tracelab.analyzers.optimizer_step_missing import held_elsewhere
from tracelab.core.causes import explains
from tracelab.core.findings import INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import GRAD, META_UNREGISTERED, WEIGHT, Needs


def _holds_watched(cause: Finding, effect: Finding) -> bool:
    """The parameter whose gradient resets are watched (the model's smallest) is one of those
    no optimizer holds: their gradients pile up whatever zero_grad() does."""
    return bool(cause.evidence.get("holds_watched"))


@rule(name="param-not-in-optimizer", code="TL213",
      requires=(Needs.MODEL, Needs.OPTIMIZERS, Needs.GRADS, Needs.WEIGHTS),
      merge="module group", plot=Plot.WEIGHT_CHANGE,
      links=(explains("missing-zero-grad",
                      why="optimizer.zero_grad() resets only the optimizer's parameters, so "
                          "the gradients of those it does not hold pile up",
                      timing="overlap", when=_holds_watched),
             explains("frozen-parameters", why="parameters no optimizer holds never change",
                      timing="overlap", place="same"),
             explains("optimizer-step-missing", *OUTCOME,
                      why="parameters no optimizer holds do not learn", timing="overlap")))
def param_not_in_optimizer(run: Run, *, rtol: float = 1e-7,
                           min_steps: int = 3) -> list[Finding]:
    findings = _unregistered(run)
    info = run.parameters()
    trainable = [n for n, p in info.items() if p.get("requires_grad", True)]
    outside = [n for n in trainable if info[n].get("in_optimizer") is False]
    norms = run.stat(WEIGHT, "norm")
    # An optimizer that holds parameters, none of them the model's, steps another model
    # object: optimizer-step-missing names that; nothing was left out of it.
    if not outside or len(norms) < min_steps or held_elsewhere(run):
        return findings
    grads = run.stat(GRAD, "norm")
    peaks = {n: _peak(grads, n) for n in outside}
    left = [n for n in outside if peaks[n] > 0 and weights_unchanged(run, n, rtol)]
    if not left:
        return findings
    inside = [n for n in trainable if info[n].get("in_optimizer") is True]
    # a backbone frozen by leaving it out: most of the model, running before the trained head
    upstream = frozen_backbone(run, info, left, trainable)
    modules = list(dict.fromkeys(layer_of(n) for n in left))
    watched = watched_parameter(run.meta)
    steps = (int(norms.index[0]), int(norms.index[-1]))
    text = (f"{'Parameter' if len(left) == 1 else 'Parameters'} {name_list(left)} "
            f"{'gets' if len(left) == 1 else 'get'} gradients (largest norm "
            f"{fmt(max(peaks[n] for n in left))}) but no optimizer holds "
            f"{'it' if len(left) == 1 else 'them'}: "
            f"{'it' if len(left) == 1 else 'they'} never changed over {len(norms)} recorded "
            f"steps ({steps[0]}-{steps[1]}), and the gradients pile up, since zero_grad() "
            "resets only the optimizer's parameters.")
    if upstream:
        text += (" They all come before the optimized parameters, as a backbone frozen by "
                 "leaving it out of the optimizer is.")
    return findings + [param_not_in_optimizer.finding(
        INFO if upstream else WARNING, subject_of(modules), steps, text,
        {"parameters": len(left), "modules": len(modules), "subjects": modules,
         "grad_norm_max": max(peaks[n] for n in left), "holds_watched": watched in left,
         "optimized_parameters": len(inside)},
        "Freeze them with requires_grad_(False) (which also saves their backward), as a "
        "backbone frozen on purpose should be." if upstream else
        "Build the optimizer after the model is complete, from model.parameters(), or add "
        "them with optimizer.add_param_group({'params': module.parameters()}); pass every "
        "optimizer to Recorder(optimizer=[...]).")]


def _unregistered(run: Run) -> list[Finding]:
    """Parameters the loss's graph reaches that the model does not hold (a module kept in a
    plain list or dict), that got a gradient, that no optimizer holds and that never changed
    from the first step to the end (recorded: meta `unregistered_parameters`)."""
    found = run.meta.get(META_UNREGISTERED)
    if not isinstance(found, list):
        return []
    left = [p for p in found if isinstance(p, dict) and p.get("in_optimizer") is False
            and p.get("changed") is False and _positive(p.get("grad_norm"))
            and _numel(p.get("shape")) is not None]
    if not left:
        return []
    elements = sum(_numel(p["shape"]) for p in left)
    shapes = name_list(["x".join(str(d) for d in p["shape"]) or "scalar" for p in left])
    span = run.step_range or (0, 0)
    return [param_not_in_optimizer.finding(
        WARNING, "unregistered parameters", (int(span[0]), int(span[1])),
        f"{len(left)} parameters ({elements} elements; shapes {shapes}) get gradients from the "
        "loss but are not the model's: the module holding them is not registered (kept in a "
        "plain Python list or dict, or as an attribute of an object that is not a Module), or "
        "is a network outside the model (a loss network, a teacher) left trainable; they are "
        "in neither model.parameters() nor any optimizer, and they never changed from the "
        "first step to the end of the run.",
        {"parameters": len(left), "elements": elements, "unregistered": True,
         "grad_norm_max": max(float(p["grad_norm"]) for p in left), "holds_watched": False},
        "Hold the submodules in nn.ModuleList / nn.ModuleDict / nn.Sequential (not a Python "
        "list or dict) so that model.parameters() and the optimizer built from it include "
        "them; freeze a network that should not learn with requires_grad_(False).")]


def _positive(value) -> bool:
    """A finite number above zero (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        0 < value < math.inf


def _numel(shape) -> int | None:
    """The elements of a recorded shape: a list of non-negative ints whose product is a
    tensor's size (under 2**63); None for anything else (a meta.json edited by hand or written
    by another version)."""
    if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        return None
    n = math.prod(shape)
    return n if n < 2 ** 63 else None


def _peak(grads, name: str) -> float:
    if name not in grads.columns:
        return 0.0
    values = grads[name].to_numpy(dtype=float)
    values = values[np.isfinite(values)]
    return float(values.max()) if values.size else 0.0
