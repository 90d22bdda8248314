"""One plot per finding, aimed at its evidence.

`FINDING_PLOTS` maps each rule name to the function that draws its findings (None: the
evidence table says it all). A rule missing from the map gets `generic`, which plots whatever
the finding's subject names. Every function takes (diagnosis, finding) and returns a Chart
(reports/chart.py) or None; a plot that breaks on odd data never breaks the report (see
`finding_figure`).
"""
from __future__ import annotations

from typing import Optional

import pandas as pd

from tracelab.core.findings import Diagnosis, Finding
from tracelab.reports import plots_inputs as inputs
from tracelab.reports import plots_layers as layers
from tracelab.reports import plots_training as training
from tracelab.reports.plots import Chart, log_if_wide, shade
from tracelab.reports.pointers import PlotFn, canvas, layer_lines, mentioned
from tracelab.core.schema import ACTIVATION, GRAD, UPDATE, WEIGHT

__all__ = ["FINDING_PLOTS", "finding_figure", "generic", "mentioned"]


def generic(d: Diagnosis, f: Finding) -> Optional[Chart]:
    """The tensors or scalar the finding names over steps; else the loss, its steps shaded."""
    run = d.run
    for kind in (GRAD, WEIGHT, UPDATE, ACTIVATION):
        wide = run.stat(kind, "norm") if run.names(kind) else pd.DataFrame()
        marked = mentioned(f, wide.columns) if not wide.empty else []
        if marked:
            fig = canvas(2.8)
            ax = fig.panel()
            layer_lines(ax, wide, marked)
            log_if_wide(ax, [wide[m] for m in marked])
            shade(ax, f.steps)
            ax.title = f"{kind} norm: named entries vs the others"
            ax.xlabel = "step"
            return fig
    return training.scalar_window(d, f)


FINDING_PLOTS: dict[str, Optional[PlotFn]] = {
    "loss-oscillation": training.loss_oscillation,
    "loss-spike": training.loss_spike,
    "loss-plateau": training.scalar_window,
    "nonfinite-values": training.nonfinite_values,
    "overfitting": training.overfitting,
    "metric-stagnation": training.metric_stagnation,
    "run-aborted": training.run_aborted,
    "vanishing-gradients": layers.gradient_layers,
    "exploding-gradients": layers.gradient_layers,
    "dead-units": layers.activation_frac("dead_frac", "dead-unit fraction: named modules vs "
                                         "the others"),
    "saturated-activations": layers.activation_frac("saturated_frac", "saturated fraction: "
                                                    "named modules vs the others"),
    "frozen-parameters": layers.frozen_parameters,
    "update-ratio": layers.update_ratio_layers,
    "collapsed-outputs": layers.collapsed_outputs,
    "train-val-mismatch": inputs.train_val_mismatch,
    "input-collapse": inputs.input_collapse,
    "unnormalized-inputs": inputs.unnormalized_inputs,
    "nondeterminism-risk": None,   # flags in the environment table are the evidence
    "gpu-unused": None,
    "input-pipeline-bound": training.input_pipeline_bound,
    "rank-divergence": training.rank_divergence,
    "learning-rate-too-high": training.learning_rate,
    "loss-collapse": training.scalar_window,
    "missing-zero-grad": None,   # the recorder's observation of .grad is the evidence
    "eval-in-train-mode": None,
    "target-problems": None,
    "amp-overflow": None,
    "train-val-overlap": None,
}


def finding_figure(d: Diagnosis, f: Finding) -> tuple[Optional[Chart], str]:
    """(figure or None, note). A plot that fails falls back to `generic`, then to none."""
    fn = FINDING_PLOTS.get(f.rule, generic)
    if fn is None:
        return None, ""
    note = ""
    for attempt in (fn, generic) if fn is not generic else (generic,):
        try:
            fig = attempt(d, f)
        except Exception as exc:  # odd data must cost a plot, never the report
            note = note or f"plot unavailable ({type(exc).__name__}: {exc})"
            continue
        return fig, note if fig is None else ""
    return None, note
