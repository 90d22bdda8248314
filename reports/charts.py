"""The report's interactive charts: a chart spec (reports/chart.py) as the page's data.

The plot functions give chart specs (lines, filled bands, shaded spans, reference lines,
heatmap images, bars, titles, labels and scales). The page draws a spec with uPlot (zoom,
pan, hover values, series toggles), and `chart_svg.static_svg` draws the same spec as a
static SVG for readers without JavaScript and for printing.

Long series are downsampled to the minimum and maximum of each bucket, in step order, so a
one-step spike survives at every zoom.
"""
from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np

from tracelab.reports.downsample import envelope_minmax, minmax

# Points a chart's series share (per panel); the static SVG takes fewer.
CHART_POINTS = 6_000
MIN_SERIES_POINTS = 200


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
    """A JSON array of v to `digits` significant digits, null for NaN and Inf (Python's own
    formatting of a list is four times faster than numpy's string formatting)."""
    v = np.asarray(v, dtype=float)
    fmt = f"%.{digits}g"
    finite = np.isfinite(v)
    if finite.all():
        return "[" + ",".join([fmt % x for x in v.tolist()]) + "]"
    return "[" + ",".join([fmt % x if ok else "null"
                           for x, ok in zip(v.tolist(), finite.tolist())]) + "]"


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
        rest = {k: v for k, v in p.items() if k not in ("series", "bands", "image", "render")}
        rest["image"] = p["image"]["extent"] if p["image"] else None
        rest["static"] = _static(p)
        out.append(f'{{"info":{json.dumps(_clean(rest), allow_nan=False)},'
                   f'"series":[{",".join(series)}],"bands":[{",".join(bands)}]}}')
    return "[" + ",".join(out) + "]"


def _static(panel: dict[str, Any]) -> bool:
    """Whether the page cannot draw a panel live (a heatmap, bars): its figure stays an image."""
    return bool(panel["image"] or (panel["rects"] and not panel["series"]))


def rendered(chart) -> tuple[Optional[str], Optional[str]]:
    """(static SVG data URI, the page's chart JSON) of a Chart; (None, None) when it is empty.
    A figure with a panel the page cannot draw live has no JSON: the page shows a figure live
    only when every panel can be."""
    from markupsafe import Markup

    from tracelab.reports.chart_svg import svg_uri

    spec = chart.spec() if chart is not None else None
    if spec is None:
        return None, None
    if any(_static(p) for p in spec["panels"]):
        return svg_uri(spec), None
    # "<" as \u003c: the JSON sits in a <script type="application/json"> element.
    return svg_uri(spec), Markup(chart_json(spec).replace("<", "\\u003c"))
