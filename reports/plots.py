"""Figures of a run: the overview plots and the shared drawing helpers.

Figures are built with the object API (`matplotlib.figure.Figure`), never pyplot, so nothing
lands in pyplot's global figure registry and nothing needs a display. Long series are
downsampled to a min/max envelope and per-layer data is drawn as heatmaps, which keeps a
100-layer, 10,000-step run's report small. Every label that comes from the run goes through
`label()`, because matplotlib would parse a `$` in a layer name as mathtext.
"""
from __future__ import annotations

import base64
import io
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.colors import LinearSegmentedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from tracelab.core.errors import TracelabError
from tracelab.core.files import atomic_path
from tracelab.core.schema import UPDATE, WEIGHT

MAX_POINTS = 600       # points per line; longer series become a min/max envelope
MAX_COLUMNS = 300      # heatmap columns (step bins)
MAX_ROWS = 120         # heatmap rows (layers); more are averaged in groups
LINES_UP_TO = 8        # per-layer data with more names than this is drawn as a heatmap
WIDTH = 11.5           # inches of an overview plot: about 1060 px, the page's width
FINDING_WIDTH = 8.0    # inches of a finding's plot, beside its evidence table
# Red is kept for what a finding points at; nothing else is drawn in it.
SPLIT_COLORS = {"train": "#1f77b4", "val": "#e8710a", "valid": "#e8710a",
                "validation": "#e8710a", "test": "#2ca02c"}
CYCLE = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#7f7f7f", "#bcbd22",
         "#e377c2", "#e8710a"]
MARK = "#c62828"       # the colour of what a finding points at
MARKED = [MARK, "#ff6f00", "#6a1b9a", "#00838f", "#ad1457", "#4e342e"]
SHADE = "#fbc02d"
NONFINITE = "#00e5ff"  # heatmap cells holding a NaN or Inf

_RC = {
    "svg.fonttype": "none",          # text stays text: smaller and selectable
    "svg.hashsalt": "tracelab",      # deterministic ids
    "font.family": "sans-serif",
    "font.size": 9.5,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e4e4e4",
    "grid.linewidth": 0.6,
    "axes.edgecolor": "#888888",
    "axes.prop_cycle": matplotlib.cycler(color=CYCLE),
    "legend.frameon": False,
    "legend.fontsize": 8.5,
    "image.interpolation": "none",
    "path.simplify": True,
}
_HEAT = LinearSegmentedColormap.from_list(
    "tracelab_heat", ["#0d0887", "#6a00a8", "#b12a90", "#e16462", "#fca636", "#f0f921"])


@contextmanager
def style() -> Iterator[None]:
    with matplotlib.rc_context(_RC):
        yield


def figure(height: float, width: float = WIDTH) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


_PATH_DATA = re.compile(rb'(?<=\sd=")[^"]*')
_DIGITS = re.compile(rb"(\d\.\d)\d+")


def compact_svg(svg: bytes) -> bytes:
    """Path coordinates to 0.1 pt (about 0.13 px): a third of a long curve's bytes, no visible
    change. Only `d` attributes are touched; transforms keep their precision."""
    return _PATH_DATA.sub(lambda m: _DIGITS.sub(rb"\1", m.group(0)), svg)


def to_uri(fig: Figure, fmt: str = "svg") -> str:
    """A data URI of the figure: SVG for the page (crisp in print), PNG where asked."""
    buf = io.BytesIO()
    with style():
        if fmt == "svg":
            fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
            data, mime = compact_svg(buf.getvalue()), "image/svg+xml"
        else:
            fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
            data, mime = buf.getvalue(), "image/png"
    fig.clear()
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


# PNG files tracelab writes carry this in their Software text chunk: a rerun may replace its own
# plots, never a file of the user's that happens to have the same name.
PNG_SOFTWARE = "tracelab"


def _png_is_ours(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return b"Software\x00" + PNG_SOFTWARE.encode() in f.read(4096)
    except OSError:
        return False


def to_png(fig: Figure, path: Path) -> Path:
    """Save `fig` as `path`; a file already there that tracelab did not write is refused."""
    if path.exists() and not _png_is_ours(path):
        raise TracelabError(f"{path}: a file tracelab did not write is in the way of a plot of the "
                            "Markdown summary; move it, or write the summary elsewhere")
    with style(), atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, metadata={"Software": PNG_SOFTWARE})
    fig.clear()
    return path


