"""The index page of `tracelab batch`: one sortable row per run, rendered from runs.parquet.

It is rendered batch by batch, so memory does not grow with the number of runs. The tables
themselves are described in `tracelab.core.batch_schema`.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import pyarrow.parquet as pq

from tracelab._version import __version__
from tracelab.core.files import atomic_path
from tracelab.reports.templating import environment, page_script

_BATCH_ROWS = 1000
_SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}


def _index_rows(runs_file: Path, codes: list[str]) -> Iterator[dict[str, Any]]:
    parquet = pq.ParquetFile(runs_file)
    for batch in parquet.iter_batches(batch_size=_BATCH_ROWS):
        for row in batch.to_pylist():
            per_rule = dict(row["rule_counts"] or [])
            row["per_rule"] = [per_rule.get(c, 0) for c in codes]
            row["worst_rank"] = _SEVERITY_RANK.get(row["worst"], 3)
            yield row


def write_index(out: Path, rules: dict[str, str], counts: dict[str, dict[str, int]], *,
                archive: str = "") -> Path:
    """OUT/index.html from OUT/runs.parquet; `rules` maps the codes found to rule names."""
    template = environment(trim_blocks=True, lstrip_blocks=True).get_template(
        "batch_index.html.j2")
    script, script_csp = page_script("batch_index.js")
    target = out / "index.html"
    codes = list(rules)
    with atomic_path(target) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for chunk in template.generate(
                rows=_index_rows(out / "runs.parquet", codes), rules=rules, counts=counts,
                total=sum(counts["status"].values()), archive=archive, version=__version__,
                script=script, script_csp=script_csp,
                generated=time.strftime("%Y-%m-%d %H:%M:%S")):
            f.write(chunk)
    return target
