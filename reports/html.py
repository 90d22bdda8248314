"""The HTML report and the index page: Jinja2 templates with autoescape, one file each."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, Union

from jinja2 import StrictUndefined

from tracelab.core.files import write_atomic
from tracelab.core.findings import Diagnosis, Severity
from tracelab.reports.context import SEVERITY_LABELS, build_context
from tracelab.reports.templating import environment, page_script

_env = environment(undefined=StrictUndefined, trim_blocks=False, lstrip_blocks=False,
                   keep_trailing_newline=True)


# The run state's icon: it repeats, in shape, what the word and the colour say.
STATUS_ICONS = {"completed": None, "failed": "error", "killed": "error", "running": "warning"}


def render_html(context: Mapping[str, Any]) -> str:
    script, script_csp = page_script("vendor/uplot.min.js", "charts.js", "report.js")
    return _env.get_template("report.html.j2").render(status_icons=STATUS_ICONS, script=script,
                                                      script_csp=script_csp, **context)


def write_html(diagnosis: Diagnosis, path: Path) -> Path:
    """Write the self-contained HTML report of a diagnosis; returns the path written."""
    path = Path(path)
    text = render_html(build_context(diagnosis))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)
    return path


# -- index ----------------------------------------------------------------------------------------
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
Entry = Union[Mapping[str, Any], Sequence[Any]]


def _entry(e: Entry) -> dict[str, Any]:
    """A dict {name, report, verdict, worst?, counts?, description?} or a (name, report, verdict)
    tuple, normalized."""
    if not isinstance(e, Mapping):
        name, report, verdict = (list(e) + [None, None, None])[:3]
        e = {"name": name, "report": report, "verdict": verdict}
    worst = e.get("worst")
    worst = Severity.parse(worst).value if worst else None
    counts = dict(e.get("counts") or {})
    report = str(e.get("report", ""))
    if _SCHEME.match(report) and not report.startswith(("file:", "http:", "https:")):
        report = "./" + report  # a relative path, never a javascript: URL
    return {"name": str(e.get("name", "")), "report": report,
            "verdict": str(e.get("verdict") or ""), "worst": worst,
            "label": SEVERITY_LABELS[worst], "counts": counts,
            "description": str(e.get("description") or ""),
            "expect": str(e.get("expect") or "")}


def write_index(entries: Iterable[Entry], path: Path, *, title: str = "tracelab demo") -> Path:
    """An HTML page linking every report: entries give name, report (a path relative to the
    index page), verdict, and optionally worst severity, counts and a description."""
    from tracelab._version import __version__
    path = Path(path)
    rows = [_entry(e) for e in entries]
    text = _env.get_template("index.html.j2").render(entries=rows, title=title,
                                                     tracelab_version=__version__)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)
    return path
