"""The report's charts as data: a small builder the plot functions draw on.

A `Chart` holds panels laid out on a grid; a `Panel` takes lines, point marks, bands, shaded
step ranges, reference lines, bars, a heatmap image, a title, labels, log scales and tick
labels. `Chart.spec()` is the chart spec the page draws with uPlot and as a static SVG
(reports/chart_html.py); the Markdown writer renders the same spec as a PNG
(reports/chart_png.py). Nothing here builds a matplotlib Figure, so the HTML report never
imports matplotlib.

Axis limits follow matplotlib's defaults, so a chart reads as a figure would: the data range
plus 5% each side (in log space on a log axis), never past the base of a bar or the edge of a
heatmap, one range for panels that share their x axis.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

import numpy as np

# The report's line colours, in the order lines without a colour of their own take them.
CYCLE = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#7f7f7f", "#bcbd22",
         "#e377c2", "#e8710a"]
MARGIN = 0.05
# Where panels sit in the figure (fractions): matplotlib's default subplot parameters.
LEFT, RIGHT, BOTTOM, TOP, WSPACE, HSPACE = 0.125, 0.9, 0.11, 0.88, 0.2, 0.2
COLORBAR = 0.06  # share of a heatmap panel's width its colour bar takes (bar and pad)


def _array(v: Any) -> np.ndarray:
    return np.asarray(v, dtype=float).reshape(-1)


class Panel:
    """One plot area. Methods add what it draws; `spec()` gives the panel's data."""

    def __init__(self, box: list[float]):
        self.box = box
        self.title = self.xlabel = self.ylabel = ""
        self.xlog = self.ylog = False
        self.visible = True
        self.legend = False
        self.legend_outside = False
        self.series: list[dict[str, Any]] = []
        self.bands: list[dict[str, Any]] = []
        self.vlines: list[dict[str, Any]] = []
        self.hlines: list[dict[str, Any]] = []
        self.spans: list[dict[str, Any]] = []
        self.rects: list[dict[str, Any]] = []
        self.image: Optional[dict[str, Any]] = None
        self.colorbar: Optional[dict[str, Any]] = None
        self.yticks: Optional[list[list]] = None
        self.marked_ticks: list[float] = []
        self.notes: list[str] = []
        self.rugs: list[dict[str, Any]] = []
        self.hist_labels: list[tuple[str, str]] = []
        self.limits: dict[str, list[Optional[float]]] = {"x": [None, None], "y": [None, None]}
        self.inverted = False
        self.sticky: dict[str, list[float]] = {"x": [], "y": []}
        self.shared: Optional[list["Panel"]] = None
        self.cell: dict[str, Any] = {}
        self._cycle = self._patch_cycle = 0

    # -- what it draws ------------------------------------------------------------------------
    def _color(self, color: Optional[str], patch: bool = False) -> str:
        if color is not None:
            return color
        if patch:
            self._patch_cycle += 1
            return CYCLE[(self._patch_cycle - 1) % len(CYCLE)]
        self._cycle += 1
        return CYCLE[(self._cycle - 1) % len(CYCLE)]

    def line(self, x, y, *, label: str = "", color: Optional[str] = None, width: float = 1.5,
             dash: bool = False, alpha: float = 1.0) -> str:
        """A line through (x, y); returns its colour (the next of the cycle if none given)."""
        color = self._color(color)
        self.series.append({"label": label, "color": color, "alpha": float(alpha),
                            "width": float(width), "dash": bool(dash), "points": False,
                            "x": _array(x), "y": _array(y)})
        return color

    def points(self, x, y, *, label: str = "", color: Optional[str] = None,
               alpha: float = 1.0) -> None:
        """Point marks without a line."""
        self.series.append({"label": label, "color": self._color(color), "alpha": float(alpha),
                            "width": 1.5, "dash": False, "points": True,
                            "x": _array(x), "y": _array(y)})

    def rug(self, x, *, label: str = "", color: str) -> None:
        """Marks along the top of the panel at these x values (their height is the panel's)."""
        self.rugs.append({"label": label, "color": color, "x": _array(x)})

    def band(self, x, lo, hi, *, color: str, alpha: float, label: str = "") -> None:
        """A filled band between lo and hi."""
        self.bands.append({"label": label, "color": color, "alpha": float(alpha),
                           "x": _array(x), "lo": _array(lo), "hi": _array(hi)})

    def vline(self, x: float, *, color: str, label: str = "") -> None:
        self.vlines.append({"x": float(x), "color": color, "label": label})

    def hline(self, y: float, *, color: str, label: str = "") -> None:
        self.hlines.append({"y": float(y), "color": color, "label": label})

    def span(self, x0: float, x1: float, *, color: str, alpha: float) -> None:
        """A shaded x range over the panel's full height."""
        self.spans.append({"color": color, "alpha": float(alpha), "x0": float(x0),
                           "x1": float(x1)})

    def rect(self, x: float, y: float, w: float, h: float, *, color: str,
             alpha: float = 1.0) -> None:
        self.rects.append({"color": color, "alpha": float(alpha), "x": float(x), "y": float(y),
                           "w": float(w), "h": float(h)})

    def hbars(self, y, widths, *, left=0.0, colors, height: float = 0.8,
              alpha: float = 1.0) -> None:
        """Horizontal bars centred on y, from `left` (a scalar or one per bar)."""
        y, widths = _array(y), _array(widths)
        left = np.broadcast_to(_array(left), y.shape)
        colors = [colors] * len(y) if isinstance(colors, str) else list(colors)
        for yi, w, l0, c in zip(y, widths, left, colors):
            self.rect(l0, yi - height / 2, w, height, color=c, alpha=alpha)
        self.sticky["x"].extend(np.unique(left).tolist())

    def hist(self, values, bins, *, density: bool = True, color: Optional[str] = None,
             alpha: float = 1.0, label: str = "") -> None:
        """A histogram as bars from zero (one rect per bin)."""
        heights, edges = np.histogram(_array(values), bins=bins, density=density)
        color = self._color(color, patch=True)
        for h, a, b in zip(heights, edges[:-1], edges[1:]):
            self.rect(a, 0.0, b - a, h, color=color, alpha=alpha)
        self.sticky["y"].append(0.0)
        if label:
            self.hist_labels.append((label, color))

    def heatmap(self, rgba: np.ndarray, extent: Sequence[float], *,
                colorbar: Optional[dict[str, Any]] = None) -> None:
        """An RGBA image over extent (x0, x1, y-bottom, y-top), its edges the panel's limits."""
        from tracelab.reports.heatmap_pixels import png_uri
        x0, x1, y0, y1 = (float(v) for v in extent)
        self.image = {"uri": png_uri(rgba), "extent": [x0, x1, y0, y1], "rgba": rgba}
        self.limits = {"x": [x0, x1], "y": [y0, y1]}
        self.colorbar = colorbar
        self.box = [self.box[0], self.box[1], self.box[2] * (1 - COLORBAR), self.box[3]]

    def note(self, text: str) -> None:
        """Text on the panel (an annotation): kept with the chart, shown by its renderers."""
        if text.strip():
            self.notes.append(text.strip())

    # -- axes ---------------------------------------------------------------------------------
    def log(self, axis: str = "y") -> None:
        setattr(self, f"{axis}log", True)

    def set_limits(self, axis: str, lo: Optional[float] = None,
                   hi: Optional[float] = None) -> None:
        """Fix one or both ends of an axis; an end left None stays fitted to the data."""
        for i, v in enumerate((lo, hi)):
            if v is not None:
                self.limits[axis][i] = float(v)

    def invert_y(self) -> None:
        self.inverted = True

    def set_yticks(self, ticks: Iterable[float], labels: Iterable[str],
                   marked: Iterable[float] = ()) -> None:
        """Tick labels at these y positions (rows of a heatmap, bars); `marked` in red."""
        self.yticks = [[float(t), str(s)] for t, s in zip(ticks, labels)]
        self.marked_ticks = [float(t) for t in marked]

    def show_legend(self, *, outside: bool = False) -> None:
        self.legend, self.legend_outside = True, outside

    def labeled(self) -> bool:
        return any(s["label"] for s in self.series + self.bands) or bool(self.hist_labels)

    # -- limits -------------------------------------------------------------------------------
    def data_bounds(self, axis: str) -> tuple[float, float]:
        """The data's extent on an axis (everything drawn on it), NaN if nothing is."""
        vals = self._values(axis, positive=False)
        return (float(vals.min()), float(vals.max())) if len(vals) else (np.nan, np.nan)

    def _values(self, axis: str, positive: bool) -> np.ndarray:
        parts = []
        for s in self.series:
            ok = np.isfinite(s["x"]) & np.isfinite(s["y"])
            parts.append(s[axis][ok])
        for b in self.bands:
            parts += [b["x"]] if axis == "x" else [b["lo"], b["hi"]]
        for r in self.rects:
            a, w = (r["x"], r["w"]) if axis == "x" else (r["y"], r["h"])
            parts.append(np.array([a, a + w]))
        if axis == "x":
            parts += [np.array([s["x0"], s["x1"]]) for s in self.spans]
            parts.append(np.array([v["x"] for v in self.vlines]))
        else:
            parts.append(np.array([v["y"] for v in self.hlines]))
        vals = np.concatenate([_array(p) for p in parts]) if parts else np.array([])
        vals = vals[np.isfinite(vals)]
        return vals[vals > 0] if positive else vals

    def fitted(self, axis: str, panels: Sequence["Panel"] = ()) -> list[float]:
        """The axis range: fixed ends as given, free ends fitted to the data of this panel and
        of the panels sharing the axis."""
        log = getattr(self, f"{axis}log")
        fixed = self.limits[axis]
        if None not in fixed:
            return [float(v) for v in fixed]
        group = list(panels) or [self]
        vals = np.concatenate([p._values(axis, positive=log) for p in group])
        sticky = np.array([v for p in group for v in p.sticky[axis]])
        if not len(vals):
            lo, hi = (1.0, 10.0) if log else (0.0, 1.0)
        else:
            lo, hi = _nonsingular(float(vals.min()), float(vals.max()), log)
            tl, th = (np.log10(lo), np.log10(hi)) if log else (lo, hi)
            delta = (th - tl) * MARGIN
            a, b = (10 ** (tl - delta), 10 ** (th + delta)) if log else (tl - delta, th + delta)
            below = sticky[sticky <= lo + 1e-12 * max(abs(lo), 1)]
            above = sticky[sticky >= hi - 1e-12 * max(abs(hi), 1)]
            if log:
                below, above = below[below > 0], above[above > 0]
            lo = max(a, below.max()) if len(below) else a
            hi = min(b, above.min()) if len(above) else b
        return [fixed[0] if fixed[0] is not None else lo, fixed[1] if fixed[1] is not None else hi]

    # -- the spec -----------------------------------------------------------------------------
    def spec(self) -> Optional[dict[str, Any]]:
        if not self.visible or not (self.series or self.bands or self.image or self.rects
                                    or self.spans or self.rugs):
            return None
        xlim = self.fitted("x", self.shared or ())
        ylim = self.fitted("y")
        if self.inverted:
            ylim = ylim[::-1]
        series = list(self.series)
        if self.rugs:  # at 97% of the panel's height, as ticks along its top
            lo, hi = sorted(ylim)
            top = 10 ** (np.log10(lo) + 0.97 * (np.log10(hi) - np.log10(lo))) if self.ylog \
                else lo + 0.97 * (hi - lo)
            series += [{"label": r["label"], "color": r["color"], "alpha": 1.0, "width": 1.5,
                        "dash": False, "points": True, "x": r["x"],
                        "y": np.full(len(r["x"]), top)} for r in self.rugs]
        return {"title": self.title, "xlabel": self.xlabel, "ylabel": self.ylabel,
                "xlog": self.xlog, "ylog": self.ylog, "xlim": xlim, "ylim": ylim,
                "series": series, "bands": list(self.bands), "vlines": list(self.vlines),
                "hlines": list(self.hlines), "spans": list(self.spans),
                "rects": list(self.rects), "image": self.image, "legend": self.legend,
                "yticks": self.yticks, "notes": list(self.notes), "box": list(self.box),
                "render": {"legend_outside": self.legend_outside,
                           "labels": list(self.hist_labels), "colorbar": self.colorbar,
                           "marked_ticks": list(self.marked_ticks), "cell": self.cell}}


