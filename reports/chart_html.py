"""A chart spec (reports/chart.py) as the HTML page holds it: the data its interactive charts
draw with uPlot (zoom, pan, hover values, series toggles), and the same chart as a static SVG
for readers without JavaScript and for printing.

Long series are downsampled to the minimum and maximum of each bucket, in step order, so a
one-step spike survives at every zoom; the static SVG's plain polylines take fewer buckets, in
page pixels.
"""
from __future__ import annotations

import base64
import json
from html import escape
from typing import Any, Optional

import numpy as np

from tracelab.reports.downsample import envelope_minmax, minmax

# Points a chart's series share (per panel); the static SVG takes fewer.
CHART_POINTS = 6_000
MIN_SERIES_POINTS = 200
# The static SVG's page pixels and points.
WIDTH = 760
SVG_POINTS = 2_400  # per panel, all series together
_M = (46, 10, 22, 30)  # margins: left, right, top, bottom


# -- the page's data ----------------------------------------------------------------------------
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

    spec = chart.spec() if chart is not None else None
    if spec is None:
        return None, None
    if any(_static(p) for p in spec["panels"]):
        return svg_uri(spec), None
    # "<" as \u003c: the JSON sits in a <script type="application/json"> element.
    return svg_uri(spec), Markup(chart_json(spec).replace("<", "\\u003c"))


# -- the static SVG ----------------------------------------------------------------------------
def _scale(lo: float, hi: float, log: bool, a: float, b: float):
    if log:
        lo, hi = np.log10(max(lo, 1e-300)), np.log10(max(hi, 1e-300))
    span = (hi - lo) or 1.0

    def f(v):
        v = np.asarray(v, dtype=float)
        if log:
            v = np.log10(np.where(v > 0, v, np.nan))
        return a + (v - lo) / span * (b - a)
    return f


def _num(v: float) -> str:
    return f"{v:.3g}"


def _points(x: np.ndarray, y: np.ndarray) -> list[str]:
    """Polyline point lists, split at gaps."""
    ok = np.isfinite(x) & np.isfinite(y)
    out, run = [], []
    for good, px, py in zip(ok.tolist(), np.round(x, 1).tolist(), np.round(y, 1).tolist()):
        if good:
            run.append(f"{px:g},{py:g}")
        elif run:
            out.append(" ".join(run))
            run = []
    if run:
        out.append(" ".join(run))
    return out


