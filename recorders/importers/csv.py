"""Import a CSV metrics log: `tracelab import csv FILE RUN`.

The layout is Lightning's CSVLogger `metrics.csv`: a `step` column, and one column per metric
(`train_loss_step`, `train_loss_epoch`, `val_loss`, `val_acc_epoch`, `epoch`, `lr-Adam`...),
empty where a row did not log that metric. Each metric column maps to a split and a name with the
same `TagMap` as TensorBoard tags. A `hparams.yaml` next to the file becomes the run's config
(when PyYAML is installed).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from tracelab.core.errors import TraceError
from tracelab.core.formats import CSV
from tracelab.core.schema import CSV_HPARAMS, CSV_LOG, SCALARS
from tracelab.recorders.importers.common import (Imported, TagMap, base_meta, out_of_range,
                                                 pick_granularity, whole_steps)


def _read_hparams(path: Path) -> dict[str, Any]:
    try:
        import yaml
    except ImportError:
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def log_name(file: Path) -> str:
    """`lightning_logs/version_3/metrics.csv` is `version_3`; any other file its stem."""
    return file.parent.name if file.name == CSV_LOG else file.stem


def read_csv_log(file: str | os.PathLike, tags: TagMap | None = None, *,
                 step_column: Optional[str] = None) -> Imported:
    """Read a CSV metrics log into trace tables (in memory)."""
    file = Path(file)
    if file.is_dir():
        file = file / CSV_LOG
    try:
        df = pd.read_csv(file)
    except FileNotFoundError:
        raise TraceError(f"{file}: no such file; expected a CSV metrics log") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise TraceError(f"{file}: unreadable as CSV ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    step_column = step_column or next((c for c in ("step", "global_step", "epoch")
                                       if c in df.columns), None)
    if step_column not in df.columns:
        raise TraceError(f"{file}: no step column ({step_column or 'step'}); expected a "
                         "`step` column as in Lightning's metrics.csv, or pass --step-column")
    steps = pd.to_numeric(df[step_column], errors="coerce")
    if steps.isna().all():
        raise TraceError(f"{file}: column '{step_column}' holds no numeric steps")
    # A trace's step is a whole number in 0..2**62: a row with another (2.5, inf, 1e30, -1) is
    # left out and listed, as the other importers do; an empty step cell is no row of a step.
    steps, keep = whole_steps(steps.to_numpy())
    given = df[step_column].notna().to_numpy()
    kept = given if keep is None else given & keep
    problems: list[str] = []
    if (given & ~kept).any():
        problems.append(out_of_range(f"column '{step_column}'",
                                     df[step_column].to_numpy()[given & ~kept]))
    if not kept.any():
        raise TraceError(f"{file}: column '{step_column}' holds no whole-number steps from 0 "
                         f"(the first: {df[step_column].iloc[0]!r})")
    valid = pd.Series(kept, index=df.index)
    steps = pd.Series(steps, index=df.index)
    tags = tags or TagMap()
    keys = {}
    for column in df.columns:
        if column == step_column or not pd.api.types.is_numeric_dtype(df[column]):
            continue
        key = tags.scalar(str(column))
        if key is not None:
            keys[column] = key
    parts = []
    for column, key in pick_granularity(keys, problems).items():
        values = df[column]
        keep = values.notna() & valid
        parts.append(pd.DataFrame({"step": steps[keep].astype("int64"), "split": key.split,
                                   "name": key.name, "value": values[keep].astype(float)}))
    if not parts:
        raise TraceError(f"{file}: no numeric metric columns besides '{step_column}'")
    sc = pd.concat(parts, ignore_index=True)
    sc["wall_time"] = float("nan")
    hparams = file.parent / CSV_HPARAMS
    meta = base_meta(CSV, file, sc["wall_time"], name=log_name(file),
                     config=_read_hparams(hparams) if hparams.is_file() else {})
    if problems:
        meta["source"]["problems"] = problems
    return Imported.from_columns(meta, {SCALARS: {c: sc[c] for c in sc}})


def import_csv(file: str | os.PathLike, run_dir: str | os.PathLike,
               tags: TagMap | None = None, *, step_column: Optional[str] = None) -> Path:
    """Import a CSV metrics log as the tracelab run `run_dir` (which must not exist yet)."""
    return read_csv_log(file, tags, step_column=step_column).write(Path(run_dir))
