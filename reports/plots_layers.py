"""Finding plots of per-layer statistics: gradients, activations, updates, outputs."""
from __future__ import annotations

from typing import Optional

import numpy as np
from matplotlib.figure import Figure

from tracelab.core.findings import Diagnosis, Finding
from tracelab.reports.plots import (LINES_UP_TO, MARK, draw_heatmap, draw_series, finite,
                                    heat_height, label, log_if_wide, set_log, shade,
                                    update_ratio)
from tracelab.reports.pointers import PlotFn, canvas, evidence_number, layer_lines, mentioned
from tracelab.core.schema import ACTIVATION, GRAD, WEIGHT



def gradient_layers(d: Diagnosis, f: Finding) -> Optional[Figure]:
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
    left, right = fig.subplots(1, 2, width_ratios=[1, 1.3])
    y = np.arange(n)
    vals = med.to_numpy(dtype=float)
    colors = [MARK if c in marked else "#7a9cc6" for c in med.index]
    left.barh(y, np.where(vals > 0, vals, np.nan), color=colors)
    set_log(left, "x")
    left.invert_yaxis()
    step = max(1, int(np.ceil(n / 24)))
    ticks = list(range(0, n, step)) + [i for i, c in enumerate(med.index)
                                        if c in marked and i % step]
    left.set_yticks(ticks, [label(med.index[i], 32) for i in ticks],
                    fontsize=7 if n <= 30 else 6)
    for t, i in zip(left.get_yticklabels(), ticks):
        if med.index[i] in marked:
            t.set_color(MARK)
    left.set_title("median grad norm per layer")
    left.grid(axis="y", visible=False)
    layer_lines(right, wide, marked)
    if (finite(wide.stack()) > 0).any():  # norms across layers: always a log scale
        set_log(right)
    shade(right, f.steps)
    right.set_title("grad norm over steps")
    right.set_xlabel("step")
    return fig


def activation_frac(stat: str, title: str) -> PlotFn:
    def plot(d: Diagnosis, f: Finding) -> Optional[Figure]:
        wide = d.run.stat(ACTIVATION, stat)
        wide = wide.loc[:, np.isfinite(wide.to_numpy()).any(axis=0)] if not wide.empty else wide
        if wide.empty:
            return None
        marked = mentioned(f, wide.columns)
        if not marked and wide.shape[1] > LINES_UP_TO:
            fig = canvas(heat_height(wide.shape[1]))
            ax = fig.subplots()
            draw_heatmap(fig, ax, wide, log=False, cbar="fraction", vmin=0.0, vmax=1.0)
        else:
            fig = canvas(2.8)
            ax = fig.subplots()
            layer_lines(ax, wide, marked or list(wide.columns))
            ax.set_ylim(-0.03, 1.03)
            shade(ax, f.steps)
            ax.set_xlabel("step")
        ax.set_title(title)
        return fig
    plot.__name__ = f"activation_{stat}"
    return plot


def frozen_parameters(d: Diagnosis, f: Finding) -> Optional[Figure]:
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
    axes = fig.subplots(1, len(panels), squeeze=False).ravel()
    for ax, (title, wide) in zip(axes, panels):
        layer_lines(ax, wide, [m for m in marked if m in wide.columns])
        ax.set_title(title)
        ax.set_xlabel("step")
    return fig


def update_ratio_layers(d: Diagnosis, f: Finding) -> Optional[Figure]:
    ratio = update_ratio(d.run)
    if ratio.empty:
        return None
    marked = mentioned(f, ratio.columns)
    fig = canvas(2.8)
    ax = fig.subplots()
    layer_lines(ax, ratio, marked)
    if (finite(ratio.stack()) > 0).any():
        set_log(ax)
    ax.axhline(1e-3, color="#555", ls=":", lw=1)
    ax.annotate("≈1e-3 typical", (0, 1e-3), xycoords=("axes fraction", "data"), fontsize=7,
                color="#555", va="bottom")
    shade(ax, f.steps)
    ax.set_title("update ratio ‖Δw‖/‖w‖: named parameters vs the others")
    ax.set_xlabel("step")
    return fig


def collapsed_outputs(d: Diagnosis, f: Finding) -> Optional[Figure]:
    """The output layer's value range (max − min) over steps."""
    run = d.run
    names = run.names(ACTIVATION)
    if not names:
        return None
    target = (mentioned(f, names) or names[-1:])[0]
    rng = run.stat(ACTIVATION, "max")[target] - run.stat(ACTIVATION, "min")[target]
    fig = canvas(2.6)
    ax = fig.subplots()
    draw_series(ax, rng, name=f"{target}: max − min", color=MARK)
    limit = evidence_number(f, "threshold", "min_range", "limit")
    if limit is not None:
        ax.axhline(limit, color="#555", ls=":", lw=1)
    log_if_wide(ax, [rng])
    shade(ax, f.steps)
    ax.legend(loc="best")
    ax.set_title(f"output range of {label(target)}")
    ax.set_xlabel("step")
    return fig
