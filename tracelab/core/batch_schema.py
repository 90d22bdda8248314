"""The outputs of `tracelab batch`: one row per run and one per finding.

The batch fills these rows (`tracelab.app.batch`), keeps them in each run's result.json, and
writes them as OUT/runs.parquet and OUT/findings.parquet; the index page
(`tracelab.reports.batch_index`) is rendered from runs.parquet. Both tables are plain Parquet
(strings, int64, double, UTC timestamps, one list and one map column), readable as they are by
DuckDB, Spark, polars and pandas.
"""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from tracelab._version import __version__
from tracelab.core.findings import Finding

UNREADABLE = "unreadable"

_TS = pa.timestamp("us", tz="UTC")
RUNS_SCHEMA = pa.schema([
    ("run", pa.string()), ("name", pa.string()), ("format", pa.string()), ("path", pa.string()),
    ("status", pa.string()), ("detail", pa.string()), ("first_step", pa.int64()),
    ("last_step", pa.int64()), ("worst", pa.string()), ("n_error", pa.int64()),
    ("n_warning", pa.int64()), ("n_info", pa.int64()), ("n_findings", pa.int64()),
    ("n_rule_errors", pa.int64()), ("n_skipped", pa.int64()),
    ("rule_counts", pa.map_(pa.string(), pa.int64())), ("recorded", pa.list_(pa.string())),
    ("problems", pa.list_(pa.string())), ("report", pa.string()), ("start_time", _TS),
    ("end_time", _TS), ("duration_s", pa.float64()), ("analysis_s", pa.float64()),
    ("tracelab_version", pa.string()), ("analyzed_at", _TS), ("cache_key", pa.string()),
    ("cached", pa.bool_()),
    # The first (most likely) diagnosis: its root-cause finding's id, rule, message and fix.
    ("root_cause", pa.string()), ("root_cause_rule", pa.string()),
    ("root_cause_message", pa.string()), ("root_cause_fix", pa.string()),
    ("n_diagnoses", pa.int64()),
])
FINDINGS_SCHEMA = pa.schema([
    ("run", pa.string()), ("name", pa.string()), ("rule", pa.string()), ("code", pa.string()),
    ("severity", pa.string()), ("subject", pa.string()), ("first_step", pa.int64()),
    ("last_step", pa.int64()), ("message", pa.string()), ("fix", pa.string()),
    ("evidence", pa.string()),
    # The finding's id; whether it is a root cause; the id of the root cause that explains it
    # (its own for a root) and that diagnosis's place in the run's list (1 = most likely).
    ("id", pa.string()), ("root_cause", pa.bool_()), ("diagnosis", pa.string()),
    ("diagnosis_rank", pa.int64()),
])
_COUNTS = ("n_error", "n_warning", "n_info", "n_rule_errors", "n_skipped", "n_diagnoses")
_TIMES = ("start_time", "end_time", "analyzed_at")


def run_row(*, run: str, name: str, format: str, path: str, cache_key: str,
            detail: str | None = None) -> dict[str, Any]:
    """A run's row before its analysis: unreadable until the analysis says otherwise.

    Times are epoch seconds and rule_counts a dict here, as result.json keeps them;
    `runs_record` turns the row into what runs.parquet holds."""
    return {
        "run": run, "name": name, "format": format, "path": path, "status": UNREADABLE,
        "detail": detail, "first_step": None, "last_step": None, "worst": None,
        **{key: 0 for key in _COUNTS}, "rule_counts": {}, "recorded": [], "problems": [],
        "report": None, "start_time": None, "end_time": None, "analysis_s": None,
        "tracelab_version": __version__, "analyzed_at": time.time(), "cache_key": cache_key,
    }


def finding_row(run: str, name: str, f: Finding, cause: tuple[str, int] | None = None
                ) -> dict[str, Any]:
    """One finding's row; `cause` is (root-cause id, diagnosis rank) of its diagnosis."""
    first, last = f.steps or (None, None)
    root, rank = cause or (None, None)
    return {"run": run, "name": name, "rule": f.rule, "code": f.code,
            "severity": f.severity.value, "subject": f.subject, "first_step": first,
            "last_step": last, "message": f.message, "fix": f.fix,
            "evidence": json.dumps(dict(f.evidence), default=str, sort_keys=True),
            "id": f.id, "root_cause": root == f.id if root else None, "diagnosis": root,
            "diagnosis_rank": rank}


def _ts(value: Any) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromtimestamp(float(value), timezone.utc)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _fits(field: pa.Field, value: Any) -> Any:
    """`value` as the column's type, or None: a row read back from an older or damaged
    result.json must not stop the whole batch."""
    if value is None:
        return None
    kind = field.type
    if pa.types.is_string(kind):
        # Paths need not be UTF-8 (surrogate escapes); Parquet strings must be.
        text = value if isinstance(value, str) else str(value)
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if pa.types.is_boolean(kind):
        return value if isinstance(value, bool) else None
    if pa.types.is_integer(kind):
        number = _number(value)
        return int(number) if number is not None and abs(number) < 2 ** 63 else None
    if pa.types.is_floating(kind):
        return _number(value)
    return value


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
    return float(value) if ok else None


def runs_record(row: dict[str, Any]) -> dict[str, Any]:
    """A run's row as runs.parquet holds it: every column, timestamps, counts and totals."""
    full = {f.name: _fits(f, row.get(f.name)) for f in RUNS_SCHEMA
            if not pa.types.is_timestamp(f.type)}
    start, end = _number(row.get("start_time")), _number(row.get("end_time"))
    full["duration_s"] = (end - start) if start is not None and end is not None else None
    for key in _TIMES:
        full[key] = _ts(row.get(key))
    counts = row.get("rule_counts")
    full["rule_counts"] = sorted((str(k), int(v)) for k, v in counts.items()
                                 if isinstance(v, int)) if isinstance(counts, dict) else []
    for key in ("recorded", "problems"):
        values = row.get(key)
        full[key] = [str(v) for v in values] if isinstance(values, list) else []
    for key in _COUNTS:
        full[key] = full[key] or 0
    full["n_findings"] = full["n_error"] + full["n_warning"] + full["n_info"]
    return full


def findings_record(row: dict[str, Any]) -> dict[str, Any]:
    return {f.name: _fits(f, row.get(f.name)) for f in FINDINGS_SCHEMA}
