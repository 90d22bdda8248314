"""Renderers of a Diagnosis: HTML (one self-contained file), Markdown and JSON.

    context.py        the report's content as plain data (what the renderers draw)
    chart.py          the chart builder the plot functions draw on: chart data, no pixels
    plots.py          drawing helpers and data shaping; overview.py the overview charts
    finding_plots.py  one plot per finding, by the plot kind its rule declares
    chart_html.py     a chart as the page holds it: data for its interactive charts (uPlot)
                      and the same as a static SVG; downsample.py keeps extremes
    heatmap_pixels.py a heatmap's colours and its PNG bytes
    chart_png.py      a chart as a PNG file (matplotlib), for the Markdown summary
    html.py           the HTML report and the demo's index page (Jinja2, autoescaped)
    markdown.py       the ticket summary with its key plots as PNG files
    text.py           the diagnosis as text for a terminal
    diff_report.py    `tracelab diff` as text and as one HTML page
    batch_index.py    the sortable index page of `tracelab batch`

The HTML and Markdown writers are imported on first use: they bring Jinja2 (and, for the
Markdown summary's PNGs only, matplotlib), which a command that writes neither should not
pay for. The HTML report never imports matplotlib.
"""
from __future__ import annotations

from pathlib import Path

from tracelab.core.files import write_atomic
from tracelab.core.findings import Diagnosis
from tracelab.core.findings import json_text as strict_json

__all__ = ["write_html", "write_markdown", "write_json", "json_text", "write_index"]


def json_text(diagnosis: Diagnosis) -> str:
    return strict_json(diagnosis.to_dict())


def write_json(diagnosis: Diagnosis, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, json_text(diagnosis))


_LAZY = {"write_html": "tracelab.reports.html", "write_index": "tracelab.reports.html",
         "write_markdown": "tracelab.reports.markdown"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tracelab.reports' has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(module), name)
