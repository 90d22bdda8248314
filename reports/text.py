"""The diagnosis as text for a terminal: the root causes first, numbered, each with its fix and
what it explains; then the explained findings, one line each, under their cause's number."""
from __future__ import annotations

import sys

from tracelab.core.findings import Diagnosis, Finding, RootCause, skipped_reasons
from tracelab.core.printable import VisibleStream
from tracelab.core.run_status import recording_stopped


def steps_text(f: Finding) -> str:
    if not f.steps:
        return ""
    return f"steps {f.steps[0]}-{f.steps[1]}" if f.steps[0] != f.steps[1] \
        else f"step {f.steps[0]}"


def format_finding(f: Finding, prefix: str = "") -> str:
    steps = steps_text(f)
    where = f" {steps}" if steps else ""
    return f"{prefix}{f.code} {f.severity.value:<7} {f.rule} [{f.subject}]{where}: {f.message}"


def short(f: Finding) -> str:
    """rule [subject] steps: how a diagnosis names a finding it explains."""
    steps = steps_text(f)
    return f"{f.rule} [{f.subject}]" + (f" {steps}" if steps else "")


def format_root_cause(n: int, d: RootCause, prefix: str = "") -> list[str]:
    f = d.finding
    steps = steps_text(f)
    pad = prefix + " " * (len(str(n)) + 2)
    lines = [f"{prefix}{n}. {f.rule} [{f.subject}]{' ' + steps if steps else ''} "
             f"({f.code} {d.worst.value}, confidence {d.level})",
             f"{pad}{f.message}"]
    if d.fix:
        lines.append(f"{pad}fix: {d.fix}")
    if d.explains:
        lines.append(f"{pad}explains: " + "; ".join(short(e) for e in d.explains))
    missing = [b for b in d.basis if b.startswith("not recorded:")]
    lines += [f"{pad}{b}" for b in missing]
    return lines


def print_diagnosis(diagnosis: Diagnosis, out=None) -> None:
    """The diagnosis on `out` (stdout), a run's names and messages with their control and
    bidirectional characters escaped."""
    out = VisibleStream(out or sys.stdout)
    run = diagnosis.run
    summary = run.summary()
    first, last = summary["steps"]
    stopped = recording_stopped(summary["status_detail"])
    print(f"{run.path or run.name}: {summary['status']}, steps {first}-{last}"
          + (f"; {stopped}" if stopped else ""), file=out)
    for n, d in enumerate(diagnosis.diagnoses, 1):
        for line in format_root_cause(n, d, "  "):
            print(line, file=out)
    explained = [(n, e) for n, d in enumerate(diagnosis.diagnoses, 1) for e in d.explains]
    if explained:
        print("  explained findings (under their cause's number):", file=out)
        for n, e in explained:
            print(format_finding(e, f"    {n}. "), file=out)
    for e in diagnosis.errors:
        print(f"  {e.code} internal-error {e.rule}: {e.error}", file=out)
    if diagnosis.skipped:
        why = skipped_reasons(s.reason for s in diagnosis.skipped)
        names = ", ".join(s.rule for s in diagnosis.skipped)
        n = len(diagnosis.skipped)
        print(f"  skipped {n} rule{'s' if n != 1 else ''} ({why}): {names}", file=out)
    for problem in run.problems:
        print(f"  not read: {problem}", file=out)
