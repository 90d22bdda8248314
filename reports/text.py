"""The diagnosis as text for a terminal: one line per finding, like a linter."""
from __future__ import annotations

import sys

from tracelab.core.findings import Diagnosis, Finding
from tracelab.core.run_status import recording_stopped


def format_finding(f: Finding, prefix: str = "") -> str:
    steps = f"steps {f.steps[0]}-{f.steps[1]}" if f.steps and f.steps[0] != f.steps[1] else (
        f"step {f.steps[0]}" if f.steps else "")
    where = f" {steps}" if steps else ""
    return f"{prefix}{f.code} {f.severity.value:<7} {f.rule} [{f.subject}]{where}: {f.message}"


def print_diagnosis(diagnosis: Diagnosis, out=sys.stdout) -> None:
    run = diagnosis.run
    summary = run.summary()
    first, last = summary["steps"]
    stopped = recording_stopped(summary["status_detail"])
    print(f"{run.path or run.name}: {summary['status']}, steps {first}-{last}"
          + (f"; {stopped}" if stopped else ""), file=out)
    for f in diagnosis.findings:
        print(format_finding(f, "  "), file=out)
    for e in diagnosis.errors:
        print(f"  {e.code} internal-error {e.rule}: {e.error}", file=out)
    if diagnosis.skipped:
        reasons = sorted({s.reason for s in diagnosis.skipped})
        names = ", ".join(s.rule for s in diagnosis.skipped)
        n = len(diagnosis.skipped)
        print(f"  skipped {n} rule{'s' if n != 1 else ''} ({'; '.join(reasons)}): {names}",
              file=out)
    for problem in run.problems:
        print(f"  unreadable, skipped: {problem}", file=out)
