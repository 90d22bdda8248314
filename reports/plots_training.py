"""Finding plots of the training curves: loss, metrics, LR, non-finite values, ranks."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tracelab.core.findings import Diagnosis, Finding
from tracelab.reports.overview import timing_figure
from tracelab.reports.plots import MARK, draw_series, finite, label, shade, unique
from tracelab.reports.pointers import (canvas, curve, evidence_number, mentioned, nonfinite_rug,
                                       subject_scalar, total_norm, window)
from tracelab.core.schema import GRAD, LOSS_NAME, LR_PREFIX, TRAIN, WEIGHT



def scalar_window(d: Diagnosis, f: Finding) -> Optional[Figure]:
    """The named scalar (the loss by default) with the finding's steps shaded."""
    run = d.run
    name, splits = subject_scalar(run, f)
    fig = canvas(2.8)
    ax = fig.subplots()
    if not curve(ax, run, name, splits, emphasize=splits[:1]):
        return None
    shade(ax, f.steps, "finding" if f.steps and f.steps[0] == f.steps[1] else "")
    ax.set_title(f"{label(name)} ({', '.join(label(s) for s in splits)}); finding's steps "
                 "shaded")
    return fig


def learning_rate(d: Diagnosis, f: Finding) -> Optional[Figure]:
    """The train loss over the whole run with the learning rate under it: what a too-high
    rate does to the loss, step for step."""
    run = d.run
    loss = run.loss(TRAIN)
    lrs = [n for n in unique(run.scalars["name"]) if str(n).startswith(LR_PREFIX)]
    if not len(loss) or not lrs:
        return scalar_window(d, f)
    fig = canvas(4.0)
    top, bottom = fig.subplots(2, 1, sharex=True)
    draw_series(top, loss, name="train loss", color=MARK)
    top.set_title("train loss")
    draw_series(bottom, run.scalar(lrs[0], TRAIN), name=label(lrs[0]))
    bottom.set_title(f"learning rate ({label(lrs[0])})")
    bottom.set_xlabel("step")
    return fig


def loss_oscillation(d: Diagnosis, f: Finding) -> Optional[Figure]:
    """The loss with the swinging stretch shaded, its 10th-90th percentile band, and the best
    level it had reached before (when the finding gives them)."""
    fig = scalar_window(d, f)
    if fig is None or not f.steps:
        return fig
    ax = fig.axes[0]
    p10, p90 = evidence_number(f, "p10"), evidence_number(f, "p90")
    if p10 is not None and p90 is not None:
        ax.fill_between(list(f.steps), [p10] * 2, [p90] * 2, color=MARK, alpha=0.12, lw=0,
                        label="10th-90th percentile")
    best = evidence_number(f, "best_level", "best")
    if best is not None:
        ax.axhline(best, color="#2e7d32", ls="--", lw=1.1, label="best level reached")
    ax.legend(loc="best")
    return fig


def loss_spike(d: Diagnosis, f: Finding) -> Optional[Figure]:
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
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False).ravel()
    a, b = f.steps
    for ax, (title, s) in zip(axes, panels):
        part = s[(s.index >= lo) & (s.index <= hi)]
        draw_series(ax, part, color=MARK if title == "train loss" else None)
        _focus(ax, finite(part), finite(part[(part.index >= a) & (part.index <= b)]))
        shade(ax, f.steps)
        ax.set_title(title)
    axes[-1].set_xlabel("step")
    return fig


def _focus(ax, values: pd.Series, at: pd.Series) -> None:
    """Mark the finding's peak and keep the y range on it: a larger transient elsewhere (the
    first steps of training) would otherwise flatten the spike into the axis."""
    if not len(values) or not len(at):
        return
    peak = float(at.max())
    ax.plot([at.idxmax()], [peak], "o", color=MARK, ms=5, zorder=6)
    top = max(peak, float(values.quantile(0.98)))
    if values.max() > 1.5 * top:
        low = float(values.min())
        ax.set_ylim(low - 0.05 * (top - low), top + 0.15 * (top - low))
        ax.annotate("y axis clipped", (1.0, 1.0), xycoords="axes fraction", ha="right",
                    va="bottom", fontsize=7.5, color="#555")


