"""Renderers of a Diagnosis: HTML (one self-contained file), Markdown and JSON."""
from __future__ import annotations

import html
import json
from pathlib import Path

from tracelab.findings import Diagnosis


def json_text(diagnosis: Diagnosis) -> str:
    return json.dumps(diagnosis.to_dict(), indent=2, default=str) + "\n"


def write_json(diagnosis: Diagnosis, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json_text(diagnosis), encoding="utf-8")
    return path


def write_markdown(diagnosis: Diagnosis, path: Path) -> Path:
    path = Path(path)
    rows = ["| severity | rule | subject | steps | message | fix |", "|---|---|---|---|---|---|"]
    for f in diagnosis.findings:
        steps = f"{f.steps[0]}–{f.steps[1]}" if f.steps else ""
        cells = [f.severity.value, f.rule, f.subject, steps, f.message, f.fix]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# tracelab: {diagnosis.run.name}\n\n**{diagnosis.verdict()}**\n\n"
                    + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def write_html(diagnosis: Diagnosis, path: Path) -> Path:
    path = Path(path)
    items = "".join(f"<li><b>{html.escape(f.severity.value)}</b> {html.escape(f.rule)} "
                    f"[{html.escape(f.subject)}]: {html.escape(f.message)}</li>"
                    for f in diagnosis.findings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"<!doctype html><meta charset=utf-8><title>tracelab</title>"
                    f"<h1>{html.escape(diagnosis.run.name)}</h1><p>{diagnosis.verdict()}</p>"
                    f"<ul>{items}</ul>", encoding="utf-8")
    return path
