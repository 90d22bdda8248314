"""Charts of a run: the shared drawing helpers and the data shaping behind them.

The plot functions draw on the chart builder (reports/chart.py), which gives chart data, not
pixels: no matplotlib on the report's path. Long series are binned to a mean line and a
min/max band, and per-layer data is drawn as heatmaps, which keeps a 100-layer, 10,000-step
run's report small. Every label that comes from the run goes through `label()`.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

import numpy as np
import pandas as pd

from tracelab.reports.chart import Chart, Panel
from tracelab.reports.heatmap_pixels import to_rgba
from tracelab.core.schema import UPDATE, WEIGHT

__all__ = ["Chart", "Panel", "figure"]

MAX_POINTS = 600       # points per line; longer series become a min/max envelope
MAX_COLUMNS = 300      # heatmap columns (step bins)
MAX_ROWS = 120         # heatmap rows (layers); more are averaged in groups
LINES_UP_TO = 8        # per-layer data with more names than this is drawn as a heatmap
WIDTH = 11.5           # inches of an overview plot: about 1060 px, the page's width
FINDING_WIDTH = 8.0    # inches of a finding's plot, beside its evidence table
# Red is kept for what a finding points at; nothing else is drawn in it.
SPLIT_COLORS = {"train": "#1f77b4", "val": "#e8710a", "valid": "#e8710a",
                "validation": "#e8710a", "test": "#2ca02c"}
MARK = "#c62828"       # the colour of what a finding points at
BAR = "#7a9cc6"        # bars of the layers or features a finding does not name
GREEN = "#2e7d32"      # the best the run did, the range inputs should lie in
MARKED = [MARK, "#ff6f00", "#6a1b9a", "#00838f", "#ad1457", "#4e342e"]
SHADE = "#fbc02d"
NONFINITE = "#00e5ff"  # heatmap cells holding a NaN or Inf
GREY = "#555555"


def figure(height: float, width: float = WIDTH) -> Chart:
    return Chart(height, width)


def label(text: object, limit: int = 48) -> str:
    """A run-derived string for a chart: one line, shortened in the middle."""
    s = str(text).replace("\n", " ")
    if len(s) > limit:
        keep = (limit - 1) // 2
        s = s[:keep] + "…" + s[-(limit - 1 - keep):]
    return s


# -- data shaping ---------------------------------------------------------------------------------
def unique(s: pd.Series) -> list[str]:
    """Distinct values in order of appearance (vectorized: string columns are Arrow-backed,
    and iterating them element by element is slow)."""
    return [str(v) for v in pd.unique(s.dropna())]


def finite(s: pd.Series) -> pd.Series:
    s = pd.to_numeric(s, errors="coerce").astype(float)
    return s[np.isfinite(s.to_numpy())]


def envelope(s: pd.Series, max_points: int = MAX_POINTS) -> pd.DataFrame:
    """x, mean, lo, hi of a step-indexed series, binned to at most `max_points` points."""
    s = finite(s).sort_index()
    x = s.index.to_numpy(dtype=float)
    v = s.to_numpy(dtype=float)
    if len(s) <= max_points:
        return pd.DataFrame({"x": x, "mean": v, "lo": v, "hi": v})
    bins = np.linspace(x[0], x[-1], max_points + 1)
    which = np.clip(np.searchsorted(bins, x, side="right") - 1, 0, max_points - 1)
    starts = np.flatnonzero(np.r_[True, np.diff(which) > 0])  # x is sorted: bins are runs
    counts = np.diff(np.r_[starts, len(v)])
    return pd.DataFrame({"x": np.add.reduceat(x, starts) / counts,
                         "mean": np.add.reduceat(v, starts) / counts,
                         "lo": np.minimum.reduceat(v, starts),
                         "hi": np.maximum.reduceat(v, starts)})


def draw_series(ax: Panel, s: pd.Series, *, name: str = "", color: Optional[str] = None,
                lw: float = 1.2, ls: str = "-") -> None:
    """A step-indexed series: its (binned) mean as a line, the bins' min-max as a band."""
    e = envelope(s)
    if e.empty:
        return
    color = ax.line(e["x"], e["mean"], color=color, width=lw, dash=ls != "-", label=label(name))
    if (e["hi"] > e["lo"]).any():
        ax.band(e["x"], e["lo"], e["hi"], color=color, alpha=0.18)


_BINS_AT_ONCE = 64


