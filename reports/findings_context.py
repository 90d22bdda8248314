"""The findings and the diagnoses of the report's context: each root cause, then the findings
it explains; the diagnosis section names them by anchor. Plain data, like the rest of the
context (see context.py)."""
from __future__ import annotations

from typing import Any

from tracelab.core.findings import Diagnosis, Finding, RootCause
from tracelab.reports import fmt
from tracelab.reports.finding_plots import PLOTS, finding_figure, plot_kind
from tracelab.reports.chart_html import rendered

SEVERITY_LABELS = {"error": "Error", "warning": "Warning", "info": "Info", None: "OK"}
# Findings' plots share this many bytes of the report's 1.5 MB; the overview takes the rest.
MAX_FINDING_PLOTS = 12
FINDING_PLOT_BYTES = 800_000


def root_causes(d: Diagnosis) -> list[RootCause]:
    """The diagnoses; a hand-built Diagnosis without them reads as one per finding."""
    return list(d.diagnoses) or [RootCause(f, fix=f.fix) for f in d.findings]


def findings_and_diagnoses(d: Diagnosis, *, plots: bool = True) -> dict[str, Any]:
    """"findings" in diagnosis order (each root cause, then what it explains) and
    "diagnoses", each naming its root's and its symptoms' anchors."""
    roots = root_causes(d)
    order = [f for rc in roots for f in (rc.finding, *rc.explains)]
    listed = {f.id for f in order}
    order += [f for f in d.findings if f.id not in listed]
    cause = {e.id: (n, rc) for n, rc in enumerate(roots, 1) for e in rc.explains}
    findings = findings_context(d, order, cause, plots=plots)
    anchor = {c["finding_id"]: c for c in findings}
    out = []
    for n, rc in enumerate(roots, 1):
        f, root = rc.finding, anchor[rc.finding.id]
        why = {effect: (by, text) for by, effect, text in rc.links}
        names = {x.id: x.rule for x in (f, *rc.explains)}
        out.append({
            "n": n, "anchor": root["id"], "rule": f.rule, "code": f.code,
            "severity": rc.worst.value, "label": SEVERITY_LABELS[rc.worst.value],
            "subject": f.subject, "steps_text": fmt.steps(f.steps), "message": f.message,
            "fix": rc.fix, "confidence": rc.confidence, "level": rc.level,
            "basis": [b for b in rc.basis if not b.startswith("not recorded:")],
            "missing": [b for b in rc.basis if b.startswith("not recorded:")],
            "chain": [{"anchor": anchor[e.id]["id"], "rule": e.rule, "subject": e.subject,
                       "steps_text": fmt.steps(e.steps), "severity": e.severity.value,
                       "label": SEVERITY_LABELS[e.severity.value],
                       "by": names.get(why.get(e.id, ("", ""))[0], ""),
                       "why": why.get(e.id, ("", ""))[1]} for e in rc.explains],
            # The key plot: the root's own, shown once, here, for the most likely cause.
            "plot": root["plot"] if n == 1 and root["plot"]["uri"] else None,
        })
    if out and out[0]["plot"]:
        anchor[roots[0].finding.id]["plot_above"] = True
    return {"findings": findings, "diagnoses": out}


def findings_context(d: Diagnosis, order: list[Finding], cause: dict[str, tuple],
                     *, plots: bool = True) -> list[dict[str, Any]]:
    """Every finding; the first ones (root causes first) get plots until the plot budget is
    spent, so a run with hundreds of findings still gives a file small enough to attach."""
    out, spent, drawn = [], 0, 0
    for i, f in enumerate(order, 1):
        room = plots and drawn < MAX_FINDING_PLOTS and spent < FINDING_PLOT_BYTES
        ctx = finding_context(d, f, i, plots=room)
        if plots and not room and ctx["plot"]["function"]:
            ctx["plot"]["note"] = (f"Plot left out to keep this file small; the first {drawn} "
                                   "findings have theirs.")
        spent += len(ctx["plot"]["uri"] or "") + len(ctx["plot"]["chart"] or "")
        drawn += ctx["plot"]["uri"] is not None
        n, rc = cause.get(f.id, (None, None))
        # An explained symptom shows its cause, not a fix of its own that may contradict it.
        ctx.update(finding_id=f.id, plot_above=False, cause=None if rc is None else {
            "n": n, "rule": rc.finding.rule, "subject": rc.finding.subject,
            "anchor": f"finding-{order.index(rc.finding) + 1}"})
        if rc is not None:
            ctx["fix"] = ""
        out.append(ctx)
    return out


def finding_context(d: Diagnosis, f: Finding, index: int, *, plots: bool = True) -> dict[str, Any]:
    spec = d.rules.get(f.rule)
    doc = fmt.parse_doc(spec.doc) if spec else {"summary": "", "sections": []}
    plot_fn = PLOTS[plot_kind(d, f)]
    plot = {"function": getattr(plot_fn, "__name__", str(plot_fn)) if plot_fn else None,
            "uri": None, "chart": None, "note": "", "alt": f"plot for {f.rule} on {f.subject}"}
    if plots and plot_fn is not None:
        chart, plot["note"] = finding_figure(d, f)
        try:
            plot["uri"], plot["chart"] = rendered(chart)
        except Exception as exc:  # odd data costs a plot, never the report
            plot["note"] = f"plot unavailable ({type(exc).__name__}: {exc})"
    return {
        "id": f"finding-{index}",
        "rule": f.rule,
        "code": f.code,
        "severity": f.severity.value,
        "label": SEVERITY_LABELS[f.severity.value],
        "subject": f.subject,
        "steps": list(f.steps) if f.steps else None,
        "steps_text": fmt.steps(f.steps),
        "message": f.message,
        "fix": f.fix,
        "evidence": [evidence_row(k, v) for k, v in f.evidence.items()],
        "doc": doc,
        "plot": plot,
    }


def evidence_row(key: str, value: Any) -> dict[str, Any]:
    """One evidence entry: text, or a small table when the value is a list of records."""
    row = {"key": fmt.humanize(key), "text": "", "table": None}
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, dict) for v in value):
        columns = list(dict.fromkeys(k for v in value for k in v))
        row["table"] = {"columns": [fmt.humanize(c) for c in columns],
                        "rows": [[fmt.value(v.get(c)) for c in columns] for v in value[:20]]}
        row["text"] = f"{len(value)} entries" + (", first 20 shown" if len(value) > 20 else "")
    else:
        row["text"] = fmt.value(value)
    return row
