"""The index page of `tracelab batch`: one sortable row per run, rendered from runs.parquet.

It is rendered batch by batch, so memory does not grow with the number of runs. The settings
that vary across the archive (runs.parquet's `config.KEY` columns) are sortable columns, and a
summary above the table counts which settings go with which root causes
(`tracelab.reports.batch_settings`). The tables themselves are described in
`tracelab.core.batch_schema`.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from tracelab._version import __version__
from tracelab.core.batch_schema import SETTING_PREFIX, UNREADABLE
from tracelab.core.files import atomic_path
from tracelab.reports.batch_settings import associations
from tracelab.reports.fmt import number
from tracelab.reports.templating import environment, page_script

_BATCH_ROWS = 1000
_SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
MIN_SIDE = 3


def _index_rows(runs_file: Path, codes: list[str], settings: list[str],
                ) -> Iterator[dict[str, Any]]:
    # Opened by Python, here and below: Arrow takes a path as UTF-8, which OUT may not be.
    with open(runs_file, "rb") as source:
        yield from _rows(pq.ParquetFile(source), codes, settings)


def _rows(parquet: pq.ParquetFile, codes: list[str], settings: list[str],
          ) -> Iterator[dict[str, Any]]:
    for batch in parquet.iter_batches(batch_size=_BATCH_ROWS):
        for row in batch.to_pylist():
            per_rule = dict(row["rule_counts"] or [])
            row["per_rule"] = [per_rule.get(c, 0) for c in codes]
            row["worst_rank"] = _SEVERITY_RANK.get(row["worst"], 3)
            row["setting_values"] = [row.get(SETTING_PREFIX + key) for key in settings]
            yield row


def _settings(runs_file: Path) -> tuple[list[str], dict[str, bool], list]:
    """The varying settings (numeric or not), and their associations with root causes."""
    with open(runs_file, "rb") as source:
        schema = pq.read_schema(source)
    columns = [n for n in schema.names if n.startswith(SETTING_PREFIX)]
    keys = [n[len(SETTING_PREFIX):] for n in columns]
    numeric = {k: pa.types.is_floating(schema.field(c).type)
               for k, c in zip(keys, columns)}
    if not keys:
        return keys, numeric, []
    with open(runs_file, "rb") as source:
        table = pq.read_table(source, columns=columns + ["root_cause_rule", "status",
                                                         "last_step"])
    rows = [{**{k: r[c] for k, c in zip(keys, columns)}, "root_cause": r["root_cause_rule"]}
            for r in table.to_pylist()
            if r["status"] != UNREADABLE and r["last_step"] is not None]
    return keys, numeric, associations(rows, keys, min_side=MIN_SIDE)


def write_index(out: Path, rules: dict[str, str], counts: dict[str, dict[str, int]], *,
                archive: str = "") -> Path:
    """OUT/index.html from OUT/runs.parquet; `rules` maps the codes found to rule names."""
    template = environment(trim_blocks=True, lstrip_blocks=True).get_template(
        "batch_index.html.j2")
    script, script_csp = page_script("batch_index.js")
    target = out / "index.html"
    codes = list(rules)
    settings, numeric, found = _settings(out / "runs.parquet")
    with atomic_path(target) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for chunk in template.generate(
                rows=_index_rows(out / "runs.parquet", codes, settings), rules=rules,
                counts=counts, settings=settings, numeric=numeric, associations=found,
                min_side=MIN_SIDE, number=number,
                total=sum(counts["status"].values()), archive=archive, version=__version__,
                script=script, script_csp=script_csp,
                generated=time.strftime("%Y-%m-%d %H:%M:%S")):
            f.write(chunk)
    return target
