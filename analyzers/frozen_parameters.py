"""frozen-parameters: parameters that require grad, yet never change during training.

What it detects
    Parameters with `requires_grad=True` whose recorded weight statistics (norm, mean, min, max)
    stay the same, within `rtol`, from the first to the last recorded step (or whose recorded
    updates are all zero), while other parameters do change. The cause is named: the parameter
    is missing from the optimizer's param groups, or its gradients are None or zero (detached,
    unused in the forward pass, or dead units downstream), or its group's learning rate is
    zero. Parameters with the same cause make one finding naming their modules; parameters
    whose gradients are negligible against their weights (a bias before BatchNorm) are only
    noted at info level.

Why it matters
    A silently frozen layer trains nothing while the loss still falls through the other layers:
    a decoder LayerNorm frozen by mistake, or a head added after the optimizer was built, gives
    a model that looks trained and behaves badly (outputs that repeat the same token).

Example
    `head.weight` and `head.bias` never change in 500 steps; neither is in the optimizer.

How to fix
    Build the optimizer after the model is complete, from `model.parameters()` (or add the
    missing parameters to a param group); make sure the module is used in the forward pass and
    its output is not detached.

False positives
    Parameters frozen on purpose with `requires_grad=False` are not judged. Without a model
    summary, only parameters with recorded gradients are judged. When no parameter changes at
    all, loss-plateau names the cause instead.
"""
from __future__ import annotations

import numpy as np

from tracelab.analyzers._dynamics import OUTCOME, layer_of, name_list, param_info, subject_of, \
    weights_unchanged
from tracelab.core.causes import explains
from tracelab.core.findings import INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import GRAD, WEIGHT, Needs

@rule(name="frozen-parameters", code="TL205", requires=(Needs.WEIGHTS,), merge="module group",
      plot=Plot.WEIGHT_CHANGE,
      links=(explains(*OUTCOME, why="parameters that never change do not learn",
                      timing="overlap"),))
def frozen_parameters(run: Run, *, rtol: float = 1e-7, negligible: float = 1e-6,
                      min_steps: int = 3) -> list[Finding]:
    norms = run.stat(WEIGHT, "norm")
    if len(norms) < min_steps:
        return []
    info = param_info(run)
    grads = run.stat(GRAD, "norm")
    if info:
        trainable = [n for n in norms.columns if info.get(n, {}).get("requires_grad", True)]
    else:
        trainable = [n for n in norms.columns if n in grads.columns]
    still = [n for n in trainable if weights_unchanged(run, n, rtol)]
    if not still or len(still) == len(trainable):
        return []
    first, last = int(norms.index[0]), int(norms.index[-1])
    # One finding per cause, naming the modules: a dead network should not give one per layer.
    by_cause: dict[tuple, list[str]] = {}
    for name in still:
        scale = float(norms[name].median())
        by_cause.setdefault(_cause(name, info, grads, scale, negligible), []).append(name)
    findings = []
    for (severity, cause, fix), params in by_cause.items():
        modules = list(dict.fromkeys(layer_of(p) for p in params))
        findings.append(frozen_parameters.finding(
            severity, subject_of(modules), (first, last),
            f"{'Parameter' if len(params) == 1 else 'Parameters'} {name_list(params)} "
            f"{'requires' if len(params) == 1 else 'require'} grad but never changed over "
            f"{len(norms)} recorded steps ({first}-{last}) while {len(trainable) - len(still)} "
            f"other parameters did; {cause}.",
            {"parameters": len(params), "modules": len(modules), "steps": len(norms),
             "grad_norm_max": _grad_max(grads, params),
             "changing_parameters": len(trainable) - len(still)},
            fix))
    return findings


def _grad_max(grads, params) -> float:
    """The largest recorded gradient norm of `params` (NaN when none was recorded)."""
    cols = [p for p in params if p in grads.columns]
    peaks = grads[cols].max().dropna().to_numpy(dtype=float) if cols else np.array([])
    peaks = peaks[np.isfinite(peaks)]
    return float(peaks.max()) if peaks.size else float("nan")


def _cause(name: str, info: dict, grads, scale: float, negligible: float) -> tuple:
    """(severity, cause, fix) of one parameter that never changed."""
    if info.get(name, {}).get("in_optimizer") is False:
        return (WARNING, "the optimizer's param groups do not hold them",
                "Build the optimizer after the model is complete, from model.parameters(), or "
                "add these parameters to a param group.")
    peak = _grad_max(grads, [name])
    if not peak > 0:
        what = "zero" if peak == 0 else "never recorded (None)"
        return (WARNING, f"the gradients are {what}: the module is unused in the forward "
                "pass, its output is detached, or dead units block the gradient downstream",
                "Make sure the module is used in the forward pass and its output is not "
                "detached (no .detach(), .item() or torch.no_grad() on the way to the loss); "
                "see dead-units.")
    if peak < negligible * scale:
        return (INFO, "the gradients are negligible against the weights, too small to "
                "change float32 values: the loss hardly depends on them, as with a bias "
                "followed by a normalization layer or vanishing gradients",
                "Drop the redundant parameter (e.g. bias=False before BatchNorm) or ignore "
                "this note.")
    return (WARNING, "the gradients are non-zero, so the param group's learning rate is "
            "zero or the optimizer skips the group",
            "Check the learning rate and the schedule of the param group holding these "
            "parameters.")