def _panel(p: dict[str, Any], left: float, top: float, w: float, h: float) -> list[str]:
    x0, x1 = left + _M[0], left + w - _M[1]
    y0, y1 = top + _M[2], top + h - _M[3]
    (xa, xb), (ya, yb) = p["xlim"], p["ylim"]
    if None in (xa, xb, ya, yb):
        return []
    fx = _scale(xa, xb, p["xlog"], x0, x1)
    fy = _scale(ya, yb, p["ylog"], y1, y0)
    out = [f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" height="{y1 - y0:.1f}" '
           'fill="#fff" stroke="#bbb"/>']
    clip = f'clip-path="url(#c{int(left)}_{int(top)})"'
    out.append(f'<clipPath id="c{int(left)}_{int(top)}"><rect x="{x0:.1f}" y="{y0:.1f}" '
               f'width="{x1 - x0:.1f}" height="{y1 - y0:.1f}"/></clipPath><g {clip}>')
    for s in p["spans"]:
        a, b = fx([s["x0"], s["x1"]])
        out.append(f'<rect x="{min(a, b):.1f}" y="{y0:.1f}" width="{abs(b - a):.1f}" '
                   f'height="{y1 - y0:.1f}" fill="{s["color"]}" fill-opacity="{s["alpha"]:.2f}"/>')
    if p["image"]:
        ex0, ex1, ey0, ey1 = p["image"]["extent"]
        (ia, ib), (ja, jb) = fx([ex0, ex1]), fy([ey0, ey1])
        out.append(f'<image x="{min(ia, ib):.1f}" y="{min(ja, jb):.1f}" width="{abs(ib - ia):.1f}" '
                   f'height="{abs(jb - ja):.1f}" preserveAspectRatio="none" '
                   f'style="image-rendering:pixelated" href="{p["image"]["uri"]}"/>')
    xs, ys = sorted((xa, xb)), sorted((ya, yb))
    for r in p["rects"]:  # clipped to the axes first: a bar from 0 on a log axis
        (a, b) = fx(np.clip([r["x"], r["x"] + r["w"]], *xs))
        (c, d) = fy(np.clip([r["y"], r["y"] + r["h"]], *ys))
        out.append(f'<rect x="{min(a, b):.1f}" y="{min(c, d):.1f}" width="{max(abs(b - a), 1):.1f}"'
                   f' height="{abs(d - c):.1f}" fill="{r["color"]}" '
                   f'fill-opacity="{r["alpha"]:.2f}"/>')
    lines = len(p["series"]) + len(p["bands"])
    buckets = max(40, SVG_POINTS // max(lines, 1) // 2)
    for b in p["bands"]:
        x, lo, hi = envelope_minmax(b["x"], b["lo"], b["hi"], buckets)
        px = fx(x)
        for pts in _points(np.r_[px, px[::-1]], np.r_[fy(hi), fy(lo)[::-1]]):
            out.append(f'<polygon points="{pts}" fill="{b["color"]}" '
                       f'fill-opacity="{b["alpha"]:.2f}"/>')
    for s in p["series"]:
        x, y = minmax(s["x"], s["y"], buckets)
        if s["points"]:
            for px, py in zip(fx(x)[:400], fy(y)[:400]):
                if np.isfinite(px) and np.isfinite(py):
                    out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2" fill="{s["color"]}"/>')
            continue
        dash = ' stroke-dasharray="4 3"' if s["dash"] else ""
        for pts in _points(fx(x), fy(y)):
            out.append(f'<polyline points="{pts}" fill="none" stroke="{s["color"]}" '
                       f'stroke-opacity="{s["alpha"]:.2f}" stroke-width="{s["width"]:.1f}"{dash}/>')
    for v in p["vlines"]:
        a = float(fx(v["x"]))
        out.append(f'<line x1="{a:.1f}" x2="{a:.1f}" y1="{y0:.1f}" y2="{y1:.1f}" '
                   f'stroke="{v["color"]}" stroke-dasharray="3 2"/>')
    for v in p["hlines"]:
        a = float(fy(v["y"]))
        out.append(f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{a:.1f}" y2="{a:.1f}" '
                   f'stroke="{v["color"]}" stroke-dasharray="3 2"/>')
    out.append("</g>")
    t = 'font-size="10" fill="#333"'
    out.append(f'<text x="{x0:.1f}" y="{top + 14:.1f}" font-size="11" font-weight="600" '
               f'fill="#222">{escape(p["title"])}</text>')
    out.append(f'<text x="{x0:.1f}" y="{y1 + 12:.1f}" {t}>{_num(xa)}</text>'
               f'<text x="{x1:.1f}" y="{y1 + 12:.1f}" text-anchor="end" {t}>{_num(xb)}</text>'
               f'<text x="{(x0 + x1) / 2:.1f}" y="{y1 + 24:.1f}" text-anchor="middle" {t}>'
               f'{escape(p["xlabel"])}</text>')
    if p["yticks"]:
        for pos, text in p["yticks"][:40]:
            yy = float(fy(pos))
            if y0 <= yy <= y1:
                out.append(f'<text x="{x0 - 3:.1f}" y="{yy + 3:.1f}" text-anchor="end" '
                           f'font-size="7" fill="#333">{escape(text[:14])}</text>')
    else:
        out.append(f'<text x="{x0 - 3:.1f}" y="{y1:.1f}" text-anchor="end" {t}>{_num(ya)}</text>'
                   f'<text x="{x0 - 3:.1f}" y="{y0 + 8:.1f}" text-anchor="end" {t}>{_num(yb)}'
                   '</text>')
    labels = [s for s in p["series"] if s["label"]] + [b for b in p["bands"] if b["label"]]
    for i, s in enumerate(labels[:8]):
        out.append(f'<text x="{x1 - 4:.1f}" y="{y0 + 12 + 11 * i:.1f}" text-anchor="end" '
                   f'font-size="9" fill="{s["color"]}">{escape(s["label"][:40])}</text>')
    return out


def static_svg(chart: dict[str, Any]) -> str:
    """The chart as an SVG document."""
    height = WIDTH * chart["height"] / chart["width"]
    parts = []
    for p in chart["panels"]:
        bx, by, bw, bh = p["box"]
        parts += _panel(p, bx * WIDTH - 20 * bx, (1 - by - bh) * height - 10 * (1 - by - bh),
                        bw * WIDTH + 30, bh * height + 30)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" '
            f'width="{WIDTH}" height="{height:.0f}" font-family="sans-serif">'
            + "".join(parts) + "</svg>")


def svg_uri(chart: dict[str, Any]) -> str:
    data = static_svg(chart).encode("utf-8")
    return "data:image/svg+xml;base64," + base64.b64encode(data).decode("ascii")
