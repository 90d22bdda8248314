"""One plot per finding, aimed at its evidence.

Each rule declares the kind of plot its findings get (`@rule(plot=Plot...)`,
tracelab.core.rules); `PLOTS` maps each kind to the function that draws it (None: the evidence
table says it all). A finding whose rule the diagnosis does not know gets `generic`, which
plots whatever the finding's subject names. Every function takes (diagnosis, finding) and
returns a Chart (reports/chart.py) or None; a plot that breaks on odd data never breaks the
report (see `finding_figure`).
"""
from __future__ import annotations

from typing import Optional

import pandas as pd

from tracelab.core.findings import Diagnosis, Finding
from tracelab.core.rules import Plot
from tracelab.reports import plots_inputs as inputs
from tracelab.reports import plots_layers as layers
from tracelab.reports import plots_training as training
from tracelab.reports.plots import Chart, log_if_wide, shade
from tracelab.reports.pointers import PlotFn, canvas, layer_lines, mentioned
from tracelab.core.schema import ACTIVATION, GRAD, UPDATE, WEIGHT

__all__ = ["PLOTS", "finding_figure", "generic", "mentioned", "plot_kind"]


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


PLOTS: dict[Plot, Optional[PlotFn]] = {
    Plot.SUBJECT: generic,
    Plot.NONE: None,
    Plot.LOSS: training.scalar_window,
    Plot.SCALAR: training.scalar_window,
    Plot.LOSS_SWINGS: training.loss_oscillation,
    Plot.LOSS_JUMP: training.loss_spike,
    Plot.LEARNING_RATE: training.learning_rate,
    Plot.NONFINITE: training.nonfinite_values,
    Plot.TRAIN_VS_EVAL: training.overfitting,
    Plot.METRIC: training.metric_stagnation,
    Plot.RUN_END: training.run_aborted,
    Plot.GRADIENT_LAYERS: layers.gradient_layers,
    Plot.DEAD_FRACTION: layers.activation_frac("dead_frac", "dead-unit fraction: named modules "
                                               "vs the others"),
    Plot.SATURATED_FRACTION: layers.activation_frac("saturated_frac", "saturated fraction: "
                                                    "named modules vs the others"),
    Plot.WEIGHT_CHANGE: layers.frozen_parameters,
    Plot.UPDATE_RATIOS: layers.update_ratio_layers,
    Plot.OUTPUT_SPREAD: layers.collapsed_outputs,
    Plot.SPLIT_DISTRIBUTIONS: inputs.train_val_mismatch,
    Plot.FEATURE_SPREAD: inputs.input_collapse,
    Plot.INPUT_SCALE: inputs.unnormalized_inputs,
    Plot.STEP_TIME: training.input_pipeline_bound,
    Plot.RANKS: training.rank_divergence,
}


def plot_kind(d: Diagnosis, f: Finding) -> Plot:
    """The kind of plot the finding's rule declares; `Plot.SUBJECT` for a rule the diagnosis
    does not know."""
    spec = d.rules.get(f.rule)
    return spec.plot if spec is not None else Plot.SUBJECT


def finding_figure(d: Diagnosis, f: Finding) -> tuple[Optional[Chart], str]:
    """(figure or None, note). A plot that fails falls back to `generic`, then to none."""
    fn = PLOTS[plot_kind(d, f)]
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
