"""Finding plots of the input features: distributions per split, cardinality, ranges."""
from __future__ import annotations

from typing import Optional

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from tracelab.core.findings import Diagnosis, Finding
from tracelab.reports.plots import (FINDING_WIDTH, MARK, SPLIT_COLORS, draw_series, finite,
                                    label, shade)
from tracelab.reports.pointers import canvas, features, mentioned
from tracelab.core.schema import TRAIN



def train_val_mismatch(d: Diagnosis, f: Finding) -> Optional[Figure]:
    """Distributions per split of the worst mismatched features (reservoir samples)."""
    run = d.run
    feats = features(d, f)
    if not feats:
        return None
    fig = canvas(2.5, min(FINDING_WIDTH, 3.2 * len(feats) + 0.4))
    axes = fig.subplots(1, len(feats), squeeze=False).ravel()
    sm, inp = run.samples, run.inputs
    for ax, feat in zip(axes, feats):
        rows = sm[sm["feature"] == feat]
        if len(rows):
            vals = finite(rows["value"])
            edges = np.histogram_bin_edges(vals, bins=40) if len(vals) else 10
            for split, grp in rows.groupby("split", sort=False):
                ax.hist(finite(grp["value"]), bins=edges, density=True, alpha=0.45,
                        color=SPLIT_COLORS.get(split), label=label(split))
            ax.set_ylabel("density")
        else:
            stats = inp[inp["feature"] == feat].groupby("split")[["mean", "std", "min", "max"]]\
                .mean()
            for i, (split, r) in enumerate(stats.iterrows()):
                ax.errorbar([i], [r["mean"]], yerr=[[r["std"]], [r["std"]]], fmt="o", capsize=4,
                            color=SPLIT_COLORS.get(split))
                ax.plot([i, i], [r["min"], r["max"]], color=SPLIT_COLORS.get(split), alpha=0.4,
                        lw=6)
            ax.set_xticks(range(len(stats)), [label(s) for s in stats.index])
            ax.grid(axis="x", visible=False)
        ax.set_title(label(feat, 36))
        ax.legend(loc="best")
    return fig


def input_collapse(d: Diagnosis, f: Finding) -> Optional[Figure]:
    """The collapsed feature per split (and in the baseline run): distinct values per batch
    over steps, beside where its sampled values fall (the time of day, for datetimes: a cast
    to dates puts every value at midnight)."""
    feats = features(d, f, limit=1)
    if not feats:
        return None
    feat = feats[0]
    sources = [("", d.run)] + ([("baseline ", d.baseline)] if d.baseline is not None else [])
    fig = canvas(2.8)
    left, right = fig.subplots(1, 2)
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
    left.set_ylim(bottom=0)
    left.set_title("distinct values per batch [resolution]")
    left.set_xlabel("step")
    left.legend(loc="best")
    drawn = False
    for prefix, run in sources:
        sm = run.samples[run.samples["feature"] == feat]
        for split, grp in sm.groupby("split", sort=False):
            v = finite(grp["value"])
            if is_time:
                v = (v % 86_400) / 3_600
            if len(v):
                right.hist(v, bins=np.linspace(0, 24, 49) if is_time else 40, density=True,
                           alpha=0.5, color=SPLIT_COLORS.get(split), label=f"{prefix}{split}",
                           histtype="stepfilled" if not prefix else "step")
                drawn = True
    if drawn:
        right.set_title("time of day of sampled values (h)" if is_time
                        else "sampled values")
        if is_time:
            right.set_xticks(range(0, 25, 6))
        right.legend(loc="best")
    else:
        right.set_visible(False)
    fig.suptitle(label(feat, 60), x=0.01, ha="left", fontsize=10, fontweight="bold")
    return fig


def unnormalized_inputs(d: Diagnosis, f: Finding, limit: int = 30) -> Optional[Figure]:
    """Each feature's observed range (bar) and mean (dot) on a symmetric log scale."""
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
    ax = fig.subplots()
    y = np.arange(len(g))
    colors = [MARK if x in marked else "#7a9cc6" for x in g.index]
    ax.barh(y, g["hi"] - g["lo"], left=g["lo"], color=colors, alpha=0.75, height=0.6)
    ax.plot(g["mean"], y, "k|", ms=9)
    ax.set_xscale("symlog", linthresh=1.0)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.axvspan(-3, 3, color="#2e7d32", alpha=0.08, lw=0)
    ax.set_yticks(y, [label(x, 32) for x in g.index])
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    ax.set_title("input ranges (bar: min–max, tick: mean; green band: ±3)")
    return fig