def binned(wide: pd.DataFrame, max_cols: int = MAX_COLUMNS,
           max_rows: int = MAX_ROWS) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A step × name frame to (matrix names × bins, bin edges in steps, row labels).

    Bins take the mean of finite values; a bin holding any non-finite value is NaN, which the
    heatmap paints in its "bad" colour so a NaN never disappears into an average.
    """
    if not wide.index.is_monotonic_increasing:
        wide = wide.sort_index()
    steps = wide.index.to_numpy(dtype=float)
    values = wide.to_numpy(dtype=float)
    names = [str(c) for c in wide.columns]
    n = len(steps)
    cols = min(max_cols, n)
    edges = np.linspace(steps[0], steps[-1] + 1, cols + 1)
    which = np.clip(np.searchsorted(edges, steps, side="right") - 1, 0, cols - 1)
    starts = np.flatnonzero(np.r_[True, np.diff(which) > 0])  # steps are sorted: bins are runs
    matrix = np.empty((len(starts), values.shape[1]))
    # A few bins at a time: the masks of a 100,000-step frame would cost more than the frame.
    for first in range(0, len(starts), _BINS_AT_ONCE):
        at = starts[first:first + _BINS_AT_ONCE]
        end = starts[first + _BINS_AT_ONCE] if first + _BINS_AT_ONCE < len(starts) else n
        part = values[at[0]:end]
        ok = np.isfinite(part)
        with np.errstate(invalid="ignore", divide="ignore"):
            block = (np.add.reduceat(np.where(ok, part, 0.0), at - at[0], axis=0)
                     / np.add.reduceat(ok, at - at[0], axis=0))
        bad = ~ok & ~np.isnan(part)
        if bad.any():
            block[np.logical_or.reduceat(bad, at - at[0], axis=0)] = np.nan
        matrix[first:first + len(at)] = block
    matrix = matrix.T
    if len(names) > max_rows:
        group = int(np.ceil(len(names) / max_rows))
        rows = [np.nanmean(matrix[i:i + group], axis=0) if np.isfinite(matrix[i:i + group]).any()
                else np.full(matrix.shape[1], np.nan) for i in range(0, len(names), group)]
        matrix = np.vstack(rows)
        names = [f"{names[i]} (+{min(group, len(wide.columns) - i) - 1})"
                 for i in range(0, len(wide.columns), group)]
    return matrix, edges, names


def draw_heatmap(ax: Panel, wide: pd.DataFrame, *, log: bool = True,
                 marked: Iterable[str] = (), cbar: str = "", center: Optional[float] = None,
                 vmin: Optional[float] = None, vmax: Optional[float] = None) -> None:
    matrix, edges, names = binned(wide)
    with np.errstate(divide="ignore", invalid="ignore"):
        data = np.log10(np.where(matrix > 0, matrix, np.nan)) if log else matrix
        # Exact zeros under a log scale are real data (a dead grad), not missing: floor them.
        if log and np.isfinite(data).any():
            floor = np.nanmin(data) - 1
            data = np.where(matrix == 0, floor, data)
    finite_vals = data[np.isfinite(data)]
    lo = vmin if vmin is not None else (np.percentile(finite_vals, 1) if finite_vals.size else 0)
    hi = vmax if vmax is not None else (np.percentile(finite_vals, 99) if finite_vals.size else 1)
    if hi <= lo:
        hi = lo + 1
    if center is not None:
        # Diverging around the typical value, at least a decade each way, so noise around it
        # stays pale and only real departures take colour.
        half = max(abs(lo - center), abs(hi - center), 1.0)
        lo, hi = center - half, center + half
    rgba = to_rgba(np.where(np.isfinite(data), data, np.nan), lo, hi,
                   diverging=center is not None, bad=NONFINITE)
    ax.heatmap(rgba, (edges[0], edges[-1], len(names) - 0.5, -0.5),
               colorbar={"label": cbar, "lo": float(lo), "hi": float(hi),
                         "diverging": center is not None})
    step = max(1, int(np.ceil(len(names) / 30)))
    marked = set(marked)
    hits = [i for i, name in enumerate(names) if name.split(" (+")[0] in marked]
    ticks = sorted(set(range(0, len(names), step)) | set(hits))  # the marked rows are labelled
    ax.set_yticks(ticks, [label(names[i], 40) for i in ticks], marked=hits)
    ax.xlabel = "step"


def heat_height(n_names: int) -> float:
    return float(min(6.5, 1.6 + 0.11 * min(n_names, MAX_ROWS)))


def shade(ax: Panel, steps: Optional[Sequence[int]], text: str = "") -> None:
    """Shade a finding's step range (a line for a single step); a range covering nearly all the
    plotted steps is left unshaded, since shading everything points at nothing."""
    if not steps:
        return
    a, b = steps
    x0, x1 = ax.data_bounds("x")
    if a != b and np.isfinite([x0, x1]).all() and x1 > x0 and \
            min(b, x1) - max(a, x0) >= 0.9 * (x1 - x0):
        return
    if a == b:
        ax.vline(a, color=MARK)
    else:
        ax.span(a, b, color=SHADE, alpha=0.28)
    if text:
        ax.note(text)


def outside_legend(ax: Panel) -> None:
    """A legend right of the axes: per-layer lines would hide behind one drawn inside."""
    if ax.labeled():
        ax.show_legend(outside=True)


def log_if_wide(ax: Panel, values: Iterable[pd.Series]) -> None:
    """A log y axis when the positive values span over two decades (zeros, such as the updates
    of a frozen layer, then drop out of the plot instead of flattening everything else)."""
    values = list(values)
    vals = pd.concat([finite(v) for v in values]) if values else pd.Series(dtype=float)
    pos = vals[vals > 0]
    if len(pos) and (vals >= 0).all() and len(pos) >= 0.5 * len(vals) \
            and pos.max() / pos.min() > 200:
        ax.log("y")


def update_ratio(run) -> pd.DataFrame:
    """‖Δw‖/‖w‖ per parameter over steps (update norm over the weight norm)."""
    upd, w = run.stat(UPDATE, "norm"), run.stat(WEIGHT, "norm")
    if upd.empty or w.empty:
        return pd.DataFrame()
    cols = [c for c in upd.columns if c in w.columns]
    weights = w[cols].reindex(upd.index).to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = upd[cols].to_numpy(dtype=float) / weights
    ratio[weights == 0] = np.nan  # no weight to compare with (in place: 128 MB at 100,000 steps)
    return pd.DataFrame(ratio, index=upd.index, columns=pd.Index(cols, name=upd.columns.name),
                        copy=False)


def any_positive(wide: pd.DataFrame) -> bool:
    """Whether any finite value of a frame is above zero."""
    v = wide.to_numpy(dtype=float)
    return bool((v[np.isfinite(v)] > 0).any())
