"""The batch's tables and index: OUT/runs.parquet, OUT/findings.parquet, OUT/index.html.

The tables are written in row groups as results stream in, and the index is rendered from
runs.parquet batch by batch, so memory does not grow with the number of runs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from tracelab.core.batch_schema import (FINDINGS_SCHEMA, RUNS_SCHEMA, UNREADABLE, findings_record,
                                        runs_record)
from tracelab.reports.batch_index import write_index

_ROW_GROUP = 1000


class _Sink:
    """A Parquet file written one row group at a time, renamed into place when complete."""

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
            row = runs_record(result["run"])
            runs.add(row)
            for f in result.get("findings", ()):
                findings.add(findings_record(f))
                rules[f["code"]] = f["rule"]
            counts["status"][row["status"]] = counts["status"].get(row["status"], 0) + 1
            if row["status"] != UNREADABLE and row["last_step"] is not None:
                worst = row["worst"] or "none"
                counts["worst"][worst] = counts["worst"].get(worst, 0) + 1
    finally:
        runs.close()
        findings.close()
    write_index(out, dict(sorted(rules.items())), counts, archive=archive)
    return counts