def nonfinite_values(d: Diagnosis, f: Finding) -> Optional[Figure]:
    """Every recorded curve with the first non-finite step marked and NaN/Inf steps ticked."""
    run = d.run
    panels = []
    loss = run.loss(TRAIN)
    if len(loss):
        panels.append(("train loss", loss))
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
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False).ravel()
    for ax, (title, s) in zip(axes, panels):
        draw_series(ax, s)
        nonfinite_rug(ax, s)
        if first is not None:
            ax.axvline(first, color=MARK, ls="--", lw=1.3)
        ax.set_title(title)
    if first is not None:
        axes[0].annotate(f"first non-finite: step {first}", (first, 1.0),
                         xycoords=("data", "axes fraction"), color=MARK, fontsize=7.5,
                         ha="right", va="bottom", annotation_clip=False)
    axes[-1].set_xlabel("step")
    return fig


def overfitting(d: Diagnosis, f: Finding) -> Optional[Figure]:
    run = d.run
    fig = canvas(2.8)
    ax = fig.subplots()
    splits = run.splits()
    if not curve(ax, run, LOSS_NAME, splits, emphasize=[s for s in splits if s != TRAIN][:1]):
        return None
    best = evidence_number(f, "best_step")
    if best is not None:
        ax.axvline(best, color="#2e7d32", lw=1.3, ls="--")
        ax.annotate(f" best step {int(best)}", (best, 0.97), xycoords=("data", "axes fraction"),
                    color="#2e7d32", fontsize=8, va="top", ha="left")
    shade(ax, f.steps)
    ax.set_title("loss per split; the stretch since the best validation loss is shaded")
    return fig


def metric_stagnation(d: Diagnosis, f: Finding) -> Optional[Figure]:
    """The metric on every split, on its full 0-1 scale when it is a rate, with chance marked."""
    run = d.run
    name, splits = subject_scalar(run, f)
    fig = canvas(2.8)
    ax = fig.subplots()
    drawn = curve(ax, run, name, run.splits(), emphasize=splits[:1])
    if not drawn:
        return None
    values = finite(pd.concat(drawn))
    if len(values) and values.min() >= 0 and values.max() <= 1:
        ax.set_ylim(-0.02, 1.02)
    chance = evidence_number(f, "chance")
    if chance is not None:
        ax.axhline(chance, color=MARK, ls=":", lw=1.3)
        ax.annotate(f"chance {chance:.3g}", (0.005, chance), xycoords=("axes fraction", "data"),
                    color=MARK, fontsize=8, va="bottom")
    shade(ax, f.steps)
    ax.legend(loc="best")
    ax.set_title(f"{label(name)} per split, chance level dotted")
    return fig


def run_aborted(d: Diagnosis, f: Finding) -> Optional[Figure]:
    run = d.run
    fig = canvas(2.4)
    ax = fig.subplots()
    if not curve(ax, run, LOSS_NAME, run.splits(), emphasize=[TRAIN]):
        return None
    state = run.status.get("state", "stopped")
    if f.steps:
        ax.axvline(f.steps[1], color=MARK, ls="--", lw=1.3)
        ax.annotate(f"{state} after step {f.steps[1]}", (f.steps[1], 1.0),
                    xycoords=("data", "axes fraction"), color=MARK, fontsize=7.5,
                    ha="right", va="bottom", annotation_clip=False)
    ax.set_title("loss up to the last recorded step")
    return fig


def input_pipeline_bound(d: Diagnosis, f: Finding) -> Optional[Figure]:
    fig = timing_figure(d.run)
    if fig is not None:
        shade(fig.axes[0], f.steps)
    return fig


def rank_divergence(d: Diagnosis, f: Finding) -> Optional[Figure]:
    sc = d.run.scalars
    if "rank" not in sc:
        return scalar_window(d, f)
    name, _ = subject_scalar(d.run, f)
    rows = sc[(sc["name"] == name) & (sc["split"] == TRAIN)]
    fig = canvas(2.8)
    ax = fig.subplots()
    for rank, grp in rows.groupby("rank"):
        draw_series(ax, grp.groupby("step")["value"].last(), name=f"rank {rank}")
    shade(ax, f.steps)
    ax.legend(loc="best", ncols=2)
    ax.set_title(f"{label(name)} per rank")
    ax.set_xlabel("step")
    return fig
