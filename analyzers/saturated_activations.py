"""saturated-activations: sigmoid/tanh outputs sit at their bounds, where gradients vanish.

What it detects
    For each Sigmoid, Tanh (and hard/soft variants the recorder knows) module, the share of its
    outputs within 1% of the function's bounds (`saturated_frac`), as the median over the last
    third of the recorded steps. A hidden layer is flagged at `min_saturated` or more.

Why it matters
    A saturated sigmoid or tanh has a derivative near zero: gradients stop flowing through it,
    and the layers before it stop learning. Unnormalized inputs, too large an initialization
    or learning rate push pre-activations far from zero.

Example
    `encoder.act1` (Tanh) has 83% of its outputs within 1% of +-1 over the last 100 steps.

How to fix
    Normalize the inputs, use Xavier/Glorot initialization, add BatchNorm/LayerNorm before the
    activation, lower the learning rate, or switch hidden layers to ReLU-family activations.

False positives
    The model's final activation is not judged: a confident classifier's output sigmoid is
    saturated by design. Gates that are meant to be binary (hard attention) saturate too.
"""
from __future__ import annotations

from tracelab.analyzers._dynamics import OUTCOME, finite_stat, fmt, sustained
from tracelab.core.causes import explains
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import ACTIVATION, Needs


@rule(name="saturated-activations", code="TL204", requires=(Needs.ACTIVATIONS,), merge="layer",
      plot=Plot.SATURATED_FRACTION,
      links=(explains("vanishing-gradients", why="saturated units pass almost no gradient back",
                      timing="overlap", place="upstream"),
             explains("collapsed-outputs", *OUTCOME,
                      why="saturated units stop the network from learning", timing="overlap")))
def saturated_activations(run: Run, *, min_saturated: float = 0.5, window: float = 1 / 3,
                          min_recordings: int = 3) -> list[Finding]:
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
        findings.append(saturated_activations.finding(
            WARNING, module, (int(recent.index[0]), int(recent.index[-1])),
            f"{fmt(100 * level)}% of the outputs of '{module}' ({kind}) sit within 1% of its "
            f"bounds over its last {len(recent)} recordings, where its gradient is near zero.",
            {"saturated_frac": level, "saturated_frac_first": float(series.iloc[0]),
             "recordings": len(recent)},
            "Normalize the inputs, use Xavier initialization or a normalization layer before "
            "this activation, or lower the learning rate."))
    return findings
