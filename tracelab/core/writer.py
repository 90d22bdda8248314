"""RunWriter: the crash-safe, append-only writer of a run directory.

Rows reach the writer as column dicts, or as callables that produce them. Callables run on the
writer's background thread, so the training thread never waits on a device-to-host copy. The
thread takes what is waiting every DRAIN_INTERVAL, all at once, and the column dicts wait as
they are; every `flush_interval` seconds each table's pending rows become one
record batch, appended to the table's tail, an Arrow IPC stream that stays readable when the
process is killed mid-write. Converting once per flush rather than once per step keeps the
writer's CPU time, taken from training, small. When a tail holds `part_rows` rows,
and at close, it is rewritten as a Parquet part (atomically) and removed.

Any error of the writer (a full disk, a read-only mount) is warned about once; recording then
stops and training goes on.

A process forked from the recording one (os.fork, a fork-started worker) leaves the parent's
run alone: every writer open at the fork is detached in the child (`os.register_at_fork`). It
writes nothing, not even at the child's exit, drops what it is given (warned once), and its
copies of the parent's open files point to the null device, so that nothing the child flushes
or closes reaches the parent's tails.
"""
from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import socket
import threading
import time
import warnings
import weakref
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracelab._version import __version__
from tracelab.core.batches import Columns, build_batch, row_count
from tracelab.core.errors import RunExistsError
from tracelab.core.files import atomic_path, create_new, write_atomic
from tracelab.core.schema import (ARROW_SCHEMAS, ARROWS, PARQUET, RESERVOIR, SAMPLES,
                                  SAMPLES_SNAPSHOT, SCALARS, SCHEMA_VERSION, TABLES,
                                  heartbeat_filename, meta_filename, part_name, rank_of_part)

Rows = Iterable[tuple[str, Columns]]
Item = Union[tuple[str, Columns], Callable[[], Rows]]

_CLOSE = object()


# The writer thread's niceness above the training's: on Linux it then mostly runs in the gaps the
# training leaves (Python dispatch, data loading) instead of preempting a busy intra-op thread,
# while still getting a tenth of a core or so when every core is busy.
WRITER_NICENESS = 10
# The writer takes the waiting items at least this often (seconds). Whatever the flush interval,
# it flushes once this many items (a step each) came in since the last flush, so that a kill
# loses at most MAX_UNSAVED steps of a fast loop (below).
DRAIN_INTERVAL = 0.2
FLUSH_ITEMS = 50
# On a loaded machine the writer thread may not be scheduled for seconds (its niceness, the GIL
# held by a fast training loop), or it may be slower than the loop. Then the training thread does
# the writer's work itself: when the last flush is a drain interval overdue (if the writer is not
# at it right now), and when this many items wait (waiting for the writer to let go first). A
# kill then loses at most MAX_UNSAVED items, whatever the scheduling: at most HELP_ITEMS
# waiting, and at most FLUSH_ITEMS that the writer took but has not flushed yet (_drain).
HELP_ITEMS = FLUSH_ITEMS
MAX_UNSAVED = HELP_ITEMS + FLUSH_ITEMS
# The samples snapshot is a whole file: the periodic flush rewrites it at most this often, and
# at most once in 1 / SAMPLES_COST_SHARE times the CPU time its last write took (a reservoir of
# thousands of features would take a large share of a core to rewrite every 10 s).
SAMPLES_INTERVAL = 10.0
SAMPLES_COST_SHARE = 0.01


def samples_due(now: float, took: float) -> float:
    """When the periodic flush may rewrite the samples snapshot again, its last rewrite having
    ended at `now` and taken `took` CPU seconds."""
    return now + max(SAMPLES_INTERVAL, took / SAMPLES_COST_SHARE)


