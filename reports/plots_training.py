"""Finding plots of the training curves: loss, metrics, LR, non-finite values, ranks."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from tracelab.core.findings import Diagnosis, Finding
from tracelab.reports.overview import timing_figure
from tracelab.reports.plots import GREEN, MARK, Chart, draw_series, finite, label, shade, unique
from tracelab.reports.pointers import (canvas, curve, evidence_number, mentioned, nonfinite_rug,
                                       subject_scalar, total_norm, window)
from tracelab.core.schema import GRAD, LOSS_NAME, LR_PREFIX, TRAIN, WEIGHT


def scalar_window(d: Diagnosis, f: Finding) -> Optional[Chart]:
    """The named scalar (the loss by default) with the finding's steps shaded."""
    run = d.run
    name, splits = subject_scalar(run, f)
    fig = canvas(2.8)
    ax = fig.panel()
    if not curve(ax, run, name, splits, emphasize=splits[:1]):
        return None
    shade(ax, f.steps, "finding" if f.steps and f.steps[0] == f.steps[1] else "")
    ax.title = (f"{label(name)} ({', '.join(label(s) for s in splits)}); finding's steps "
                "shaded")
    return fig


def learning_rate(d: Diagnosis, f: Finding) -> Optional[Chart]:
    """The train loss over the whole run with the learning rate under it: what a too-high
    rate does to the loss, step for step."""
    run = d.run
    loss = run.loss(TRAIN)
    lrs = [n for n in unique(run.scalars["name"]) if str(n).startswith(LR_PREFIX)]
    if not len(loss) or not lrs:
        return scalar_window(d, f)
    fig = canvas(4.0)
    top, bottom = fig.grid(2, 1, sharex=True)
    draw_series(top, loss, name="train loss", color=MARK)
    top.title = "train loss"
    draw_series(bottom, run.scalar(lrs[0], TRAIN), name=label(lrs[0]))
    bottom.title = f"learning rate ({label(lrs[0])})"
    bottom.xlabel = "step"
    return fig


def loss_oscillation(d: Diagnosis, f: Finding) -> Optional[Chart]:
    """The loss with the swinging stretch shaded, its 10th-90th percentile band, and the best
    level it had reached before (when the finding gives them)."""
    fig = scalar_window(d, f)
    if fig is None or not f.steps:
        return fig
    ax = fig.panels[0]
    p10, p90 = evidence_number(f, "p10"), evidence_number(f, "p90")
    if p10 is not None and p90 is not None:
        ax.band(list(f.steps), [p10] * 2, [p90] * 2, color=MARK, alpha=0.12,
                label="10th-90th percentile")
    best = evidence_number(f, "best_level", "best")
    if best is not None:
        ax.hline(best, color=GREEN, label="best level reached")
    ax.show_legend()
    return fig


def loss_spike(d: Diagnosis, f: Finding) -> Optional[Chart]:
    """The loss around the spike, with the LR and the gradient norm on the same steps."""
    run = d.run
    loss = run.loss(TRAIN)
    if not len(loss) or not f.steps:
        return scalar_window(d, f)
    lo, hi = window(f, loss.index, pad=10, least=100)
    panels = [("train loss", loss)]
    lrs = [n for n in unique(run.scalars["name"]) if str(n).startswith(LR_PREFIX)]
    if lrs:
        panels.append(("learning rate", run.scalar(lrs[0], TRAIN)))
    layers = mentioned(f, run.names(GRAD))
    if layers:
        panels.append((f"grad norm: {label(layers[0])}", run.stat(GRAD, "norm")[layers[0]]))
    else:
        total = total_norm(run, GRAD)
        if len(total):
            panels.append(("total grad norm", total))
    fig = canvas(1.6 * len(panels) + 0.6)
    axes = fig.grid(len(panels), 1, sharex=True)
    a, b = f.steps
    for ax, (title, s) in zip(axes, panels):
        part = s[(s.index >= lo) & (s.index <= hi)]
        draw_series(ax, part, color=MARK if title == "train loss" else None)
        _focus(ax, finite(part), finite(part[(part.index >= a) & (part.index <= b)]))
        shade(ax, f.steps)
        ax.title = title
    axes[-1].xlabel = "step"
    return fig


def _focus(ax, values: pd.Series, at: pd.Series) -> None:
    """Mark the finding's peak and keep the y range on it: a larger transient elsewhere (the
    first steps of training) would otherwise flatten the spike into the axis."""
    if not len(values) or not len(at):
        return
    peak = float(at.max())
    ax.points([at.idxmax()], [peak], color=MARK)
    top = max(peak, float(values.quantile(0.98)))
    if values.max() > 1.5 * top:
        low = float(values.min())
        ax.set_limits("y", low - 0.05 * (top - low), top + 0.15 * (top - low))
        ax.note("y axis clipped")


