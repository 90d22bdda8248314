"""The batch's tables and index: OUT/runs.parquet, OUT/findings.parquet, OUT/index.html.

The tables are written in row groups as results stream in, and the index is rendered from
runs.parquet batch by batch, so memory does not grow with the number of runs.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from tracelab._version import __version__
from tracelab.app.sources import CSV, MLFLOW, NATIVE, TENSORBOARD, WANDB, detect
from tracelab.core.errors import TracelabError
from tracelab.core.files import atomic_path, write_atomic
from tracelab.core.batch_schema import (FINDINGS_SCHEMA, UNREADABLE, findings_record, runs_record,
                                        runs_schema)
from tracelab.reports.batch_index import write_index

_ROW_GROUP = 1000


# Written into OUT when the batch takes the folder: a later batch may write there again, and
# nothing else is ever written over. Its absence from a folder that holds files means that the
# files are somebody else's.
MARKER = ".tracelab-batch"
_RUN_FORMATS = (NATIVE, TENSORBOARD, MLFLOW, WANDB, CSV)


def check_output_folder(out: Path, archive: Path) -> None:
    """Refuse `out` with one line unless the batch may make it its own: the batch never writes
    inside a run or over a file it did not write. Writes nothing."""
    try:
        _check_output_folder(out, archive)
    except OSError as exc:
        raise TracelabError(f"{out}: cannot use it for the batch's outputs "
                            f"({(exc.strerror or str(exc)).lower()}); choose another -o") from None


def _check_output_folder(out: Path, archive: Path) -> None:
    if out == archive or archive.is_relative_to(out):
        raise TracelabError(f"{out}: is the archive or holds it; give the batch a folder of its "
                            f"own, e.g. -o {archive.parent / (archive.name + '-batch')}")
    for folder in (out, *out.parents):
        source = detect(folder) if folder.is_dir() else None
        if source is not None and source.format in _RUN_FORMATS:
            raise TracelabError(f"{out}: inside the run {folder}; the batch never writes into a "
                                "run, choose a folder outside it")
    if out.exists():
        if not out.is_dir():
            raise TracelabError(f"{out}: not a directory; -o names the folder for the "
                                "batch's outputs")
        if any(True for _ in out.iterdir()) and not (out / MARKER).is_file():
            raise TracelabError(f"{out}: holds files that tracelab batch did not write; "
                                "choose a new or empty folder for -o")


def claim_output_folder(out: Path) -> None:
    """Create `out` (checked by check_output_folder) and mark it as the batch's."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        if not (out / MARKER).is_file():
            write_atomic(out / MARKER, json.dumps({"tracelab_version": __version__}) + "\n")
    except OSError as exc:
        raise TracelabError(f"{out}: cannot write the batch's outputs there "
                            f"({(exc.strerror or str(exc)).lower()}); choose another -o") from None


class _Sink:
    """A Parquet file written one row group at a time."""

    def __init__(self, path: Path, schema: pa.Schema):
        self.schema = schema
        # Through a Python file: Arrow takes a path as UTF-8, which a name in another encoding
        # (bytes that are not UTF-8, as Python holds them) is not.
        self._file = open(path, "wb")
        self.writer = pq.ParquetWriter(self._file, schema, compression="zstd")
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
        try:
            self.flush()
            self.writer.close()
        finally:
            self._file.close()


def write_outputs(out: Path, results: Iterable[dict[str, Any]], *, archive: str = "",
                  settings: dict[str, pa.DataType] | None = None) -> dict[str, dict[str, int]]:
    """Write runs.parquet, findings.parquet and index.html from per-run results (in order);
    `settings` (from `varying_settings`) become runs.parquet's `config.KEY` columns."""
    rules: dict[str, str] = {}
    counts: dict[str, dict[str, int]] = {"status": {}, "worst": {}}
    # Both tables replace the old ones only when complete: a failure leaves the last batch's.
    with atomic_path(out / "runs.parquet") as runs_file, \
            atomic_path(out / "findings.parquet") as findings_file:
        runs = _Sink(runs_file, runs_schema(settings))
        findings = _Sink(findings_file, FINDINGS_SCHEMA)
        try:
            for result in results:
                row = runs_record(result["run"], settings)
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
