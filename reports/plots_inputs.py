"""Finding plots of the input features: distributions per split, cardinality, ranges."""
from __future__ import annotations

from typing import Optional

import numpy as np

from tracelab.core.findings import Diagnosis, Finding
from tracelab.reports.plots import (BAR, FINDING_WIDTH, GREEN, MARK, SPLIT_COLORS, Chart,
                                    draw_series, finite, label, shade)
from tracelab.reports.pointers import canvas, features, mentioned
from tracelab.core.schema import TRAIN



def train_val_mismatch(d: Diagnosis, f: Finding) -> Optional[Chart]:
    """Distributions per split of the worst mismatched features (reservoir samples)."""
    run = d.run
    feats = features(d, f)
    if not feats:
        return None
    fig = canvas(2.5, min(FINDING_WIDTH, 3.2 * len(feats) + 0.4))
    axes = fig.grid(1, len(feats))
    sm, inp = run.samples, run.inputs
    for ax, feat in zip(axes, feats):
        rows = sm[sm["feature"] == feat]
        if len(rows):
            vals = finite(rows["value"])
            edges = np.histogram_bin_edges(vals, bins=40) if len(vals) else 10
            for split, grp in rows.groupby("split", sort=False):
                ax.hist(finite(grp["value"]), bins=edges, density=True, alpha=0.45,
                        color=SPLIT_COLORS.get(split), label=label(split))
            ax.ylabel = "density"
        else:
            stats = inp[inp["feature"] == feat].groupby("split")[["mean", "std", "min", "max"]]\
                .mean()
            for i, (split, r) in enumerate(stats.iterrows()):  # mean ± std, and min to max
                color = SPLIT_COLORS.get(split)
                color = ax.line([i, i], [r["min"], r["max"]], color=color, alpha=0.4, width=6)
                ax.points([i], [r["mean"]], color=color, label=label(split))
                ax.line([i, i], [r["mean"] - r["std"], r["mean"] + r["std"]], color=color,
                        width=1.2)
        ax.title = label(feat, 36)
        ax.show_legend()
    return fig


def input_collapse(d: Diagnosis, f: Finding) -> Optional[Chart]:
    """The collapsed feature per split (and in the baseline run): distinct values per batch
    over steps, beside where its sampled values fall (the time of day, for datetimes: a cast
    to dates puts every value at midnight)."""
    feats = features(d, f, limit=1)
    if not feats:
        return None
    feat = feats[0]
    sources = [("", d.run)] + ([("baseline ", d.baseline)] if d.baseline is not None else [])
    fig = canvas(2.8)
    left, right = fig.grid(1, 2)
    is_time = False
    for prefix, run in sources:
        rows = run.inputs[run.inputs["feature"] == feat]
        is_time |= rows["dtype"].astype(str).str.startswith("datetime").any()
        for split, grp in rows.groupby("split", sort=False):
            res = grp["resolution"].dropna()
            tag = f" [{res.mode().iloc[0]}]" if len(res) else ""
            draw_series(left, grp.groupby("step")["n_unique"].max().astype(float),
                        name=f"{prefix}{split}{tag}", color=SPLIT_COLORS.get(split),
                        ls="--" if prefix else "-")
    shade(left, f.steps)
    left.set_limits("y", 0)
    left.title = "distinct values per batch [resolution]"
    left.xlabel = "step"
    left.show_legend()
    drawn = False
    for prefix, run in sources:
        sm = run.samples[run.samples["feature"] == feat]
        for split, grp in sm.groupby("split", sort=False):
            v = finite(grp["value"])
            if is_time:
                v = (v % 86_400) / 3_600
            if len(v):
                # A frequency polygon (density at each bin's centre): a line, which the page
                # draws live beside the panel on its left.
                density, edges = np.histogram(v, bins=np.linspace(0, 24, 49) if is_time else 40,
                                              density=True)
                right.line((edges[:-1] + edges[1:]) / 2, density, color=SPLIT_COLORS.get(split),
                           label=f"{prefix}{split}", dash=bool(prefix))
                drawn = True
    if drawn:
        right.title = ("density of sampled values by time of day (h)" if is_time
                       else "density of sampled values")
        right.xlabel = "hour" if is_time else "value"
        right.show_legend()
    else:
        right.visible = False
    return fig


def unnormalized_inputs(d: Diagnosis, f: Finding, limit: int = 30) -> Optional[Chart]:
    """Each feature's observed range (bar) and mean (dot)."""
    inp = d.run.inputs
    inp = inp[inp["split"] == TRAIN] if (inp["split"] == TRAIN).any() else inp
    # Datetimes are stored as epoch seconds and never reach a model as they are.
    inp = inp[~inp["dtype"].astype(str).str.startswith("datetime")]
    if not len(inp):
        return None
    g = inp.groupby("feature", sort=False).agg(lo=("min", "min"), hi=("max", "max"),
                                                mean=("mean", "mean"))
    marked = mentioned(f, g.index)
    order = marked + [x for x in g.index if x not in marked]
    g = g.loc[order[:limit]]
    fig = canvas(max(2.2, 0.9 + 0.22 * len(g)))
    ax = fig.panel()
    y = np.arange(len(g))
    colors = [MARK if x in marked else BAR for x in g.index]
    ax.hbars(y, g["hi"] - g["lo"], left=g["lo"], colors=colors, alpha=0.75, height=0.6)
    ax.points(g["mean"], y, color="#000000")
    ax.span(-3, 3, color=GREEN, alpha=0.08)
    ax.set_yticks(y, [label(x, 32) for x in g.index], marked=[i for i, x in enumerate(g.index)
                                                             if x in marked])
    ax.invert_y()
    ax.title = "input ranges (bar: min–max, tick: mean; green band: ±3)"
    return fig
