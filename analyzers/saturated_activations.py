"""saturated-activations: sigmoid/tanh outputs sit at their bounds, where gradients vanish.

What it detects
    For each Sigmoid, Tanh (and hard/soft variants the recorder knows) module, the share of its
    outputs within 1% of the function's bounds (`saturated_frac`), as the median over the last
    third of the recorded steps. A hidden layer is flagged at `min_saturated` or more when the
    saturation starves the layers before it of gradient. A unit within 1% of a tanh's bound
    passes at most 0.02 of the gradient its centre passes (a sigmoid's 0.04): where the weight
    matrix that feeds the activation (the last one before it in the model's order) gets a
    gradient relative to its weights (||grad|| / ||weight||, median over the same steps) below
    `starved` times the median of the model's weight matrices, its gradient was cut as if
    every unit sat at its bound, and the layer is flagged; at or above it, the loss still
    trains through the saturated outputs and the rule stays quiet. A loss that saturated
    outputs pin passes them no gradient, and shows there too. Without recorded gradients and
    weights, or without such a matrix to compare, saturation alone is reported.

Why it matters
    A saturated sigmoid or tanh has a derivative near zero: gradients stop flowing through it,
    and the layers before it stop learning. Unnormalized inputs, too large an initialization
    or learning rate push pre-activations far from zero.

Example
    `encoder.act1` (Tanh) has 83% of its outputs within 1% of +-1 over the last 100 steps,
    and `encoder.fc1`, which feeds it, gets 0.003x the median gradient relative to its weights
    of the model's layers.

How to fix
    Normalize the inputs, use Xavier/Glorot initialization, add BatchNorm/LayerNorm before the
    activation, lower the learning rate, or switch hidden layers to ReLU-family activations.

False positives
    The model's final activation is not judged: a confident classifier's output sigmoid is
    saturated by design. Gates that are meant to be binary (hard attention) saturate too. A
    saturated layer whose feeding matrix keeps its share of the gradient is no fault: the
    units off their bounds carry the gradient (a GAN's discriminator confident on most
    points, a tanh net that still learns). The model's order is the order its modules were
    registered in; a model that calls them in another order is judged by that one.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import (OUTCOME, finite_stat, fmt, layer_of, matrix_params,
                                          sustained)
from tracelab.core.causes import explains
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import ACTIVATION, GRAD, WEIGHT, Needs


@rule(name="saturated-activations", code="TL204", requires=(Needs.ACTIVATIONS,), merge="layer",
      plot=Plot.SATURATED_FRACTION,
      links=(explains("vanishing-gradients", why="saturated units pass almost no gradient back",
                      timing="overlap", place="upstream"),
             explains("collapsed-outputs", *OUTCOME,
                      why="saturated units stop the network from learning", timing="overlap")))
def saturated_activations(run: Run, *, min_saturated: float = 0.5, window: float = 1 / 3,
                          min_recordings: int = 3, starved: float = 0.02) -> list[Finding]:
    sat = finite_stat(run, ACTIVATION, "saturated_frac")
    if sat.empty:
        return []
    types = run.module_types()
    # The last module recorded is the model's output: saturation there is a confident output.
    hidden = list(sat.columns[:-1])
    findings = []
    for module, series, recent, level in sustained(sat, hidden, min_saturated, window,
                                                   min_recordings):
        kind = types.get(module, "activation")
        starving = _starving(run, module, (int(recent.index[0]), int(recent.index[-1])))
        if starving is not None and starving[1] >= starved:
            continue  # the loss trains through: the layer feeding it keeps its gradient
        fed = (f"; '{starving[0]}', which feeds it, gets {fmt(starving[1])}x the median "
               "gradient relative to its weights of the model's layers"
               if starving is not None else "")
        findings.append(saturated_activations.finding(
            WARNING, module, (int(recent.index[0]), int(recent.index[-1])),
            f"{fmt(100 * level)}% of the outputs of '{module}' ({kind}) sit within 1% of its "
            f"bounds over its last {len(recent)} recordings, where its gradient is near "
            f"zero{fed}.",
            {"saturated_frac": level, "saturated_frac_first": float(series.iloc[0]),
             "recordings": len(recent), "feeding_layer": starving[0] if starving else None,
             "feeding_grad_share": starving[1] if starving else None},
            "Normalize the inputs, use Xavier initialization or a normalization layer before "
            "this activation, or lower the learning rate."))
    return findings


def _starving(run: Run, module: str, steps: tuple[int, int]) -> tuple[str, float] | None:
    """(the weight matrix that feeds `module`: the last one before it in the model's order,
    its ||grad|| / ||weight|| over `steps` divided by the median of all the matrices'), or
    None where gradients, weights or such matrices were not recorded."""
    grads, weights = run.stat(GRAD, "norm"), run.stat(WEIGHT, "norm")
    if grads.empty or weights.empty:
        return None
    order = {name: i for i, name in enumerate(run.module_types())}
    if module not in order:
        return None
    names = [n for n in matrix_params(run, grads.columns)
             if n in weights.columns and layer_of(n) in order]
    inside = (grads.index >= steps[0]) & (grads.index <= steps[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = (grads.loc[inside, names] / weights[names].reindex(grads.index[inside]))
    ratio = ratio.replace([np.inf, -np.inf], np.nan).median()
    ratio = pd.Series(ratio, dtype=float).dropna()
    ratio = ratio[ratio >= 0]
    before = [n for n in ratio.index if order[layer_of(n)] < order[module]]
    if not before:
        return None
    feeding = max(before, key=lambda n: order[layer_of(n)])
    if len(ratio) < 2:
        return None
    reference = float(ratio.median())
    if not reference > 0:
        return None
    return feeding, float(ratio[feeding]) / reference
