"""MLflow's SQLite store (`mlflow.db`): which files are one, its runs, and one run's rows.

The database is read with the standard library's sqlite3 and never written: immutable where
nothing is pending, else from a private copy (see `_connect`). The database and its -wal or
-journal file must be regular files in the database's folder. SQLite keeps any type in any
column: a metric row whose key is not text or whose step, value or timestamp is not a number,
and a param or tag without a text key, are left out and said in the run's problems.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Optional

import numpy as np

from tracelab.core.errors import TraceError
from tracelab.core.files import open_inside

SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
STORE_TABLES = {"runs", "metrics", "params", "tags"}


def reason(exc: BaseException) -> str:
    """Why an OSError or another exception happened, in a few lowercase words."""
    return (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__).lower()


def is_sqlite_store(path: Path) -> bool:
    """An MLflow SQLite database (by its suffix, SQLite's header and MLflow's tables)."""
    if path.suffix.lower() not in SQLITE_SUFFIXES:
        return False
    try:
        with open_inside(path, path.parent) as f:
            if f.read(16) != SQLITE_MAGIC:
                return False
        with _connect(path) as db:
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE "
                                              "type = 'table'")}
    except _CopyFailed:  # an SQLite file: store_runs says what keeps it from being read
        return True
    except (OSError, sqlite3.Error):
        return False
    return STORE_TABLES <= names


class _CopyFailed(sqlite3.OperationalError):
    """A database with pending pages could not be copied to be read."""


# (path, its -wal or -journal, and their sizes and times) -> the private copy of both
_COPIES: dict[tuple, Path] = {}


@contextlib.contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    """The database, read without writing anything beside it. Even read-only, SQLite creates
    a `-shm` file next to a database in WAL mode (and cannot open it in a folder it may not
    write): it is opened immutable. A database with pages its writer has not finished with
    (a `-wal` file that holds pages, or a hot `-journal` left by a crash mid-transaction,
    which immutable would read as committed) is read from a private copy of both, made once
    per process while they stay as they are, where SQLite may complete or roll them back."""
    path = Path(path).resolve()
    pending = _pending(path)
    if pending is None:
        db = sqlite3.connect(f"{path.as_uri()}?immutable=1", uri=True)
    else:
        db = sqlite3.connect(_private_copy(path, pending))
    try:
        yield db
    finally:
        db.close()


# The files SQLite keeps pages in beside a database its writer has not finished with.
SIDE_FILES = ("-wal", "-journal")


def _pending(path: Path) -> Optional[Path]:
    """The database's -wal or -journal file when it holds pages, else None. One that is not
    a regular file beside it (a FIFO, a link elsewhere) is never read: the database is read
    immutable, without it, and `refused_sides` names it."""
    for suffix in SIDE_FILES:
        side = path.with_name(path.name + suffix)
        try:
            with open_inside(side, path.parent) as handle:
                if os.fstat(handle.fileno()).st_size > 0:
                    return side
        except OSError:
            continue
    return None


def refused_sides(path: Path) -> list[str]:
    """A problem line for each -wal or -journal file beside the database that `_pending`
    leaves unread."""
    path = Path(path).resolve()
    problems = []
    for suffix in SIDE_FILES:
        side = path.with_name(path.name + suffix)
        if not os.path.lexists(side):
            continue
        try:
            open_inside(side, path.parent).close()
        except OSError as exc:
            problems.append(f"{side.name}: unreadable ({reason(exc)}); the database was read "
                            "without it")
    return problems


def _private_copy(path: Path, side: Path) -> Path:
    try:
        key = (path, side, *((s.st_size, s.st_mtime_ns) for s in (path.stat(), side.stat())))
    except OSError as exc:
        raise _CopyFailed(f"cannot read it ({(exc.strerror or str(exc)).lower()})") from None
    if key not in _COPIES:
        if not _COPIES:
            atexit.register(_remove_copies)
        folder = Path(tempfile.mkdtemp(prefix="tracelab-"))
        try:
            shutil.copyfile(path, folder / path.name)
            shutil.copyfile(side, folder / side.name)
        except OSError as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise _CopyFailed(f"cannot copy it to read its {side.name[len(path.name):]} file "
                              f"({(exc.strerror or str(exc)).lower()})") from None
        _COPIES[key] = folder / path.name
    return _COPIES[key]


def _remove_copies() -> None:
    for copy in _COPIES.values():
        shutil.rmtree(copy.parent, ignore_errors=True)
    _COPIES.clear()


def store_runs(path: Path) -> list[tuple[str, str]]:
    """(run id, run name) of every run of an MLflow SQLite store that is not deleted."""
    try:
        with _connect(path) as db:
            return [(r[0], r[1] or r[0]) for r in db.execute(
                "SELECT run_uuid, name FROM runs WHERE lifecycle_stage IS NOT 'deleted' "
                "AND run_uuid IS NOT NULL "
                "ORDER BY start_time, run_uuid")]
    except sqlite3.Error as exc:
        raise TraceError(f"{path}: unreadable as an MLflow database ({exc})") from None


class StoreRun(NamedTuple):
    """What a run of the store holds, as the importer reads it."""
    key: Any
    run_id: Optional[str]
    name: Optional[str]
    status: str
    start: Any
    end: Any
    experiment: Optional[str]
    series: dict[str, tuple]
    params: dict[str, Optional[str]]
    tags: dict[str, Optional[str]]
    problems: list[str]


def read_store_run(path: Path, run_id: Optional[str]) -> StoreRun:
    """The run `run_id` (its id or name; None: the store's only run) of the store at `path`;
    TraceError when it cannot be read, or is not there."""
    if run_id is None:
        runs = store_runs(path)
        if len(runs) != 1:
            listed = ", ".join(f"{rid} ({name})" for rid, name in runs[:5])
            raise TraceError(f"{path}: holds {len(runs)} MLflow runs ({listed}"
                             f"{', ...' if len(runs) > 5 else ''}); name one with --run-id, "
                             "or analyze them all with `tracelab batch`")
        run_id = runs[0][0]
    try:
        with _connect(path) as db:
            row = db.execute("SELECT r.run_uuid, r.name, r.status, r.start_time, r.end_time, "
                             "e.name FROM runs r LEFT JOIN experiments e ON e.experiment_id = "
                             "r.experiment_id WHERE r.run_uuid = ? OR r.name = ? "
                             "ORDER BY r.run_uuid = ? DESC", (run_id, run_id, run_id)).fetchone()
            if row is None:
                raise TraceError(f"{path}: no MLflow run {run_id!r}")
            rid = row[0]
            metrics = db.execute(f"SELECT key, step, CASE WHEN is_nan THEN NULL ELSE value END, "
                                 f"timestamp FROM metrics WHERE run_uuid = ? AND {_WHOLE_METRIC} "
                                 "ORDER BY key, step, timestamp", (rid,)).fetchall()
            problems = refused_sides(path) + _left_out(db, rid)
            params = _settings(db, "params", rid, problems)
            run_tags = _settings(db, "tags", rid, problems)
    except sqlite3.Error as exc:
        raise TraceError(f"{path}: unreadable as an MLflow database ({exc})") from None
    series: dict[str, tuple] = {}
    if metrics:
        keys = np.array([m[0] for m in metrics], dtype=object)
        numbers = np.array([m[1:] for m in metrics], dtype=np.float64)  # NULL (NaN) -> nan
        bounds = np.flatnonzero(keys[1:] != keys[:-1]) + 1
        for start, end in zip(np.r_[0, bounds], np.r_[bounds, len(keys)]):
            block = numbers[start:end]
            series[keys[start]] = (block[:, 0], block[:, 1], block[:, 2] / 1000.0)
    return StoreRun(rid, _text(rid), _text(row[1]), _text(row[2]) or "", row[3], row[4],
                    _text(row[5]), series, params, run_tags, problems)


# A metric row the trace can hold: a text key, numbers (or NULL) for step, value and timestamp.
# MLflow writes no other, but SQLite keeps whatever a column is given (a TEXT value).
_WHOLE_METRIC = ("typeof(key) = 'text' AND typeof(step) IN ('integer', 'real', 'null') AND "
                 "typeof(value) IN ('integer', 'real', 'null') AND "
                 "typeof(timestamp) IN ('integer', 'real', 'null')")


def _left_out(db: sqlite3.Connection, rid: Any) -> list[str]:
    """The problem line for the run's metric rows that _WHOLE_METRIC leaves out, if any."""
    count, key = db.execute(f"SELECT count(*), min(CAST(key AS TEXT)) FROM metrics WHERE "
                            f"run_uuid = ? AND NOT ({_WHOLE_METRIC})", (rid,)).fetchone()
    if not count:
        return []
    return [f"metrics: {count} row{'s' if count > 1 else ''} with a key that is not text or a "
            f"step, value or timestamp that is not a number left out (the first key: {key!r})"]


def _settings(db: sqlite3.Connection, table: str, rid: Any, problems: list[str]
              ) -> dict[str, Optional[str]]:
    """The run's params or tags: text keys (a row without one is left out, and said), their
    values as text (NULL stays None)."""
    out, bad = {}, 0
    for key, value in db.execute(f"SELECT key, value FROM {table} WHERE run_uuid = ?", (rid,)):
        if not isinstance(key, str):
            bad += 1
            continue
        out[key] = _text(value)
    if bad:
        problems.append(f"{table}: {bad} row{'s' if bad > 1 else ''} without a text key left out")
    return out


def _text(value: Any) -> Optional[str]:
    """A database value as text: SQLite keeps any type in any column (a BLOB name)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
