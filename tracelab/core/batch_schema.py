"""The outputs of `tracelab batch`: one row per run and one per finding.

The batch fills these rows (`tracelab.app.batch`), keeps them in each run's result.json, and
writes them as OUT/runs.parquet and OUT/findings.parquet; the index page
(`tracelab.reports.batch_index`) is rendered from runs.parquet. Both tables are plain Parquet
(strings, int64, double, UTC timestamps, one list and one map column), readable as they are by
DuckDB, Spark, polars and pandas.
"""
from __future__ import annotations

import json
import math
import time
from datetime import datetime, timezone
from typing import Any, Iterable

import pyarrow as pa

from tracelab._version import __version__
from tracelab.core.findings import Finding

UNREADABLE = "unreadable"

_TS = pa.timestamp("us", tz="UTC")
RUNS_SCHEMA = pa.schema([
    ("run", pa.string()), ("name", pa.string()), ("format", pa.string()), ("path", pa.string()),
    ("source_name", pa.string()),
    ("settings", pa.string()),
    ("status", pa.string()), ("detail", pa.string()), ("first_step", pa.int64()),
    ("last_step", pa.int64()), ("worst", pa.string()), ("n_error", pa.int64()),
    ("n_warning", pa.int64()), ("n_info", pa.int64()), ("n_findings", pa.int64()),
    ("n_rule_errors", pa.int64()), ("n_skipped", pa.int64()),
    ("rule_counts", pa.map_(pa.string(), pa.int64())), ("recorded", pa.list_(pa.string())),
    ("problems", pa.list_(pa.string())), ("report", pa.string()), ("start_time", _TS),
    ("end_time", _TS), ("duration_s", pa.float64()), ("analysis_s", pa.float64()),
    ("tracelab_version", pa.string()), ("analyzed_at", _TS), ("cache_key", pa.string()),
    ("cached", pa.bool_()),
    # The first (most likely) diagnosis: its root-cause finding's id, rule, code, message and fix.
    ("root_cause", pa.string()), ("root_cause_rule", pa.string()), ("root_cause_code", pa.string()),
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
SETTING_PREFIX = "config."  # runs.parquet's column of a setting that varies across the archive
_MAX_SETTINGS = 40         # columns at most; the settings column holds them all
_COUNTS = ("n_error", "n_warning", "n_info", "n_rule_errors", "n_skipped", "n_diagnoses")
_TIMES = ("start_time", "end_time", "analyzed_at")


def run_row(*, run: str, name: str, format: str, path: str, cache_key: str,
            detail: str | None = None) -> dict[str, Any]:
    """A run's row before its analysis: unreadable until the analysis says otherwise.

    Times are epoch seconds and rule_counts a dict here, as result.json keeps them;
    `runs_record` turns the row into what runs.parquet holds."""
    return {
        "run": run, "name": name, "format": format, "path": path, "source_name": None,
        "settings": {}, "status": UNREADABLE,
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


# -- settings: what a run was configured with, and which settings vary across the archive -----
def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(inner, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, bool) or isinstance(value, str) and len(value) <= 200:
        out[prefix] = value
    elif isinstance(value, (int, float)) and math.isfinite(value):
        out[prefix] = value


def run_settings(meta: dict[str, Any]) -> dict[str, Any]:
    """A run's settings as flat `key: scalar` (nested config keys joined with dots): its
    config, plus the optimizer's type and the seed where the config does not name them."""
    flat: dict[str, Any] = {}
    config = meta.get("config")
    if isinstance(config, dict):
        _flatten(config, "", flat)
    optimizer = (meta.get("optimizer") or {}).get("type")
    if isinstance(optimizer, str) and "optimizer" not in flat:
        flat["optimizer"] = optimizer
    seed = (meta.get("environment") or {}).get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool) and "seed" not in flat:
        flat["seed"] = seed
    return {k: v for k, v in flat.items() if k}


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def varying_settings(settings: Iterable[dict[str, Any]]) -> dict[str, pa.DataType]:
    """The settings that take two or more values across the runs, each a number (float64)
    when every run's value is one, else text; at most _MAX_SETTINGS, the most widely set."""
    values: dict[str, set] = {}
    runs: dict[str, int] = {}
    for one in settings:
        for key, value in (one or {}).items():
            values.setdefault(key, set()).add((type(value) is str, str(value)) if not _numeric(
                value) else (False, float(value)))
            runs[key] = runs.get(key, 0) + 1
    keys = [k for k, v in values.items() if len(v) > 1]
    keys = sorted(sorted(keys, key=lambda k: -runs[k])[:_MAX_SETTINGS])
    return {k: pa.float64() if all(isinstance(v[1], float) for v in values[k]) else pa.string()
            for k in keys}


def runs_schema(settings: dict[str, pa.DataType] | None = None) -> pa.Schema:
    """runs.parquet's schema: RUNS_SCHEMA, then one `config.KEY` column per varying setting."""
    extra = [(SETTING_PREFIX + key, kind) for key, kind in (settings or {}).items()]
    return pa.schema(list(RUNS_SCHEMA) + [pa.field(n, t) for n, t in extra])


def runs_record(row: dict[str, Any], settings: dict[str, pa.DataType] | None = None,
                ) -> dict[str, Any]:
    """A run's row as runs.parquet holds it: every column, timestamps, counts and totals."""
    full = {f.name: _fits(f, row.get(f.name)) for f in RUNS_SCHEMA
            if not pa.types.is_timestamp(f.type) and f.name != "settings"}
    own = row.get("settings") if isinstance(row.get("settings"), dict) else {}
    full["settings"] = json.dumps(own, sort_keys=True, default=str) if own else None
    for key, kind in (settings or {}).items():
        value = own.get(key)
        if pa.types.is_floating(kind):
            value = float(value) if _numeric(value) else None
        full[SETTING_PREFIX + key] = None if value is None else value if isinstance(
            value, float) else str(value)
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
