"""Import a CSV metrics log: `tracelab import csv FILE RUN`.

The layout is Lightning's CSVLogger `metrics.csv`: a `step` column, and one column per metric
(`train_loss_step`, `train_loss_epoch`, `val_loss`, `val_acc_epoch`, `epoch`, `lr-Adam`...),
empty where a row did not log that metric. Each metric column maps to a split and a name with the
same `TagMap` as TensorBoard tags. A `hparams.yaml` next to the file becomes the run's config
(when PyYAML is installed), within bounds on its size and on what its aliases expand to.
Only regular files inside the log's folder are read: a link out of it, a FIFO or a device is
refused, named.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from tracelab.core.errors import TraceError
from tracelab.core.files import open_inside, read_inside
from tracelab.core.formats import CSV
from tracelab.core.schema import CSV_HPARAMS, CSV_LOG, SCALARS
from tracelab.recorders.importers.common import (Imported, TagMap, base_meta, out_of_range,
                                                 scalar_columns, whole_steps)


# What a hparams.yaml may hold: its bytes, and its nodes once every alias is expanded (a file
# of a few hundred bytes whose aliases nest expands to billions), and how deep they nest.
MAX_CONFIG_BYTES = 1 << 20
MAX_CONFIG_NODES = 100_000
MAX_CONFIG_DEPTH = 64


def _read_hparams(path: Path, problems: list[str]) -> dict[str, Any]:
    """The run's config from Lightning's hparams.yaml beside the log, within the bounds above;
    a file refused, or one that does not load, is a problem line naming it, and no config."""
    try:
        import yaml
    except ImportError:
        return {}
    try:
        text = read_inside(path, path.parent, limit=MAX_CONFIG_BYTES).decode("utf-8")
        data = _bounded_yaml(text, yaml)
    except OSError as exc:
        why = (exc.strerror or str(exc)).lower()
    except UnicodeDecodeError:
        why = "not UTF-8 text"
    except RecursionError:  # PyYAML composes nested nodes by recursion
        why = f"nested deeper than {MAX_CONFIG_DEPTH} levels"
    except (yaml.YAMLError, ValueError) as exc:
        why = " ".join(str(exc).split())[:200] or type(exc).__name__
    else:
        return data if isinstance(data, dict) else {}
    problems.append(f"{path.name}: not read as the run's config ({why})")
    return {}


def _bounded_yaml(text: str, yaml) -> Any:
    """`yaml.safe_load(text)`, refused (ValueError) when its aliases expand it beyond
    MAX_CONFIG_NODES nodes, when it nests deeper than MAX_CONFIG_DEPTH, or when an alias
    refers to a node that holds it. The node graph is measured before anything is built."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, {}, set(), 0)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _expanded_size(node, sizes: dict[int, int], open_: set[int], depth: int) -> int:
    """The nodes `node` stands for with its aliases expanded (each node measured once)."""
    if id(node) in sizes:
        return sizes[id(node)]
    if depth > MAX_CONFIG_DEPTH:
        raise ValueError(f"nested deeper than {MAX_CONFIG_DEPTH} levels")
    if id(node) in open_:
        raise ValueError("an alias refers to a node that holds it")
    open_.add(id(node))
    children = node.value if isinstance(node.value, list) else []
    if children and isinstance(children[0], tuple):  # a mapping's (key, value) pairs
        children = [n for pair in children for n in pair]
    size = 1 + sum(_expanded_size(child, sizes, open_, depth + 1) for child in children)
    if size > MAX_CONFIG_NODES:
        raise ValueError(f"its aliases expand it beyond {MAX_CONFIG_NODES:,} values")
    open_.discard(id(node))
    sizes[id(node)] = size
    return size


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
        with open_inside(file, file.parent) as handle:
            df = pd.read_csv(handle)
    except FileNotFoundError:
        raise TraceError(f"{file}: no such file; expected a CSV metrics log") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        why = getattr(exc, "strerror", None) or f"{type(exc).__name__}: " \
            f"{str(exc).splitlines()[0] if str(exc) else ''}"
        raise TraceError(f"{file}: unreadable as CSV ({why})") from None
    step_column = step_column or next((c for c in ("step", "global_step", "epoch")
                                       if c in df.columns), None)
    if step_column not in df.columns:
        raise TraceError(f"{file}: no step column ({step_column or 'step'}); expected a "
                         "`step` column as in Lightning's metrics.csv, or pass --step-column")
    steps = pd.to_numeric(df[step_column], errors="coerce")
    if steps.isna().all():
        raise TraceError(f"{file}: column '{step_column}' holds no numeric steps")
    # A trace's step is a whole number in 0..2**62: a row with another (2.5, inf, NaN, -1) is
    # left out and listed, as the other importers do; a row with no value at all is no row.
    steps, keep = whole_steps(steps.to_numpy())
    kept = np.ones(len(df), dtype=bool) if keep is None else keep
    names = [c for c, kind in df.dtypes.items()
             if c != step_column and pd.api.types.is_numeric_dtype(kind)]
    # One array for every metric column: a column at a time through pandas costs about
    # 100 us each, which 100,000 metric names turn into seconds.
    values = df[names].to_numpy(dtype=np.float64, na_value=np.nan) if names \
        else np.zeros((len(df), 0))
    logged = ~np.isnan(values)  # an empty cell: the row did not log that metric
    dropped = ~kept & (df[step_column].notna().to_numpy() | logged.any(axis=1))
    problems: list[str] = []
    if dropped.any():
        problems.append(out_of_range(f"column '{step_column}'",
                                     df[step_column].to_numpy()[dropped]))
    if not kept.any():
        raise TraceError(f"{file}: column '{step_column}' holds no whole-number steps from 0 "
                         f"(the first: {df[step_column].iloc[0]!r})")
    logged &= kept[:, None]
    series = {}
    for j, column in enumerate(names):
        at = logged[:, j]
        series[str(column)] = (steps[at], values[at, j], np.full(int(at.sum()), np.nan))
    columns = scalar_columns(series, tags or TagMap(), problems)
    if not columns:
        raise TraceError(f"{file}: no numeric metric columns besides '{step_column}'")
    hparams = file.parent / CSV_HPARAMS
    config = _read_hparams(hparams, problems) if os.path.lexists(hparams) else {}
    meta = base_meta(CSV, file, pd.Series([], dtype=float), name=log_name(file), config=config)
    if problems:
        meta["source"]["problems"] = problems
    return Imported.from_columns(meta, {SCALARS: columns})


def import_csv(file: str | os.PathLike, run_dir: str | os.PathLike,
               tags: TagMap | None = None, *, step_column: Optional[str] = None) -> Path:
    """Import a CSV metrics log as the tracelab run `run_dir` (which must not exist yet)."""
    return read_csv_log(file, tags, step_column=step_column).write(Path(run_dir))
