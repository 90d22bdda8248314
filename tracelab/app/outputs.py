"""Output paths the user types: never one that lands on what was recorded.

`tracelab analyze RUN --html RUN/meta.json` must not destroy the run, whatever the spelling of the
path (relative, through a symlink, a hard link). A report, JSON or Markdown file is refused when
it would replace or add a file that the analysis of one of the sources reads: a run's metadata,
heartbeats and table parts, a TensorBoard log's event files, a CSV log and its hparams.yaml,
an MLflow run's meta.yaml, metrics, params and tags, a W&B run's run-*.wandb files.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Optional

from tracelab.app.sources import CSV, NATIVE, TENSORBOARD, Source, data_files, detect
from tracelab.core.formats import MLFLOW, WANDB
from tracelab.core.errors import TracelabError
from tracelab.core.files import open_regular, resolved
from tracelab.core.schema import CSV_HPARAMS, META_FILE, TABLES, is_event_file, is_trace_file
from tracelab.recorders.importers import mlflow, wandb


def _identity(path: Path) -> Optional[tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _would_be_read(source: Source, target: Path) -> bool:
    """Whether a file at `target` (resolved) is, or would become, part of `source`'s data."""
    root = resolved(source.path)
    if source.format == CSV:
        return target == root or target == root.parent / CSV_HPARAMS
    if not target.is_relative_to(root):
        return False
    rel = target.relative_to(root)
    if source.format == TENSORBOARD:
        return is_event_file(rel.name)
    if source.format == NATIVE:
        if len(rel.parts) > 1:
            return rel.parts[0] in TABLES
        return is_trace_file(rel.name) or rel.name in TABLES
    if source.format == MLFLOW:  # a file-store run: its artifacts are not read
        if len(rel.parts) > 1:
            return rel.parts[0] in mlflow.RUN_PARTS
        return rel.name in (mlflow.META_YAML, *mlflow.RUN_PARTS)
    if source.format == WANDB:
        return len(rel.parts) == 1 and wandb.is_wandb_file(rel.name)
    return False


def refuse_over_sources(target: os.PathLike | str, paths: Iterable[os.PathLike | str | None],
                        option: str) -> None:
    """One line and exit 2 when writing `target` would overwrite or add to the recorded data of
    any of `paths` (runs, logs, baselines); `option` names the flag that chose the target."""
    target = Path(target)
    at = resolved(target)
    same = _identity(target)
    for path in paths:
        source = detect(path) if path is not None else None
        if source is None:
            continue
        hit = _would_be_read(source, at) or (
            same is not None and any(_identity(f) == same for f in data_files(source)))
        if hit:
            raise TracelabError(f"{target}: is part of the recorded data of {source.path}; "
                                f"{option} must not overwrite it, choose another path")


def _holds_run(folder: Path) -> bool:
    """Whether `folder` is a tracelab run: its meta.json says a schema version (another tool's
    meta.json does not make one)."""
    try:  # not a FIFO or a device: opened by open_regular
        with open_regular(folder / META_FILE) as handle:
            meta = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and "schema_version" in meta


def refuse_import_target(target: Path, source: Path) -> None:
    """One line and exit 2 when the imported run would lie in the source log, hold it, or lie
    inside another run: each would hide the one from the other (a run's folders are its own)."""
    at, log = resolved(target), resolved(source)
    if at == log or at.is_relative_to(log) or log.is_relative_to(at):
        raise TracelabError(f"{target}: RUN must lie outside {source} and not hold it; choose "
                            "a directory of its own")
    for folder in at.parents:
        if _holds_run(folder):
            raise TracelabError(f"{target}: lies inside the run {folder}; choose a directory "
                                "outside it")