def _nonsingular(lo: float, hi: float, log: bool) -> tuple[float, float]:
    """A range with some width: a constant widens by 5% of its value each way (±0.05 at 0),
    as matplotlib does."""
    if hi - lo > 1e-15 * max(abs(lo), abs(hi), 1e-300):
        return lo, hi
    if log:
        return lo / 10 ** MARGIN, hi * 10 ** MARGIN
    if abs(lo) < 1e-300:
        return -MARGIN, MARGIN
    return lo - MARGIN * abs(lo), hi + MARGIN * abs(hi)


class Chart:
    """A figure's worth of panels: `grid()` lays them out, `spec()` gives the chart spec."""

    def __init__(self, height: float, width: float):
        self.height, self.width = float(height), float(width)
        self.panels: list[Panel] = []

    def grid(self, rows: int = 1, cols: int = 1, *, sharex: bool = False,
             height_ratios: Optional[Sequence[float]] = None,
             width_ratios: Optional[Sequence[float]] = None) -> list[Panel]:
        """Panels of a rows x cols grid, row by row (matplotlib's subplot geometry)."""
        tops, bottoms = _cells(TOP, BOTTOM, rows, HSPACE, height_ratios)
        lefts, rights = _cells(LEFT, RIGHT, cols, WSPACE, width_ratios)
        made = [Panel([lefts[c], bottoms[r], rights[c] - lefts[c], tops[r] - bottoms[r]])
                for r in range(rows) for c in range(cols)]
        grid = {"rows": rows, "cols": cols, "height_ratios": height_ratios,
                "width_ratios": width_ratios}
        for i, p in enumerate(made):  # where it sits, for renderers that lay panels out anew
            p.cell = {**grid, "row": i // cols, "col": i % cols}
        if sharex:
            for p in made:
                p.shared = made
        self.panels += made
        return made

    def panel(self) -> Panel:
        return self.grid()[0]

    def spec(self) -> Optional[dict[str, Any]]:
        """{"panels": [...], "width", "height"} in inches; None when nothing is drawn."""
        panels = [s for s in (p.spec() for p in self.panels) if s is not None]
        if not panels:
            return None
        return {"panels": panels, "width": self.width, "height": self.height}


def _cells(start: float, end: float, n: int, space: float,
           ratios: Optional[Sequence[float]]) -> tuple[list[float], list[float]]:
    """(near edges, far edges) of n cells from `start` towards `end`, `space` a share of the
    mean cell between them."""
    total = abs(start - end)
    cell = total / (n + space * (n - 1))
    ratios = list(ratios) if ratios is not None else [1.0] * n
    sizes = [r * cell * n / sum(ratios) for r in ratios]
    sign = -1 if end < start else 1
    near, far, at = [], [], 0.0
    for i, size in enumerate(sizes):
        at += space * cell if i else 0.0
        near.append(start + sign * at)
        at += size
        far.append(start + sign * at)
    return near, far