def label(text: object, limit: int = 48) -> str:
    """A run-derived string made safe for matplotlib: no mathtext, shortened in the middle."""
    s = str(text).replace("\n", " ")
    if len(s) > limit:
        keep = (limit - 1) // 2
        s = s[:keep] + "…" + s[-(limit - 1 - keep):]
    return s.replace("$", r"\$")


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
    if len(s) <= max_points:
        v = s.to_numpy()
        return pd.DataFrame({"x": x, "mean": v, "lo": v, "hi": v})
    bins = np.linspace(x[0], x[-1], max_points + 1)
    which = np.clip(np.searchsorted(bins, x, side="right") - 1, 0, max_points - 1)
    g = pd.Series(s.to_numpy()).groupby(which)
    return pd.DataFrame({"x": pd.Series(x).groupby(which).mean(), "mean": g.mean(),
                         "lo": g.min(), "hi": g.max()}).reset_index(drop=True)


def draw_series(ax, s: pd.Series, *, name: str = "", color: Optional[str] = None,
                lw: float = 1.2, ls: str = "-") -> None:
    e = envelope(s)
    if e.empty:
        return
    line, = ax.plot(e["x"], e["mean"], color=color, lw=lw, ls=ls, label=label(name) or None)
    if (e["hi"] > e["lo"]).any():
        ax.fill_between(e["x"], e["lo"], e["hi"], color=line.get_color(), alpha=0.18, lw=0)


