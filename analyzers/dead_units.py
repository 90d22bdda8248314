"""dead-units: a large share of a ReLU layer's units output zero for every input.

What it detects
    For each ReLU or ReLU6 module, the share of its units (channels of conv outputs, features
    otherwise) whose output is <= 0 for every sample of the batch (`dead_frac`), taken as the
    median over the last third of the recorded steps. A layer is flagged at `min_dead` or more,
    as an error at `error_dead` or more.

Why it matters
    A dead ReLU unit passes no gradient, so it never recovers: the layer's capacity is lost for
    the rest of training. Too high a learning rate, or a large negative bias, kills units in
    bulk early in training.

Example
    `features.relu2` has 88% of its 64 channels dead over the last 100 steps, against 3% at the
    first recorded step.

How to fix
    Lower the learning rate (or warm it up), use LeakyReLU/GELU, check the bias initialization,
    and put BatchNorm before the activation.

False positives
    With very small batches a unit can be silent for a whole batch by chance; the median over
    many recorded steps smooths that out. LeakyReLU, GELU and other activations that pass
    negative values are not judged. Functional `F.relu` calls are not modules and are not seen.
"""
from __future__ import annotations

from tracelab.analyzers._dynamics import OUTCOME, finite_stat, fmt, sustained
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import ACTIVATION, Needs

RELU_TYPES = ("ReLU", "ReLU6")


@rule(name="dead-units", code="TL203", requires=(Needs.ACTIVATIONS, Needs.MODEL), merge="layer",
      plot=Plot.DEAD_FRACTION,
      links=(explains("collapsed-outputs", why="dead units leave the outputs nothing to vary",
                      place="downstream"),
             explains("vanishing-gradients", "frozen-parameters",
                      why="dead ReLUs pass no gradient to the layers before them",
                      timing="overlap", place="upstream"),
             explains(*OUTCOME, why="a network with dead units stops learning", timing="overlap")))
def dead_units(run: Run, *, min_dead: float = 0.5, error_dead: float = 0.95,
               window: float = 1 / 3, min_recordings: int = 3) -> list[Finding]:
    types = run.module_types()
    dead = finite_stat(run, ACTIVATION, "dead_frac")
    modules = [m for m in dead.columns if types.get(m) in RELU_TYPES]
    findings = []
    for module, series, recent, level in sustained(dead, modules, min_dead, window,
                                                   min_recordings):
        first = float(series.iloc[0])
        onset = series[series >= min_dead]
        since = int(onset.index[0]) if len(onset) else int(recent.index[0])
        findings.append(dead_units.finding(
            ERROR if level >= error_dead else WARNING, module, (since, int(series.index[-1])),
            f"{fmt(100 * level)}% of the units of '{module}' ({types[module]}) are dead over "
            f"its last {len(recent)} recordings, against {fmt(100 * first)}% at step "
            f"{int(series.index[0])}.",
            {"dead_frac": level, "dead_frac_first": first, "dead_frac_max": float(series.max()),
             "recordings": len(recent)},
            "Lower or warm up the learning rate, switch to LeakyReLU/GELU, or add BatchNorm "
            "before this activation."))
    return findings
