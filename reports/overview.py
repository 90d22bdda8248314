"""The overview plots: curves per split, per-layer heatmaps, update ratio, activations, timing.

Each takes the run and the names the findings point at (marked on per-layer views), and returns
a Chart (reports/chart.py), or None when the run did not record what it draws.
"""
from __future__ import annotations

from typing import Iterable, Optional

import numpy as np
import pandas as pd

from tracelab.reports.plots import (GREY, LINES_UP_TO, MARK, SPLIT_COLORS, Chart, draw_heatmap,
                                    draw_series, figure, finite, heat_height, label, log_if_wide,
                                    outside_legend, unique, update_ratio)
from tracelab.core.schema import ACTIVATION, DATA_TIME, GRAD, LOSS_NAME, LR_PREFIX, STEP_TIME, TRAIN


def scalar_names(run) -> list[str]:
    """Metric names to plot: loss first, then the rest; timings and LR have their own panels."""
    names = [n for n in unique(run.scalars["name"])
             if not str(n).startswith(LR_PREFIX) and n not in (STEP_TIME, DATA_TIME)]
    return sorted(names, key=lambda n: (n != LOSS_NAME, str(n)))


def lr_names(run) -> list[str]:
    return [n for n in unique(run.scalars["name"]) if str(n).startswith(LR_PREFIX)]


def curves_figure(run, marked: Iterable[str] = (), *, max_panels: int = 8) -> Optional[Chart]:
    """Loss and each metric per split, then the learning rate of every param group."""
    names = scalar_names(run)[:max_panels]
    lrs = lr_names(run)
    panels = names + (["__lr__"] if lrs else [])
    if not panels:
        return None
    cols = 2 if len(panels) > 1 else 1
    rows = int(np.ceil(len(panels) / cols))
    fig = figure(2.3 * rows)
    axes = fig.grid(rows, cols)
    for ax, name in zip(axes, panels):
        if name == "__lr__":
            series = [run.scalar(lr, TRAIN) for lr in lrs[:6]]
            for lr, s in zip(lrs, series):
                draw_series(ax, s, name=f"group {lr[len(LR_PREFIX):]}")
            values = finite(pd.concat(series))
            if len(values) and values.min() == values.max():
                # A flat line's axis would show only rounding noise: say it in words.
                ax.title = f"learning rate: constant {values.iloc[0]:g}"
            else:
                ax.title = "learning rate"
                log_if_wide(ax, series)
            if len(lrs) > 1:
                ax.show_legend()
        else:
            series = []
            for split in run.splits():
                s = run.scalar(name, split)
                if len(s):
                    draw_series(ax, s, name=split, color=SPLIT_COLORS.get(split))
                    series.append(s)
            ax.title = label(name)
            log_if_wide(ax, series)
            ax.show_legend()
        ax.xlabel = "step"
    for ax in axes[len(panels):]:
        ax.visible = False
    return fig


def grad_norm_figure(run, marked: Iterable[str] = ()) -> Optional[Chart]:
    wide = run.stat(GRAD, "norm")
    if wide.empty:
        return None
    fig = figure(heat_height(wide.shape[1]))
    ax = fig.panel()
    draw_heatmap(ax, wide, marked=marked, cbar="log10 grad norm")
    ax.title = "gradient norm per layer (rows in model order)"
    return fig


def update_ratio_figure(run, marked: Iterable[str] = ()) -> Optional[Chart]:
    ratio = update_ratio(run)
    if ratio.empty or not np.isfinite(ratio.to_numpy()).any():
        return None
    if ratio.shape[1] <= 4:  # per-step ratios are noisy: more than a few lines is a tangle
        fig = figure(2.6)
        ax = fig.panel()
        for name in ratio.columns:
            marked_one = name in set(marked)
            draw_series(ax, ratio[name], name=name, lw=2 if marked_one else 1.1,
                        color=MARK if marked_one else None)
        ax.hline(1e-3, color=GREY)
        ax.note("≈1e-3 typical")
        log_if_wide(ax, [ratio[c] for c in ratio.columns])
        outside_legend(ax)
        ax.xlabel = "step"
    else:
        fig = figure(heat_height(ratio.shape[1]))
        ax = fig.panel()
        draw_heatmap(ax, ratio, marked=marked, cbar="log10 ‖Δw‖/‖w‖  (−3 typical)",
                     center=-3.0)
    ax.title = "update ratio ‖Δw‖/‖w‖ per parameter"
    return fig


def activation_figure(run, marked: Iterable[str] = ()) -> Optional[Chart]:
    """Dead fraction of every activation, and saturated fraction where it is defined."""
    dead = run.stat(ACTIVATION, "dead_frac")
    sat = run.stat(ACTIVATION, "saturated_frac")
    panels = [(f, t) for f, t in ((dead, "dead units (≤0 for the whole batch)"),
                                  (sat, "saturated outputs (Sigmoid/Tanh)"))
              if not f.empty and np.isfinite(f.to_numpy()).any()]
    panels = [(f.loc[:, np.isfinite(f.to_numpy()).any(axis=0)], t) for f, t in panels]
    if not panels:
        return None
    heights = [heat_height(f.shape[1]) if f.shape[1] > LINES_UP_TO else 2.4 for f, _ in panels]
    fig = figure(sum(heights))
    axes = fig.grid(len(panels), 1, height_ratios=heights)
    marked = set(marked)
    for ax, (frame, title) in zip(axes, panels):
        if frame.shape[1] > LINES_UP_TO:
            draw_heatmap(ax, frame, log=False, marked=marked, cbar="fraction",
                         vmin=0.0, vmax=1.0)
        else:
            for name in frame.columns:
                hit = name in marked
                draw_series(ax, frame[name], name=name, lw=2 if hit else 1.1,
                            color=MARK if hit else None)
            ax.set_limits("y", -0.03, 1.03)
            outside_legend(ax)
            ax.xlabel = "step"
        ax.title = f"activations: {title}"
    return fig


def timing_figure(run, marked: Iterable[str] = ()) -> Optional[Chart]:
    step_t, data_t = run.scalar(STEP_TIME, TRAIN), run.scalar(DATA_TIME, TRAIN)
    if not len(step_t) and not len(data_t):
        return None
    fig = figure(2.2)
    ax = fig.panel()
    if len(step_t):
        draw_series(ax, step_t, name="step time")
    if len(data_t):
        draw_series(ax, data_t, name="data wait")
    ax.title = "time per step (s)"
    ax.xlabel = "step"
    ax.show_legend()
    return fig


OVERVIEW = (
    ("Loss, metrics and learning rate", curves_figure,
     "Per split; long runs are binned: the line is the bin mean, the band its min–max."),
    ("Gradient norm per layer", grad_norm_figure,
     "Each row is a parameter in model order, each column a bin of steps. Cyan marks NaN/Inf."),
    ("Update ratio", update_ratio_figure,
     "‖Δw‖/‖w‖ per optimizer step; about 1e-3 is typical, far below means the layer barely "
     "learns, far above means it is being overwritten."),
    ("Activations", activation_figure,
     "Share of dead units (ReLU-like outputs that are ≤0 for every sample in the batch) and of "
     "saturated Sigmoid/Tanh outputs."),
    ("Step timing", timing_figure,
     "Wall-clock time per training step and the part spent waiting for data."),
)