def _lower_priority() -> None:
    """Raise the calling thread's niceness by WRITER_NICENESS, where the OS allows it."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + WRITER_NICENESS)
    except (AttributeError, OSError):  # not Linux-like thread priorities: keep the default
        pass


def _warm_up() -> None:
    """Load now what the first flush would load: pyarrow's conversion imports pandas on first
    use, a second or more on a loaded machine, which the writer would spend holding its work."""
    build_batch(SCALARS, [(1, {"step": np.zeros(1, np.int64), "value": np.zeros(1)})])


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    write_atomic(path, _json(data))


def _json(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=2, default=str) + "\n"


def _write_parquet(table: pa.Table, target: Path, **options: Any) -> None:
    """Through a fresh temporary file and a rename; opened by Python, so any path works."""
    with atomic_path(target) as tmp, open(tmp, "wb") as f:
        pq.write_table(table, f, **options)


def write_samples_file(target: Path, columns: Columns) -> None:
    """The samples snapshot as one Parquet file, with dictionary pages for the split and
    feature names only: the values and steps are nearly all distinct. Names already
    dictionary-encoded (the reservoir's) are written as they are, without a string per row;
    the file stores no Arrow schema, so they read back as the schema's strings."""
    schema = ARROW_SCHEMAS[SAMPLES]
    table = pa.Table.from_arrays([_samples_column(columns[f.name], f.type) for f in schema],
                                 names=schema.names)
    _write_parquet(table, target, use_dictionary=["split", "feature"], store_schema=False)


def _samples_column(column: Any, value_type: pa.DataType) -> pa.Array:
    if isinstance(column, pa.DictionaryArray):
        return column if column.type.value_type == value_type \
            else column.dictionary_decode().cast(value_type)
    return pa.array(column, type=value_type)


# The writers of this process, detached in a forked child (_detach_in_child).
_OPEN: "weakref.WeakSet[RunWriter]" = weakref.WeakSet()


def _detach_in_child() -> None:
    for writer in list(_OPEN):
        writer._detach()


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere a process is never forked
    os.register_at_fork(after_in_child=_detach_in_child)


class _Table:
    """One table's tail stream, its rows waiting for the next flush and the part being built."""

    def __init__(self, directory: Path, name: str, rank: int):
        self.directory, self.name, self.rank = directory, name, rank
        self.seq = 0
        self.pending: list[tuple[int, Columns]] = []
        self.part: list[pa.RecordBatch] = []
        self.part_rows = 0
        self.last_step: int | None = None  # the highest step on disk
        self.warned: set[str] = set()  # the kinds of rows left out (_salvage), warned about
        self.sink = None
        self.stream = None

    def _file(self, ext: str) -> Path:
        return self.directory / part_name(self.rank, self.seq, ext)

    def flush(self) -> None:
        if not self.pending:
            return
        try:
            batch = build_batch(self.name, self.pending)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            batch = self._salvage(exc)
        self.pending.clear()
        if self.stream is None:
            self._start(batch)
        else:
            self.stream.write_batch(batch)
            self.sink.flush()
        if batch.num_rows and "step" in batch.schema.names:
            top = pc.max(batch.column("step")).as_py()
            if top is not None:
                self.last_step = top if self.last_step is None else max(top, self.last_step)
        self.part.append(batch)
        self.part_rows += batch.num_rows

    def _start(self, batch: pa.RecordBatch) -> None:
        """Open the tail with its first batch, written whole before the tail appears under its
        name: a kill in between leaves no tail at all, never one that no reader can open. Later
        batches are appended in place (a reader keeps every complete one)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with atomic_path(self._file(ARROWS)) as tmp:
            sink = open(tmp, "wb")
            try:
                stream = pa.ipc.new_stream(sink, batch.schema)
                stream.write_batch(batch)
                sink.flush()
            except BaseException:
                sink.close()
                raise
        self.sink, self.stream = sink, stream

    def _salvage(self, exc: Exception) -> pa.RecordBatch:
        """The pending items that convert, without the one(s) that do not: one producer's odd
        values must not stop the whole table (nor the run's recording). Warned once per kind."""
        good = []
        for item in self.pending:
            try:
                build_batch(self.name, [item])
                good.append(item)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as bad:
                exc = bad
        key = type(exc).__name__
        if key not in self.warned:
            self.warned.add(key)
            warnings.warn(f"tracelab: {self.name} rows of {len(self.pending) - len(good)} "
                          f"item(s) left out, their values do not convert ({key}: {exc}); the "
                          "other rows are written, warned once", RuntimeWarning, stacklevel=2)
        return build_batch(self.name, good)

    def roll(self) -> None:
        """Rewrite the tail as a Parquet part: write a temporary file, rename, drop the tail."""
        if not self.part:
            return
        _write_parquet(pa.Table.from_batches(self.part), self._file(PARQUET), compression="zstd")
        self.stream.close()
        self.sink.close()
        os.remove(self._file(ARROWS))
        self.stream = self.sink = None
        self.part, self.part_rows = [], 0
        self.seq += 1


class RunWriter:
    """Writes one process's share (one rank) of a run directory."""

    def __init__(self, path: str | os.PathLike, meta: Mapping[str, Any] | None = None, *,
                 rank: int = 0, flush_interval: float = 1.0, part_rows: int = 200_000):
        # Absolute now: a later chdir of the training script must not move the run's files.
        self.path = Path(os.path.abspath(path))
        self.rank = rank
        self.flush_interval = flush_interval
        self.part_rows = part_rows
        self.failed = False
        self.closed = False
        self.detached = False  # in a process forked from this writer's: writes nothing
        self._warned_detached = False
        # Why recording stopped early (a full disk, ...): {"after_step", "reason"}, else None.
        self.stopped: dict[str, Any] | None = None
        self._end_status: dict[str, Any] = {"state": "completed"}  # what close() was given
        self._meta_path = self.path / meta_filename(rank)
        own = self._own_files()
        if own:
            raise RunExistsError(f"{self.path}: already holds a run ({own}); tracelab never "
                                 "overwrites one, choose a new directory")
        self.path.mkdir(parents=True, exist_ok=True)
        self._meta: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "tracelab_version": __version__,
            "rank": rank,
            "start_time": time.time(),
            "end_time": None,
            "status": {"state": "running"},
            "writer": {"pid": os.getpid(), "hostname": socket.gethostname(),
                       "flush_interval": flush_interval},
            **(meta or {}),
        }
        self._meta_lock = threading.Lock()
        try:  # claimed whole and at once: of two writers starting together, one gets the run
            create_new(self._meta_path, _json(self._meta))
        except FileExistsError:
            raise RunExistsError(f"{self.path}: already holds a run ({self._meta_path.name}); "
                                 "tracelab never overwrites one, choose a new directory") from None
        self._heartbeat = self.path / heartbeat_filename(rank)
        self._heartbeat.touch()
        self._tables = {t: _Table(self.path / t, t, rank) for t in TABLES}
        self._samples: Columns | None = None
        self._samples_due = 0.0  # the first snapshot goes out at the first flush
        # Items wait here for the writer, which takes them all at once every DRAIN_INTERVAL (or
        # when woken): one wake-up per step would cost a context switch and cold caches each.
        self._items: collections.deque = collections.deque()
        self._wake = threading.Event()
        self._unflushed = 0  # items accepted since the last flush
        # Whoever does the writer's work holds this: the writer thread, or the training thread
        # when the writer is late (see HELP_ITEMS).
        self._lock = threading.Lock()
        self._flushed_at = time.monotonic()
        self._late_after = flush_interval + DRAIN_INTERVAL
        self.cpu_seconds = 0.0  # the writer thread's CPU time so far (its share of the cost)
        self._thread = threading.Thread(target=self._run, name=f"tracelab-writer-r{rank}",
                                        daemon=True)
        self._thread.start()
        atexit.register(self._at_exit)
        _OPEN.add(self)

    def _own_files(self) -> str | None:
        """A file of this rank's share of a run already in the directory (its metadata, or a
        part of any table: a run that lost its meta.json is still a run), or None. Other
        ranks' files are expected: the ranks of a distributed run share the directory."""
        if self._meta_path.exists():
            return self._meta_path.name
        for table in TABLES:
            try:
                names = os.listdir(self.path / table)
            except (FileNotFoundError, NotADirectoryError):
                continue
            for name in sorted(names):
                if rank_of_part(name) == self.rank:
                    return f"{table}/{name}"
        return None

    # -- training-thread side ------------------------------------------------------------------
    def write(self, item: Item) -> None:
        """Queue rows: `(table, columns)` or a callable returning `[(table, columns), ...]`."""
        if self.detached:
            self._dropped_in_child()
        elif not self.failed and not self.closed:
            items = self._items
            items.append(item)
            if len(items) >= FLUSH_ITEMS // 2:
                self._wake.set()
            full = len(items) >= HELP_ITEMS
            if full or time.monotonic() - self._flushed_at > self._late_after:
                self._help(wait=full)

    def _help(self, wait: bool = False) -> None:
        """Do the late writer's work on this thread; unless `wait`, only if the writer is not at
        it right now."""
        if self._lock.acquire(blocking=wait):
            try:
                while self._items and self._drain() and not self.failed:
                    self._guard(self._flush, False)
            finally:
                self._lock.release()

    def set_samples(self, columns: Columns | Callable[[], Columns]) -> None:
        """Replace the samples snapshot: columns, or a callable giving them at the next flush.

        The caller keeps the bounded reservoir; the writer rewrites one file with its latest
        state at each flush, so the file never grows with the run.
        """
        if not self.failed and not self.closed and not self.detached:
            self._items.append((SAMPLES_SNAPSHOT, columns))

    def flush(self, timeout: float | None = 30.0, *, samples: bool = True) -> bool:
        """Block until everything queued so far is on disk; False on timeout or failure.

        samples=False leaves the samples snapshot to its own schedule (the periodic flush
        rewrites it every SAMPLES_INTERVAL or less often), as a running recorder does.
        """
        if self.failed or self.closed or self.detached:
            return False
        done = threading.Event()
        done.samples = samples  # type: ignore[attr-defined]
        self._items.append(done)
        self._wake.set()
        return done.wait(timeout) and not self.failed

    def update_meta(self, **fields: Any) -> None:
        if self.detached:
            return
        with self._meta_lock:
            self._meta.update(fields)
            if not self.failed:
                try:
                    write_json_atomic(self._meta_path, self._meta)
                except OSError as exc:
                    self._fail(exc)

    def _write_meta_anyway(self, **fields: Any) -> None:
        """After a failure, the metadata still says how the run ended, if the disk takes it."""
        if self.detached:
            return
        with self._meta_lock:
            self._meta.update(fields)
            try:
                write_json_atomic(self._meta_path, self._meta)
            except OSError:
                pass  # the failure was warned about once already

    def close(self, status: Mapping[str, Any] | None = None, *, wait: bool = True) -> None:
        """Drain the queue, turn every tail into Parquet and record the end status (the writer
        thread's last work). wait=False only asks for it: a Recorder that is garbage-collected
        closes its writer so, from whichever thread the collection runs on."""
        if self.detached:  # the parent's run: its own writer ends it
            self.closed = True
            return
        if not self.closed:
            self.closed = True
            self._end_status = dict(status or {"state": "completed"})
            self._items.append(_CLOSE)
            self._wake.set()
        if wait and threading.current_thread() is not self._thread:
            self._thread.join()

    def _detach(self) -> None:
        """In a forked child (called first thing after the fork): never touch the parent's run.
        The writer thread does not exist here; the locks it may have held are replaced."""
        self.detached = True
        atexit.unregister(self._at_exit)
        self._lock, self._meta_lock = threading.Lock(), threading.Lock()
        self._items = collections.deque()
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            for table in getattr(self, "_tables", {}).values():
                if table.sink is not None and not table.sink.closed:
                    os.dup2(null, table.sink.fileno())  # this process's descriptor only
        finally:
            os.close(null)

    def _dropped_in_child(self) -> None:
        if not self._warned_detached:
            self._warned_detached = True
            warnings.warn(f"tracelab: this process was forked from the one recording {self.path}"
                          ": it records nothing into that run (a Recorder of its own, made in "
                          "this process, records its steps); warned once", RuntimeWarning,
                          stacklevel=4)

    def _at_exit(self) -> None:
        # The interpreter is exiting without close(): keep the data, and say so in the status.
        # A close asked for earlier (wait=False) is waited for: the thread is a daemon.
        self.close({"state": "completed", "note": "closed at interpreter exit"})

    def _write_end(self) -> None:
        status = self._end_status
        if self.stopped is not None:  # training went on; only the recording stopped
            status["recording_stopped"] = dict(self.stopped)
            self._write_meta_anyway(end_time=time.time(), status=status)
        else:
            self.update_meta(end_time=time.time(), status=status)

    # -- writer thread --------------------------------------------------------------------------
    def _run(self) -> None:
        _lower_priority()
        # Here, not in the constructor: the first Recorder() of a process would wait for it.
        with contextlib.suppress(Exception):  # the first flush loads it, or says what failed
            _warm_up()
        cpu_start = time.thread_time()
        while True:
            self.cpu_seconds = time.thread_time() - cpu_start
            due = self._flushed_at + self.flush_interval
            self._wake.wait(min(DRAIN_INTERVAL, max(0.0, due - time.monotonic())))
            self._wake.clear()
            while True:  # a flush at least every FLUSH_ITEMS items, the lock let go in between
                with self._lock:
                    if not self._drain():
                        self._guard(self._finish)
                        self.cpu_seconds = time.thread_time() - cpu_start
                        self._guard(self._write_end)
                        atexit.unregister(self._at_exit)
                        return
                    if not self.failed and (self._unflushed >= FLUSH_ITEMS or time.monotonic()
                                            >= self._flushed_at + self.flush_interval):
                        self._guard(self._flush, False)
                    if len(self._items) < FLUSH_ITEMS:
                        break

    def _drain(self) -> bool:
        """Take waiting items until FLUSH_ITEMS wait for a flush (the caller holds the lock and
        flushes after): no flush holds more, so that at most MAX_UNSAVED items are ever off the
        disk. False when the close sentinel is next, which stays in place for the writer thread."""
        items = self._items
        room = FLUSH_ITEMS if self.failed else FLUSH_ITEMS - self._unflushed
        for _ in range(min(len(items), room)):
            item = items[0]
            if item is _CLOSE:
                return False
            items.popleft()
            if isinstance(item, threading.Event):
                if not self.failed:
                    self._guard(self._flush, item.samples)
                item.set()
            elif not self.failed:
                self._guard(self._accept, item)
                self._unflushed += 1
        return True

    def _accept(self, item: Item) -> None:
        if callable(item):
            rows = item()
        else:
            rows = [item]
        for table, columns in rows:
            if table == SAMPLES_SNAPSHOT:
                self._samples = columns
            elif n := row_count(table, columns):
                self._tables[table].pending.append((n, columns))

    def _flush(self, everything: bool = True) -> None:
        """Tails to disk; the samples snapshot too when `everything` or when it is due (the
        periodic flush rewrites it at most every SAMPLES_INTERVAL seconds)."""
        self._unflushed = 0
        self._flushed_at = time.monotonic()
        for table in self._tables.values():
            table.flush()
            if table.part_rows >= self.part_rows:
                table.roll()
        if self._samples is not None and (everything or time.monotonic() >= self._samples_due):
            self._write_samples(self._samples)
        os.utime(self._heartbeat)

    def _write_samples(self, samples: Columns | Callable[[], Columns]) -> None:
        start = time.thread_time()  # CPU: what the rewrite takes from training
        columns = samples() if callable(samples) else samples
        directory = self.path / SAMPLES
        directory.mkdir(exist_ok=True)
        write_samples_file(directory / part_name(self.rank, RESERVOIR, PARQUET), columns)
        self._samples = None
        took = time.thread_time() - start
        self._samples_due = samples_due(time.monotonic(), took)

    def _finish(self) -> None:
        self._items.popleft()  # the close sentinel
        while self._items and self._drain():
            if not self.failed and self._unflushed >= FLUSH_ITEMS:
                self._flush(False)
        if not self.failed:
            self._flush()
            for table in self._tables.values():
                table.roll()

    def _guard(self, fn: Callable, *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # never let recording break training
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        if not self.failed:
            self.failed = True
            last = self._tables[SCALARS].last_step
            self.stopped = {"after_step": last, "reason": f"{type(exc).__name__}: {exc}"}
            warnings.warn(f"tracelab: writing {self.path} failed ({type(exc).__name__}: {exc}); "
                          "recording stopped, training continues", RuntimeWarning, stacklevel=2)
