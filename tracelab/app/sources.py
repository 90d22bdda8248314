"""Where runs come from: tracelab run directories, TensorBoard log directories, CSV metrics logs,
MLflow runs (a file-store run directory, or one run of a SQLite `mlflow.db`) and W&B runs
(`wandb/offline-run-*/` and `wandb/run-*/` folders).

`detect` says what a path holds, `discover` finds every run under an archive, and `open_source`
/ `open_any` open any of them as a Run. Logs of other loggers are imported in memory: nothing is
ever written next to them (an archive may be read-only). One run of an MLflow database is
named `mlflow.db#RUN` (its id or name).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Iterator, Optional

from tracelab.core.errors import TraceError
from tracelab.core.files import safe_file_name
from tracelab.core.formats import CSV, MLFLOW, NATIVE, TENSORBOARD, WANDB, Source
from tracelab.core.reader import require
from tracelab.core.run import Run, open_run
from tracelab.recorders.importers import mlflow, wandb
from tracelab.core.schema import (CSV_HPARAMS, CSV_LOG, EVENT_FILES, META_FILE, TABLES,
                                  is_event_file, is_trace_file, rank_of_meta, rank_of_part)


def _entries(path: Path) -> list[os.DirEntry]:
    try:
        return list(os.scandir(path))
    except OSError:
        return []


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:  # a symlink loop, ...: not a file to read
        return False


def _looks_native(path: Path, names: set[str]) -> bool:
    if any(rank_of_meta(n) is not None for n in names):
        return True
    # Tables without metadata: a run that lost its meta.json; it must show up as unreadable.
    return any(t in names and any(rank_of_part(e.name) is not None for e in _entries(path / t))
               for t in TABLES)


def _detect_file(path: Path) -> Optional[Source]:
    if path.suffix.lower() == ".csv":
        return Source(path, CSV)
    if wandb.is_wandb_file(path.name):
        return Source(path, WANDB)
    if mlflow.is_sqlite_store(path):
        return Source(path, MLFLOW)
    return None


def detect(path: str | os.PathLike) -> Optional[Source]:
    """What `path` holds, or None when it is none of the known formats. An MLflow database is
    a Source without a key (it may hold several runs: `store_sources` lists them)."""
    path = Path(path)
    if path.is_file():
        return _detect_file(path)
    entries = _entries(path)
    names = {e.name for e in entries}
    if _looks_native(path, names):
        return Source(path, NATIVE)
    if any(is_event_file(e.name) and _is_file(e) for e in entries):
        return Source(path, TENSORBOARD)
    if any(e.name == CSV_LOG and _is_file(e) for e in entries):  # not a folder, nor a FIFO
        return Source(path / CSV_LOG, CSV)
    if any(wandb.is_wandb_file(e.name) and _is_file(e) for e in entries):
        return Source(path, WANDB)
    if mlflow.is_run_dir(path, names):
        return Source(path, MLFLOW)
    return None


def store_sources(db: Path) -> list[Source]:
    """One Source per run of an MLflow SQLite database; none when it cannot be read."""
    try:
        return [Source(db, MLFLOW, run_id) for run_id, _ in mlflow.store_runs(db)]
    except TraceError:
        return []


def _stores_in(folder: Path, entries: list[os.DirEntry]) -> Iterator[Source]:
    """The MLflow databases among a folder's files, one Source per run."""
    for entry in sorted(entries, key=lambda e: e.name):
        if not entry.name.startswith(".") and _is_file(entry) and \
                mlflow.is_sqlite_store(folder / entry.name):
            yield from store_sources(folder / entry.name)


def walk_runs(archive: str | os.PathLike, exclude: Iterable[Path] = (),
              unreadable: list[str] | None = None) -> Iterator[Source]:
    """The runs under `archive` (itself included) as they are found; a run's own
    subdirectories are part of it. Hidden directories and `exclude` are skipped; a folder that
    cannot be listed is added to `unreadable` as "path (why)"."""
    skip = {Path(p).resolve() for p in exclude}

    def cannot_list(exc: OSError) -> None:
        if unreadable is not None:
            unreadable.append(f"{exc.filename} ({(exc.strerror or str(exc)).lower()})")

    for folder, dirs, _ in os.walk(archive, onerror=cannot_list):
        here = Path(folder)
        if skip and here.resolve() in skip:
            dirs[:] = []
            continue
        source = detect(here)
        if source is not None:
            dirs[:] = []
            yield source
        else:
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            yield from _stores_in(here, _entries(here))


