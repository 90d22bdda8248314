"""The Markdown summary for tickets: verdict, the diagnosis (root causes, numbered, each with its
fix and what it explains), the findings table, and one or two key plots as PNG files beside it
(GitHub and Jira both take a pasted table; the images upload alongside)."""
from __future__ import annotations

import re
from urllib.parse import quote
from pathlib import Path
from typing import Any, Optional

from tracelab.core.files import write_atomic
from tracelab.core.findings import Diagnosis, skipped_reasons
from tracelab.core.printable import visible_lines
from tracelab.reports.context import build_context
from tracelab.reports.findings_context import root_causes
from tracelab.core.rules import Plot
from tracelab.reports.finding_plots import finding_figure, plot_kind
from tracelab.reports.overview import curves_figure

ICONS = {"error": "⛔", "warning": "⚠️", "info": "ℹ️", None: "✅"}
# Plots that already show the loss curve; other findings get the curves as a second PNG.
SHOWS_LOSS = {Plot.LOSS_SWINGS, Plot.LOSS_JUMP, Plot.LOSS, Plot.TRAIN_VS_EVAL, Plot.RUN_END}
_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~])")


def cell(text: Any) -> str:
    """Run-derived text made inert and single-line for a Markdown table cell."""
    s = " ".join(str(text).split())
    return _SPECIAL.sub(r"\\\1", s)


def key_plots(diagnosis: Diagnosis, path: Path) -> list[tuple[str, Optional[Path]]]:
    """The worst finding's plot and the loss curves, as PNGs named after the Markdown file;
    None for one whose values no plot can hold (near the float64 limit)."""
    from tracelab.reports.chart_png import to_png as draw

    def to_png(spec: dict[str, Any], target: Path) -> Optional[Path]:
        try:
            return draw(spec, target)
        except (ValueError, OverflowError):  # matplotlib's limits and ticks overflow
            return None

    out: list[tuple[str, Path]] = []
    shown = None
    leads = [d.finding for d in root_causes(diagnosis)[:3]]
    for f in leads:  # the most likely cause that has a plot
        chart, _ = finding_figure(diagnosis, f)
        spec = chart.spec() if chart is not None else None
        if spec is not None:
            target = path.with_name(f"{path.stem}-{f.rule}.png")
            out.append((f"{f.rule} on {f.subject}", to_png(spec, target)))
            shown = plot_kind(diagnosis, f)
            break
    if shown not in SHOWS_LOSS:
        chart = curves_figure(diagnosis.run)
        spec = chart.spec() if chart is not None else None
        if spec is not None:
            target = path.with_name(f"{path.stem}-curves.png")
            out.append(("loss and metrics", to_png(spec, target)))
    return out


def render_markdown(ctx: dict[str, Any], plots: list[tuple[str, Optional[Path]]],
                    html_name: Optional[str] = None) -> str:
    run, v = ctx["run"], ctx["verdict"]
    lines = [f"## tracelab: {cell(run['name'])}", ""]
    lines.append(f"**{ICONS[v['worst']]} {v['label'].upper()}: {cell(v['text'])}**")
    lines.append("")
    status = run["state"] + (f" ({run['detail']})" if run["detail"] else "")
    lines.append(f"Status: {cell(status)} · steps {run['steps_text']} · duration "
                 f"{run['duration']}")
    facts = " · ".join(f"{k}: {cell(t)}" for k, t in run["highlights"][:5])
    if facts:
        lines.extend(["", facts])
    lines.append("")
    if ctx["diagnoses"]:
        lines.extend(["### Diagnosis", ""])
        for d in ctx["diagnoses"]:
            lines.extend(_diagnosis_lines(d))
        lines.append("")
    if ctx["findings"]:
        lines.append("| Severity | Rule | Subject | Steps | Cause | Message | Fix |")
        lines.append("|---|---|---|---|---|---|---|")
        for f in ctx["findings"]:
            steps = f["steps_text"].replace("steps ", "").replace("step ", "")
            cause = f"{f['cause']['n']}. {f['cause']['rule']}" if f["cause"] else "root cause"
            lines.append(f"| {ICONS[f['severity']]} {f['label']} | {f['code']} {f['rule']} | "
                         f"{cell(f['subject'])} | {steps} | {cell(cause)} | "
                         f"{cell(f['message'])} | {cell(f['fix'])} |")
    else:
        lines.append(f"No problems found by the {len(ctx['rules_run'])} rules that ran.")
    lines.append("")
    for title, png in plots:
        # Percent-encoded: a space or a parenthesis in the name would end the link.
        lines.append(f"![{cell(title)}]({quote(png.name)})" if png is not None else
                     f"_The plot of {cell(title)} is left out: its values are too large to "
                     "draw._")
        lines.append("")
    notes = []
    if ctx["skipped"]:
        why = skipped_reasons(s["reason"] for s in ctx["skipped"])
        notes.append(f"Skipped {len(ctx['skipped'])} rules ({why}): "
                     + ", ".join(s["rule"] for s in ctx["skipped"]) + ".")
    if ctx["problems"]:
        notes.append("Not read: " + cell("; ".join(ctx["problems"])) + ".")
    if ctx["errors"]:
        notes.append("Rules that broke: " + cell(", ".join(e["rule"] for e in ctx["errors"]))
                     + ".")
    notes.append(f"_Generated by tracelab {ctx['tracelab_version']}"
                 + (f"; full report: {cell(html_name)}._" if html_name else "._"))
    for note in notes:
        lines.extend([note, ""])
    # Control and bidirectional characters from the run (ESC, BEL, U+202E) shown escaped.
    return visible_lines("\n".join(lines).rstrip("\n").replace("\n\n\n", "\n\n") + "\n")


def _diagnosis_lines(d: dict[str, Any]) -> list[str]:
    steps = f" · {d['steps_text']}" if d["steps_text"] != "—" else ""
    lines = [f"{d['n']}. {ICONS[d['severity']]} **Root cause: {cell(d['rule'])}** "
             f"({d['code']}) on {cell(d['subject'])}{steps} · confidence {d['level']}  ",
             f"   {cell(d['message'])}"]  # the two spaces above: a line break in Markdown
    if d["fix"]:
        lines.append(f"   - **Fix:** {cell(d['fix'])}")
    for note in d["missing"]:
        lines.append(f"   - _{cell(note)}_")
    if d["chain"]:
        lines.append("   - Explains: " + "; ".join(
            f"{cell(c['rule'])} ({cell(c['subject'])}, {c['steps_text']})" for c in d["chain"]))
    return lines


def write_markdown(diagnosis: Diagnosis, path: Path, *, html_name: Optional[str] = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ctx = build_context(diagnosis, plots=False)
    plots = key_plots(diagnosis, path)
    return write_atomic(path, render_markdown(ctx, plots, html_name))