def nonfinite_values(d: Diagnosis, f: Finding) -> Optional[Chart]:
    """Every recorded curve with the first non-finite step marked and NaN/Inf steps ticked."""
    run = d.run
    panels = []
    loss = run.loss(TRAIN)
    if len(loss):
        panels.append(("train loss", loss))
    if f.evidence.get("source") == "eval loss":  # subject: "<split> loss"
        split = f.subject.rsplit(" ", 1)[0]
        panels.append((f"{split} loss", run.loss(split)))
    for kind, title in ((GRAD, "total grad norm"), (WEIGHT, "total weight norm")):
        s = total_norm(run, kind)
        if len(s):
            bad = run.stat(kind, "nan_count").sum(axis=1) + run.stat(kind, "inf_count").sum(axis=1)
            panels.append((title, s.where(bad.reindex(s.index).fillna(0) == 0, np.nan)))
    inp = run.inputs
    if len(inp):
        bad = (inp["nan_count"].fillna(0) + inp["inf_count"].fillna(0)).groupby(inp["step"]).sum()
        title = "non-finite input values per batch" + ("" if bad.any() else ": none")
        panels.append((title, bad.astype(float)))
    if not panels:
        return None
    first = f.steps[0] if f.steps else None
    fig = canvas(1.45 * len(panels) + 0.6)
    axes = fig.grid(len(panels), 1, sharex=True)
    for ax, (title, s) in zip(axes, panels):
        draw_series(ax, s)
        nonfinite_rug(ax, s)
        if first is not None:
            ax.vline(first, color=MARK)
        ax.title = title
    if first is not None:
        axes[0].note(f"first non-finite: step {first}")
    axes[-1].xlabel = "step"
    return fig


def overfitting(d: Diagnosis, f: Finding) -> Optional[Chart]:
    run = d.run
    fig = canvas(2.8)
    ax = fig.panel()
    splits = run.splits()
    if not curve(ax, run, LOSS_NAME, splits, emphasize=[s for s in splits if s != TRAIN][:1]):
        return None
    best = evidence_number(f, "best_step")
    if best is not None:
        ax.vline(best, color=GREEN)
        ax.note(f"best step {int(best)}")
    shade(ax, f.steps)
    ax.title = "loss per split; the stretch since the best validation loss is shaded"
    return fig


def metric_stagnation(d: Diagnosis, f: Finding) -> Optional[Chart]:
    """The metric on every split, on its full 0-1 scale when it is a rate, with chance marked."""
    run = d.run
    name, splits = subject_scalar(run, f)
    fig = canvas(2.8)
    ax = fig.panel()
    drawn = curve(ax, run, name, run.splits(), emphasize=splits[:1])
    if not drawn:
        return None
    values = finite(pd.concat(drawn))
    if len(values) and values.min() >= 0 and values.max() <= 1:
        ax.set_limits("y", -0.02, 1.02)
    chance = evidence_number(f, "chance")
    if chance is not None:
        ax.hline(chance, color=MARK)
        ax.note(f"chance {chance:.3g}")
    shade(ax, f.steps)
    ax.show_legend()
    ax.title = f"{label(name)} per split, chance level dotted"
    return fig


def run_aborted(d: Diagnosis, f: Finding) -> Optional[Chart]:
    run = d.run
    fig = canvas(2.4)
    ax = fig.panel()
    if not curve(ax, run, LOSS_NAME, run.splits(), emphasize=[TRAIN]):
        return None
    state = run.status.get("state", "stopped")
    if f.steps:
        ax.vline(f.steps[1], color=MARK)
        ax.note(f"{state} after step {f.steps[1]}")
    ax.title = "loss up to the last recorded step"
    return fig


def input_pipeline_bound(d: Diagnosis, f: Finding) -> Optional[Chart]:
    fig = timing_figure(d.run)
    if fig is not None:
        shade(fig.panels[0], f.steps)
    return fig


def rank_divergence(d: Diagnosis, f: Finding) -> Optional[Chart]:
    sc = d.run.scalars
    if "rank" not in sc:
        return scalar_window(d, f)
    name, _ = subject_scalar(d.run, f)
    rows = sc[(sc["name"] == name) & (sc["split"] == TRAIN)]
    fig = canvas(2.8)
    ax = fig.panel()
    for rank, grp in rows.groupby("rank"):
        draw_series(ax, grp.groupby("step")["value"].last(), name=f"rank {rank}")
    shade(ax, f.steps)
    ax.show_legend()
    ax.title = f"{label(name)} per rank"
    ax.xlabel = "step"
    return fig