def discover(archive: str | os.PathLike, exclude: Iterable[Path] = (),
             unreadable: list[str] | None = None) -> list[Source]:
    """Every run under `archive`, sorted by path (see `walk_runs`)."""
    return sorted(walk_runs(archive, exclude, unreadable), key=lambda s: s.path.as_posix())


def data_files(source: Source) -> list[Path]:
    """The files a run's analysis reads: what the batch cache fingerprints."""
    path = source.path
    if source.format == CSV:
        extra = path.parent / CSV_HPARAMS
        return [path] + ([extra] if extra.is_file() else [])
    if source.format == WANDB:
        return wandb.wandb_files(path)
    if source.format == MLFLOW and path.is_file():  # a database, its -wal or -journal
        return [p for p in (path, *(path.with_name(path.name + side)
                                    for side in mlflow.SIDE_FILES)) if p.is_file()]
    files = []
    for folder, dirs, names in os.walk(path):
        dirs.sort()
        rel = Path(folder).relative_to(path)
        if source.format == NATIVE and rel.parts and rel.parts[0] not in TABLES:
            continue
        for name in sorted(names):
            if source.format == TENSORBOARD and not is_event_file(name):
                continue
            if source.format == MLFLOW and not (rel.parts[0] in mlflow.RUN_PARTS if rel.parts
                                                else name == mlflow.META_YAML):
                continue  # artifacts are not what the analysis reads
            if source.format == NATIVE and not rel.parts and not is_trace_file(name):
                continue  # reports and notes next to the trace are not the trace
            files.append(Path(folder) / name)
    return files


def open_source(source: Source, tags=None) -> Run:
    """Open a run of any format; imports happen in memory."""
    if source.format == NATIVE:
        return open_run(source.path)
    if source.format == TENSORBOARD:
        from tracelab.recorders.importers.tensorboard import read_tensorboard
        return read_tensorboard(source.path, tags).as_run(source.path)
    if source.format == MLFLOW:
        return mlflow.read_mlflow(source.path, tags, run_id=source.key).as_run(source.path)
    if source.format == WANDB:
        return wandb.read_wandb(source.path, tags).as_run(source.path)
    from tracelab.recorders.importers.csv import read_csv_log
    named = source.path.parent if source.path.name == CSV_LOG else source.path
    return read_csv_log(source.path, tags).as_run(named)


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a name longer than the filesystem allows: `require` says so
        return False


def open_any(path: str | os.PathLike, tags=None) -> Run:
    """A run directory, a TensorBoard log directory or a CSV metrics log, as a Run."""
    path = Path(path)
    if "#" in path.name and not _exists(path):  # mlflow.db#RUN: one run of a database
        db, _, key = str(path).rpartition("#")
        source = detect(db)
        if source is not None and source.format == MLFLOW and Path(db).is_file():
            return open_source(Source(Path(db), MLFLOW, key), tags)
    require(path, "no such file or directory")
    source = detect(path)
    if source is None:
        if path.is_dir():
            try:
                os.listdir(path)
            except OSError as exc:  # no read permission: what it holds cannot be told
                raise TraceError(f"{path}: cannot be read ({(exc.strerror or str(exc)).lower()}); "
                                 "expected a readable run directory") from None
            inner = next(walk_runs(path), None)
            if inner is not None:
                raise TraceError(f"{path}: holds runs in subdirectories (e.g. {inner.path}); "
                                 "analyze one of them, or all with `tracelab batch`")
            raise TraceError(f"{path}: not a tracelab run (no {META_FILE}), nor a TensorBoard "
                             f"log directory (no {EVENT_FILES} files), a CSV metrics log, an "
                             "MLflow run (meta.yaml and metrics/) or a W&B run (run-*.wandb)")
        raise TraceError(f"{path}: not a run; expected a run directory, a TensorBoard log "
                         "directory, a .csv metrics log, an MLflow database or a .wandb file")
    return open_source(source, tags)


def default_report_path(run: Run) -> Path:
    """RUN/report.html for a tracelab run; for a log imported on the fly (or a run built in
    memory), NAME-report.html in the working directory: the log's own directory may be
    read-only, and is never written."""
    if run.source is not None and not run.source.imported:
        return run.source.path / "report.html"
    return Path.cwd() / f"{safe_file_name(run.name)}-report.html"
