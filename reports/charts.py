"""Interactive charts from the report's figures: the figure's data, not its pixels.

The plot functions build matplotlib Figures; rendering one to SVG costs 0.3-1 s. Here a
Figure's axes are read instead (lines, filled bands, shaded spans, reference lines, heatmap
images, bars, titles, labels and scales) into a small chart spec. The page draws that spec
with uPlot (zoom, pan, hover values, series toggles), and `chart_svg.static_svg` draws the
same spec as a static SVG for readers without JavaScript and for printing.

Long series are downsampled to the minimum and maximum of each bucket, in step order, so a
one-step spike survives at every zoom.
"""
from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np
from matplotlib.colors import to_hex

from tracelab.reports.downsample import envelope_minmax, minmax

# Points a chart's series share (per panel); the static SVG takes fewer.
CHART_POINTS = 6_000
MIN_SERIES_POINTS = 200


def _hex(color: Any) -> str:
    try:
        return to_hex(color)
    except (ValueError, TypeError):
        return "#555555"


def _alpha(artist) -> float:
    a = artist.get_alpha()
    return 1.0 if a is None else float(a)


def _label(artist) -> str:
    label = str(artist.get_label() or "")
    return "" if label.startswith("_") else label


def figure_chart(fig) -> Optional[dict[str, Any]]:
    """The chart spec of a Figure: {"panels": [...], "height": inches}; None if empty."""
    if fig is None:
        return None
    bars = {id(a) for a in fig.axes if getattr(a, "_colorbar", None) is not None}
    panels = [p for a in fig.axes if a.get_visible() and id(a) not in bars
              for p in [_panel(a)] if p is not None]
    if not panels:
        return None
    width, height = fig.get_size_inches()
    return {"panels": panels, "width": float(width), "height": float(height)}


def _title(ax) -> str:
    """The axes' title wherever it sits: the report's style puts titles on the left, where
    `get_title()` (the centre one) does not look."""
    return next((t for t in (ax.get_title(loc) for loc in ("left", "center", "right")) if t), "")


def _panel(ax) -> Optional[dict[str, Any]]:
    xt, yt = ax.get_xaxis_transform(), ax.get_yaxis_transform()
    p: dict[str, Any] = {
        "title": _title(ax), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
        "xlog": ax.get_xscale() == "log", "ylog": ax.get_yscale() == "log",
        "xlim": [float(v) for v in ax.get_xlim()], "ylim": [float(v) for v in ax.get_ylim()],
        "series": [], "bands": [], "vlines": [], "hlines": [], "spans": [], "rects": [],
        "image": None, "legend": ax.get_legend() is not None, "yticks": None, "notes": [],
        "box": [float(v) for v in ax.get_position().bounds]}
    for line in ax.get_lines():
        if not line.get_visible():
            continue
        x = np.asarray(line.get_xdata(), dtype=float)
        y = np.asarray(line.get_ydata(), dtype=float)
        color, tr = _hex(line.get_color()), line.get_transform()
        if not len(x):
            continue
        if tr is xt:
            p["vlines"].append({"x": float(x[0]), "color": color, "label": _label(line)})
            continue
        if tr is yt:
            p["hlines"].append({"y": float(y[0]), "color": color, "label": _label(line)})
            continue
        style = line.get_linestyle()
        p["series"].append({"label": _label(line), "color": color, "alpha": _alpha(line),
                            "width": float(line.get_linewidth()),
                            "dash": style not in ("-", "solid"),
                            "points": style in ("None", "", " ", "none"), "x": x, "y": y})
    for patch in ax.patches:
        if not patch.get_visible() or not hasattr(patch, "get_width"):
            continue
        x0, y0 = float(patch.get_x()), float(patch.get_y())
        w, h = float(patch.get_width()), float(patch.get_height())
        entry = {"color": _hex(patch.get_facecolor()), "alpha": _alpha(patch)}
        tr = patch.get_data_transform()
        if tr is xt:
            p["spans"].append({**entry, "x0": x0, "x1": x0 + w})
        elif tr is ax.transData:
            p["rects"].append({**entry, "x": x0, "y": y0, "w": w, "h": h})
    for coll in ax.collections:
        _collection(ax, coll, p)
    for im in ax.images:
        p["image"] = _image(im)
    labels = _tick_labels(ax.yaxis)
    if labels:
        p["yticks"] = labels
    for text in ax.texts:
        if text.get_visible() and text.get_text().strip():
            p["notes"].append(text.get_text().strip())
    if not (p["series"] or p["bands"] or p["image"] or p["rects"] or p["spans"]):
        return None
    return p


def _tick_labels(axis) -> Optional[list[list]]:
    """[position, text] of ticks given with labels (`set_yticks(ticks, labels)`), read from the
    formatter: asking the axis for its tick labels would build every tick artist."""
    func = getattr(axis.get_major_formatter(), "func", None)
    table = getattr(func, "args", [None])[0] if func is not None else None
    if isinstance(table, dict):
        return [[float(t), str(s)] for t, s in table.items()]
    seq = getattr(axis.get_major_formatter(), "seq", None)
    if seq:
        return [[float(t), str(s)] for t, s in zip(axis.get_majorticklocs(), seq)]
    return None


