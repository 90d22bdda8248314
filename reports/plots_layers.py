"""Finding plots of per-layer statistics: gradients, activations, updates, outputs."""
from __future__ import annotations

from typing import Optional

import numpy as np

from tracelab.core.findings import Diagnosis, Finding
from tracelab.reports.plots import (BAR, GREY, LINES_UP_TO, MARK, Chart, any_positive,
                                    draw_heatmap, draw_series, heat_height, label, log_if_wide,
                                    shade, update_ratio)
from tracelab.reports.pointers import PlotFn, canvas, evidence_number, layer_lines, mentioned
from tracelab.core.schema import ACTIVATION, GRAD, WEIGHT


def gradient_layers(d: Diagnosis, f: Finding) -> Optional[Chart]:
    """Median grad norm per layer over the finding's steps (named layers in red), and the named
    layers over time against the others."""
    run = d.run
    wide = run.stat(GRAD, "norm")
    if wide.empty:
        return None
    part = wide.loc[f.steps[0]:f.steps[1]] if f.steps else wide
    med = part.median() if len(part) else wide.median()
    # Messages also name the reference layers ("x the largest layer 'fc3'"): keep only the
    # named layers on the finding's side of the median.
    middle = med.median()
    low = f.rule != "exploding-gradients"
    marked = [m for m in mentioned(f, wide.columns)
              if (med[m] <= middle if low else med[m] >= middle)]
    n = len(med)
    fig = canvas(min(5.0, max(2.8, heat_height(n))))
    left, right = fig.grid(1, 2, width_ratios=[1, 1.3])
    y = np.arange(n)
    vals = med.to_numpy(dtype=float)
    colors = [MARK if c in marked else BAR for c in med.index]
    left.hbars(y, np.where(vals > 0, vals, np.nan), colors=colors)
    left.log("x")
    left.invert_y()
    step = max(1, int(np.ceil(n / 24)))
    ticks = list(range(0, n, step)) + [i for i, c in enumerate(med.index)
                                        if c in marked and i % step]
    left.set_yticks(ticks, [label(med.index[i], 32) for i in ticks],
                    marked=[i for i in ticks if med.index[i] in marked])
    left.title = "median grad norm per layer"
    layer_lines(right, wide, marked)
    if any_positive(wide):  # norms across layers: always a log scale
        right.log("y")
    shade(right, f.steps)
    right.title = "grad norm over steps"
    right.xlabel = "step"
    return fig


def activation_frac(stat: str, title: str) -> PlotFn:
    def plot(d: Diagnosis, f: Finding) -> Optional[Chart]:
        wide = d.run.stat(ACTIVATION, stat)
        wide = wide.loc[:, np.isfinite(wide.to_numpy()).any(axis=0)] if not wide.empty else wide
        if wide.empty:
            return None
        marked = mentioned(f, wide.columns)
        if not marked and wide.shape[1] > LINES_UP_TO:
            fig = canvas(heat_height(wide.shape[1]))
            ax = fig.panel()
            draw_heatmap(ax, wide, log=False, cbar="fraction", vmin=0.0, vmax=1.0)
        else:
            fig = canvas(2.8)
            ax = fig.panel()
            layer_lines(ax, wide, marked or list(wide.columns))
            ax.set_limits("y", -0.03, 1.03)
            shade(ax, f.steps)
            ax.xlabel = "step"
        ax.title = title
        return fig
    plot.__name__ = f"activation_{stat}"
    return plot


def frozen_parameters(d: Diagnosis, f: Finding) -> Optional[Chart]:
    """Weight norm relative to its first value (flat at 0 when frozen) and the grad norm."""
    run = d.run
    w = run.stat(WEIGHT, "norm")
    if w.empty:
        return None
    marked = mentioned(f, w.columns)
    first = w.bfill().iloc[0].replace(0, np.nan)
    rel = (w / first - 1).abs()
    g = run.stat(GRAD, "norm")
    panels = [("weight norm change vs step 0 |‖w‖/‖w₀‖ − 1|", rel)]
    if not g.empty:
        panels.append(("grad norm", g))
    fig = canvas(2.8)
    axes = fig.grid(1, len(panels))
    for ax, (title, wide) in zip(axes, panels):
        layer_lines(ax, wide, [m for m in marked if m in wide.columns])
        ax.title = title
        ax.xlabel = "step"
    return fig


def update_ratio_layers(d: Diagnosis, f: Finding) -> Optional[Chart]:
    ratio = update_ratio(d.run)
    if ratio.empty:
        return None
    marked = mentioned(f, ratio.columns)
    fig = canvas(2.8)
    ax = fig.panel()
    layer_lines(ax, ratio, marked)
    if any_positive(ratio):
        ax.log("y")
    ax.hline(1e-3, color=GREY)
    ax.note("≈1e-3 typical")
    shade(ax, f.steps)
    ax.title = "update ratio ‖Δw‖/‖w‖: named parameters vs the others"
    ax.xlabel = "step"
    return fig


def collapsed_outputs(d: Diagnosis, f: Finding) -> Optional[Chart]:
    """The output layer's value range (max − min) over steps."""
    run = d.run
    names = run.names(ACTIVATION)
    if not names:
        return None
    target = (mentioned(f, names) or names[-1:])[0]
    rng = run.stat(ACTIVATION, "max")[target] - run.stat(ACTIVATION, "min")[target]
    fig = canvas(2.6)
    ax = fig.panel()
    draw_series(ax, rng, name=f"{target}: max − min", color=MARK)
    limit = evidence_number(f, "threshold", "min_range", "limit")
    if limit is not None:
        ax.hline(limit, color=GREY)
    log_if_wide(ax, [rng])
    shade(ax, f.steps)
    ax.show_legend()
    ax.title = f"output range of {label(target)}"
    ax.xlabel = "step"
    return fig
