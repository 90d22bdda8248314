"""The outputs of `tracelab batch`: runs.parquet, findings.parquet and the sortable index.html.

Both tables are plain Parquet (strings, int64, double, UTC timestamps, one list and one map
column), readable as they are by DuckDB, Spark, polars and pandas. They are written in row
groups as results stream in, and the index is rendered from runs.parquet batch by batch, so
memory does not grow with the number of runs.
"""
from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

import jinja2
import pyarrow as pa
import pyarrow.parquet as pq

from tracelab._version import __version__

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
])
FINDINGS_SCHEMA = pa.schema([
    ("run", pa.string()), ("name", pa.string()), ("rule", pa.string()), ("code", pa.string()),
    ("severity", pa.string()), ("subject", pa.string()), ("first_step", pa.int64()),
    ("last_step", pa.int64()), ("message", pa.string()), ("fix", pa.string()),
    ("evidence", pa.string()),
])
_ROW_GROUP = 1000
_SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}


def _ts(value: Any) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromtimestamp(float(value), timezone.utc)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _run_row(row: dict[str, Any]) -> dict[str, Any]:
    full = {f.name: row.get(f.name) for f in RUNS_SCHEMA}
    start, end = row.get("start_time"), row.get("end_time")
    full["duration_s"] = (end - start) if isinstance(start, (int, float)) and isinstance(
        end, (int, float)) else None
    for key in ("start_time", "end_time", "analyzed_at"):
        full[key] = _ts(row.get(key))
    full["rule_counts"] = sorted((row.get("rule_counts") or {}).items())
    full["recorded"] = list(row.get("recorded") or [])
    full["problems"] = list(row.get("problems") or [])
    for key in ("n_error", "n_warning", "n_info", "n_rule_errors", "n_skipped"):
        full[key] = int(row.get(key) or 0)
    full["n_findings"] = full["n_error"] + full["n_warning"] + full["n_info"]
    return full


class _Sink:
    """A Parquet file written one row group at a time."""

    def __init__(self, path: Path, schema: pa.Schema):
        self.path, self.schema = path, schema
        self.tmp = path.with_name(path.name + ".tmp")
        self.writer = pq.ParquetWriter(self.tmp, schema, compression="zstd")
        self.rows: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if len(self.rows) >= _ROW_GROUP:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.writer.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows = []

    def close(self) -> None:
        self.flush()
        self.writer.close()
        self.tmp.replace(self.path)


def write_outputs(out: Path, results: Iterable[dict[str, Any]], *,
                  archive: str = "") -> dict[str, dict[str, int]]:
    """Write runs.parquet, findings.parquet and index.html from per-run results (in order)."""
    runs, findings = _Sink(out / "runs.parquet", RUNS_SCHEMA), \
        _Sink(out / "findings.parquet", FINDINGS_SCHEMA)
    rules: dict[str, str] = {}
    counts: dict[str, dict[str, int]] = {"status": {}, "worst": {}}
    try:
        for result in results:
            row = _run_row(result["run"])
            runs.add(row)
            for f in result.get("findings", ()):
                findings.add({k: f.get(k) for k in FINDINGS_SCHEMA.names})
                rules[f["code"]] = f["rule"]
            counts["status"][row["status"]] = counts["status"].get(row["status"], 0) + 1
            if row["status"] != "unreadable" and row["last_step"] is not None:
                worst = row["worst"] or "none"
                counts["worst"][worst] = counts["worst"].get(worst, 0) + 1
    finally:
        runs.close()
        findings.close()
    write_index(out, dict(sorted(rules.items())), counts, archive=archive)
    return counts


def _index_rows(runs_file: Path, codes: list[str]) -> Iterator[dict[str, Any]]:
    parquet = pq.ParquetFile(runs_file)
    for batch in parquet.iter_batches(batch_size=_ROW_GROUP):
        for row in batch.to_pylist():
            per_rule = dict(row["rule_counts"] or [])
            row["per_rule"] = [per_rule.get(c, 0) for c in codes]
            row["worst_rank"] = _SEVERITY_RANK.get(row["worst"], 3)
            yield row


def write_index(out: Path, rules: dict[str, str], counts: dict[str, dict[str, int]], *,
                archive: str = "") -> Path:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True)
    template = env.get_template("batch_index.html.j2")
    target = out / "index.html"
    tmp = target.with_name(target.name + ".tmp")
    codes = list(rules)
    with open(tmp, "w", encoding="utf-8") as f:
        for chunk in template.generate(
                rows=_index_rows(out / "runs.parquet", codes), rules=rules, counts=counts,
                total=sum(counts["status"].values()), archive=archive, version=__version__,
                generated=time.strftime("%Y-%m-%d %H:%M:%S")):
            f.write(chunk)
    tmp.replace(target)
    return target