def _collection(ax, coll, p: dict[str, Any]) -> None:
    name = type(coll).__name__
    if not coll.get_visible():
        return
    colors = coll.get_facecolor()
    color = _hex(colors[0]) if len(colors) else "#555555"
    if "PolyCollection" in name:  # fill_between: one polygon of (x, lower) and (x, upper)
        for path in coll.get_paths():
            v = path.vertices
            if len(v) < 3:
                continue
            xs, inv = np.unique(v[:, 0], return_inverse=True)
            lo = np.full(len(xs), np.inf)
            hi = np.full(len(xs), -np.inf)
            np.minimum.at(lo, inv.reshape(-1), v[:, 1])
            np.maximum.at(hi, inv.reshape(-1), v[:, 1])
            p["bands"].append({"label": _label(coll), "color": color, "alpha": _alpha(coll),
                               "x": xs, "lo": lo, "hi": hi})
    elif name == "PathCollection":  # scatter
        xy = np.asarray(coll.get_offsets(), dtype=float)
        if len(xy):
            p["series"].append({"label": _label(coll), "color": color, "alpha": _alpha(coll),
                                "width": 1.0, "dash": False, "points": True,
                                "x": xy[:, 0], "y": xy[:, 1]})
    elif name == "LineCollection":  # error bars, vlines: drawn as short segments
        colors = coll.get_edgecolor()
        color = _hex(colors[0]) if len(colors) else "#555555"
        for seg in coll.get_segments()[:200]:
            if len(seg) >= 2 and seg[0][0] == seg[-1][0]:
                p["rects"].append({"x": float(seg[0][0]), "y": float(min(seg[0][1], seg[-1][1])),
                                   "w": 0.0, "h": float(abs(seg[-1][1] - seg[0][1])),
                                   "color": color, "alpha": 1.0})


def _image(im) -> dict[str, Any]:
    from tracelab.reports.png import png_uri

    rgba = im.to_rgba(im.get_array(), bytes=True)
    x0, x1, y0, y1 = (float(v) for v in im.get_extent())
    return {"uri": png_uri(np.asarray(rgba)), "extent": [x0, x1, y0, y1]}


def _clean(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, (float, np.floating)):
        return float(v) if np.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    return v


# -- the page's data ----------------------------------------------------------------------------
def _numbers(v: np.ndarray, digits: int) -> str:
    v = np.asarray(v, dtype=float)
    text = np.char.mod(f"%.{digits}g", np.where(np.isfinite(v), v, 0.0))
    text = np.where(np.isfinite(v), text, "null")
    return "[" + ",".join(text.tolist()) + "]"


def chart_json(chart: dict[str, Any], points: int = CHART_POINTS) -> str:
    """The spec as the page's JSON: series downsampled, numbers to 5 significant digits."""
    out = []
    for p in chart["panels"]:
        lines = len(p["series"]) + 2 * len(p["bands"])
        buckets = max(MIN_SERIES_POINTS, points // max(lines, 1)) // 2
        series = []
        for s in p["series"]:
            x, y = minmax(s["x"], s["y"], buckets)
            meta = {k: s[k] for k in ("label", "color", "alpha", "width", "dash", "points")}
            series.append(f'{{"meta":{json.dumps(meta)},"x":{_numbers(x, 8)},'
                          f'"y":{_numbers(y, 5)}}}')
        bands = []
        for b in p["bands"]:
            x, lo, hi = envelope_minmax(b["x"], b["lo"], b["hi"], buckets)
            meta = {k: b[k] for k in ("label", "color", "alpha")}
            bands.append(f'{{"meta":{json.dumps(meta)},"x":{_numbers(x, 8)},'
                         f'"lo":{_numbers(lo, 5)},"hi":{_numbers(hi, 5)}}}')
        rest = {k: v for k, v in p.items() if k not in ("series", "bands", "image")}
        rest["image"] = p["image"]["extent"] if p["image"] else None
        rest["static"] = bool(p["image"] or (p["rects"] and not p["series"]))
        out.append(f'{{"info":{json.dumps(_clean(rest), allow_nan=False)},'
                   f'"series":[{",".join(series)}],"bands":[{",".join(bands)}]}}')
    return "[" + ",".join(out) + "]"


def rendered(fig) -> tuple[Optional[str], Optional[str]]:
    """(static image URI, chart JSON or None) of a Figure: the chart and its SVG when the
    figure reads as one, else matplotlib's own SVG (figures of other artists)."""
    from markupsafe import Markup

    from tracelab.reports.chart_svg import svg_uri
    from tracelab.reports.plots import to_uri

    if fig is None:
        return None, None
    try:
        chart = figure_chart(fig)
        uri, data = (svg_uri(chart), chart_json(chart)) if chart is not None else (None, None)
    except Exception:  # odd data costs the chart, never the plot
        chart = None
    if chart is None:
        return to_uri(fig), None
    # "<" as \u003c: the JSON sits in a <script type="application/json"> element.
    return uri, Markup(data.replace("<", "\\u003c"))