def binned(wide: pd.DataFrame, max_cols: int = MAX_COLUMNS,
           max_rows: int = MAX_ROWS) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A step × name frame to (matrix names × bins, bin edges in steps, row labels).

    Bins take the mean of finite values; a bin holding any non-finite value is NaN, which the
    heatmap paints in its "bad" colour so a NaN never disappears into an average.
    """
    wide = wide.sort_index()
    steps = wide.index.to_numpy(dtype=float)
    values = wide.to_numpy(dtype=float)
    names = [str(c) for c in wide.columns]
    n = len(steps)
    cols = min(max_cols, n)
    edges = np.linspace(steps[0], steps[-1] + 1, cols + 1)
    which = np.clip(np.searchsorted(edges, steps, side="right") - 1, 0, cols - 1)
    bad = ~np.isfinite(values) & ~np.isnan(values)
    frame = pd.DataFrame(np.where(np.isfinite(values), values, np.nan))
    matrix = frame.groupby(which).mean().to_numpy().T.copy()
    if bad.any():
        hit = pd.DataFrame(bad).groupby(which).any().to_numpy().T
        matrix[hit] = np.nan
    if len(names) > max_rows:
        group = int(np.ceil(len(names) / max_rows))
        rows = [np.nanmean(matrix[i:i + group], axis=0) if np.isfinite(matrix[i:i + group]).any()
                else np.full(matrix.shape[1], np.nan) for i in range(0, len(names), group)]
        matrix = np.vstack(rows)
        names = [f"{names[i]} (+{min(group, len(wide.columns) - i) - 1})"
                 for i in range(0, len(wide.columns), group)]
    return matrix, edges, names


def draw_heatmap(fig: Figure, ax, wide: pd.DataFrame, *, log: bool = True,
                 marked: Iterable[str] = (), cbar: str = "", center: Optional[float] = None,
                 vmin: Optional[float] = None, vmax: Optional[float] = None) -> None:
    matrix, edges, names = binned(wide)
    with np.errstate(divide="ignore", invalid="ignore"):
        data = np.log10(np.where(matrix > 0, matrix, np.nan)) if log else matrix
        # Exact zeros under a log scale are real data (a dead grad), not missing: floor them.
        if log and np.isfinite(data).any():
            floor = np.nanmin(data) - 1
            data = np.where(matrix == 0, floor, data)
    cmap = _HEAT.with_extremes(bad=NONFINITE)
    finite_vals = data[np.isfinite(data)]
    lo = vmin if vmin is not None else (np.percentile(finite_vals, 1) if finite_vals.size else 0)
    hi = vmax if vmax is not None else (np.percentile(finite_vals, 99) if finite_vals.size else 1)
    if hi <= lo:
        hi = lo + 1
    if center is not None:
        # Diverging around the typical value, at least a decade each way, so noise around it
        # stays pale and only real departures take colour.
        half = max(abs(lo - center), abs(hi - center), 1.0)
        norm = Normalize(center - half, center + half)
        cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad=NONFINITE)
    else:
        norm = Normalize(lo, hi)
    im = ax.imshow(data, aspect="auto", cmap=cmap, norm=norm, interpolation="none",
                   extent=(edges[0], edges[-1], len(names) - 0.5, -0.5))
    ax.grid(False)
    step = max(1, int(np.ceil(len(names) / 30)))
    ticks = list(range(0, len(names), step))
    marked = set(marked)
    ax.set_yticks(ticks, [label(names[i], 40) for i in ticks],
                  fontsize=7 if len(names) <= 30 else 6)
    for i, name in enumerate(names):
        if name.split(" (+")[0] in marked:
            ax.annotate("◀", (1.0, i), xycoords=("axes fraction", "data"), color=MARK,
                        fontsize=8, va="center", ha="left", annotation_clip=False)
            if i not in ticks:
                continue
            ax.get_yticklabels()[ticks.index(i)].set_color(MARK)
            ax.get_yticklabels()[ticks.index(i)].set_fontweight("bold")
    ax.set_xlabel("step")
    bar = fig.colorbar(im, ax=ax, pad=0.03, fraction=0.03)
    bar.set_label(cbar, fontsize=7.5)
    bar.ax.tick_params(labelsize=7)


def heat_height(n_names: int) -> float:
    return float(min(6.5, 1.6 + 0.11 * min(n_names, MAX_ROWS)))


def shade(ax, steps: Optional[Sequence[int]], text: str = "") -> None:
    """Shade a finding's step range (a line for a single step); a range covering nearly all the
    plotted steps is left unshaded, since shading everything points at nothing."""
    if not steps:
        return
    a, b = steps
    x0, x1 = ax.dataLim.x0, ax.dataLim.x1
    if a != b and np.isfinite([x0, x1]).all() and x1 > x0 and \
            min(b, x1) - max(a, x0) >= 0.9 * (x1 - x0):
        return
    if a == b:
        ax.axvline(a, color=MARK, lw=1.3, ls="--", zorder=5)
    else:
        ax.axvspan(a, b, color=SHADE, alpha=0.28, lw=0, zorder=0)
    if text:
        ax.annotate(text, (a, 1.0), xycoords=("data", "axes fraction"), color=MARK,
                    fontsize=7.5, va="bottom", ha="left", annotation_clip=False)


def _log_label(v: float, _pos=None) -> str:
    if v <= 0 or not np.isfinite(v):
        return ""
    e = np.log10(v)
    return f"1e{int(round(e))}" if abs(e - round(e)) < 1e-9 and abs(e) > 2 else f"{v:g}"


def set_log(ax, axis: str = "y") -> None:
    """A log axis labelled in plain text (1e-5): matplotlib's default writes its labels as
    mathtext, whose parser costs more than the rest of a figure."""
    a = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    a.set_major_formatter(FuncFormatter(_log_label))
    a.set_minor_formatter(NullFormatter())


def outside_legend(ax) -> None:
    """A legend right of the axes: per-layer lines would hide behind one drawn inside."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def log_if_wide(ax, values: Iterable[pd.Series]) -> None:
    """A log y axis when the positive values span over two decades (zeros, such as the updates
    of a frozen layer, then drop out of the plot instead of flattening everything else)."""
    values = list(values)
    vals = pd.concat([finite(v) for v in values]) if values else pd.Series(dtype=float)
    pos = vals[vals > 0]
    if len(pos) and (vals >= 0).all() and len(pos) >= 0.5 * len(vals) \
            and pos.max() / pos.min() > 200:
        set_log(ax)


def update_ratio(run) -> pd.DataFrame:
    """‖Δw‖/‖w‖ per parameter over steps (update norm over the weight norm)."""
    upd, w = run.stat(UPDATE, "norm"), run.stat(WEIGHT, "norm")
    if upd.empty or w.empty:
        return pd.DataFrame()
    cols = [c for c in upd.columns if c in w.columns]
    with np.errstate(divide="ignore", invalid="ignore"):
        return upd[cols] / w[cols].reindex(upd.index).replace(0, np.nan)
