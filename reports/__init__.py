"""Renderers of a Diagnosis: HTML (one self-contained file), Markdown and JSON.

    context.py        the report's content as plain data (what the renderers draw)
    plots.py          overview figures and drawing helpers (matplotlib, no pyplot)
    finding_plots.py  one plot per finding, keyed by rule name
    html.py           the HTML report and the demo's index page (Jinja2, autoescaped)
    markdown.py       the ticket summary with its key plots as PNG files
"""
from __future__ import annotations

import json
from pathlib import Path

from tracelab.findings import Diagnosis
from tracelab.reports.html import write_html, write_index
from tracelab.reports.markdown import write_markdown

__all__ = ["write_html", "write_markdown", "write_json", "json_text", "write_index"]


def json_text(diagnosis: Diagnosis) -> str:
    return json.dumps(diagnosis.to_dict(), indent=2, default=str) + "\n"


def write_json(diagnosis: Diagnosis, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json_text(diagnosis), encoding="utf-8")
    return path
