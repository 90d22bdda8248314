"""Run: the reader of a run directory, and the views of its tables that rules share.

`open_run(path)` validates the directory and reads meta.json at once; the tables are read on
first use. Parts that cannot be read are skipped and listed in `Run.problems`, so a partly
corrupt or killed run is analyzed as far as it can be read.
"""
from __future__ import annotations

import json
import math
import os
import re
import socket
import time
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq

from tracelab.core.errors import TraceError
from tracelab.core.schema import (ACTIVATION, ACTIVATIONS, ARROW_SCHEMAS, DATA_TIME, DATA_TIMING,
                                  ENVIRONMENT, EVAL, GRAD, GRADS, INPUTS, INPUTS_REQ, LOSS,
                                  LOSS_NAME, META_FILE, MODEL, SAMPLES, SAMPLES_REQ, SCALARS,
                                  SCHEMA_VERSION, TENSORS, TRAIN, UPDATE, UPDATES, WEIGHT, WEIGHTS,
                                  Requirement, heartbeat_filename, rank_of_meta, rank_of_part)

# A live writer touches its heartbeat every flush; this much silence means it is gone.
KILLED_AFTER_S = 60.0
# A rank that stops takes the others down: their collectives fail (errors like these) or the
# launcher kills them. A distributed run's status is that of the rank that stopped first.
_COLLECTIVE_ERROR = re.compile(r"DistBackendError|DistNetworkError|DistStoreError|NCCL|gloo|"
                               r"connection (closed|reset) by peer|timed? ?out", re.I)
_STOP_ORDER = {"failed": 0, "killed": 1, "collective-failed": 2, "running": 3, "completed": 4}


def open_run(path: str | os.PathLike) -> "Run":
    """Open a run directory written by tracelab. Raises TraceError with a one-line reason."""
    path = Path(path)
    if not path.exists():
        raise TraceError(f"{path}: no such directory")
    if not path.is_dir():
        raise TraceError(f"{path}: not a directory; expected a tracelab run directory")
    # Each rank of a distributed run writes its own meta file; any readable one opens the run,
    # so the ranks that survived stay readable when another rank died or lost its file.
    try:
        names = sorted(os.listdir(path))
    except OSError:
        names = []
    files = {rank: path / name for name in names if (rank := rank_of_meta(name)) is not None}
    if not files:
        raise TraceError(f"{path}: not a tracelab run (no {META_FILE})")
    ranks: dict[int, dict[str, Any]] = {}
    problems: list[str] = []
    failure: TraceError | None = None
    for rank, file in sorted(files.items()):
        try:
            ranks[rank] = _read_meta(file)
        except TraceError as exc:
            if isinstance(exc, _UnsupportedVersion):  # reading on would misread the run
                raise
            failure = failure or exc
            problems.append(f"{file.name}: unreadable, rank {rank} metadata skipped")
    if not ranks:
        raise failure  # type: ignore[misc]
    if 0 not in files:
        problems.append(f"{META_FILE}: missing; run metadata taken from rank {min(ranks)}")
    run = Run(path, ranks[min(ranks)], rank_meta=ranks)
    run.problems.extend(problems)
    return run


def _last_per_cell(cells: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """`size` cells, each the last non-missing of its values (NaN when none), like
    groupby().last(), as one scatter: pivot_table costs 30x more on a 10,000-row table."""
    ok = ~np.isnan(values)
    cells, values = cells[ok], values[ok]
    last = len(cells) - 1 - np.unique(cells[::-1], return_index=True)[1]
    out = np.full(size, np.nan)
    out[cells[last]] = values[last]
    return out


class _UnsupportedVersion(TraceError):
    pass


def _read_meta(meta_path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"{meta_path}: unreadable ({exc}); expected tracelab run metadata "
                         "as JSON") from None
    if not isinstance(meta, dict):
        raise TraceError(f"{meta_path}: expected a JSON object")
    version = meta.get("schema_version")
    if not isinstance(version, int):
        raise TraceError(f"{meta_path}: field 'schema_version' missing or not an integer")
    if version > SCHEMA_VERSION or version < 1:
        raise _UnsupportedVersion(f"{meta_path}: schema version {version} is not supported by "
                                  f"this tracelab (reads 1..{SCHEMA_VERSION}); upgrade tracelab")
    return meta


def _read_part(file: Path) -> pa.Table:
    if file.suffix == ".parquet":
        return pq.read_table(file)
    # An Arrow IPC tail: keep every complete batch; a kill may have cut the last one short.
    batches = []
    with pa.OSFile(str(file)) as source:
        try:
            reader = pa.ipc.open_stream(source)
            while True:
                batches.append(reader.read_next_batch())
        except StopIteration:
            pass
        except (pa.ArrowInvalid, OSError):
            if not batches:
                raise
    return pa.Table.from_batches(batches)


class Run:
    """A recorded run: metadata plus four lazily loaded tables (pandas DataFrames)."""

    def __init__(self, path: Path | None, meta: Mapping[str, Any], *,
                 rank_meta: Mapping[int, Mapping[str, Any]] | None = None,
                 frames: Mapping[str, pd.DataFrame] | None = None):
        self.path = path
        self.meta = dict(meta)
        self.rank_meta = {r: self.meta if m is meta else dict(m)
                          for r, m in (rank_meta or {0: meta}).items()}
        self.problems: list[str] = []
        self._frames = dict(frames or {})

    @classmethod
    def from_frames(cls, meta: Mapping[str, Any] | None = None, **frames: pd.DataFrame) -> "Run":
        """An in-memory run, for tests and importers: `Run.from_frames(scalars=df, ...)`."""
        base = {"schema_version": SCHEMA_VERSION, "status": {"state": "completed"}}
        full = {}
        for table, schema in ARROW_SCHEMAS.items():
            df = frames.get(table)
            df = pd.DataFrame(columns=schema.names) if df is None else df.copy()
            for col in schema.names:
                if col not in df:
                    df[col] = pd.NA if col not in ("nan_count", "inf_count") else 0
            full[table] = df
        # Frames with a `rank` column make a distributed run; every table then gets one.
        ranks = sorted({int(r) for df in full.values() if "rank" in df for r in df["rank"]})
        for df in full.values():
            if ranks and "rank" not in df:
                df["rank"] = ranks[0]
        meta = {**base, **(meta or {})}
        return cls(None, meta, frames=full,
                   rank_meta={r: meta if r == ranks[0] else {**meta, "rank": r} for r in ranks}
                   or None)

    @property
    def name(self) -> str:
        return self.path.name if self.path else str(self.meta.get("name", "in-memory run"))

    # -- tables ---------------------------------------------------------------------------------
    def _table(self, table: str) -> pd.DataFrame:
        if table not in self._frames:
            self._frames[table] = self._load(table)
        return self._frames[table]

    def _load(self, table: str) -> pd.DataFrame:
        schema = ARROW_SCHEMAS[table]
        directory = self.path / table if self.path else None
        parts: dict[str, Path] = {}
        if directory and directory.is_dir():
            for file in sorted(directory.iterdir()):
                # A roll interrupted between rename and unlink leaves both; the Parquet wins.
                if rank_of_part(file.name) is not None and not (
                        file.suffix == ".arrows" and file.with_suffix(".parquet").exists()):
                    parts[file.name] = file
        tables, ranks = [], []
        for name, file in parts.items():
            try:
                tables.append(_read_part(file).select(schema.names).cast(schema))
                ranks.append(rank_of_part(name))
            except Exception as exc:  # a corrupt part must not hide the rest of the run
                self.problems.append(f"{table}/{name}: unreadable ({type(exc).__name__})")
        if len(self.ranks) > 1:
            tables = [t.append_column("rank", pa.array([r] * t.num_rows, pa.int32()))
                      for t, r in zip(tables, ranks)]
            schema = schema.append(pa.field("rank", pa.int32()))
        if not tables:
            return schema.empty_table().to_pandas()
        df = pa.concat_tables(tables).to_pandas()
        sort = [c for c in ("step", "rank") if c in df]
        if sort == ["step"] and df["step"].is_monotonic_increasing:
            return df  # one writer appends in step order: sorting 1M rows again costs ~0.5 s
        return df.sort_values(sort, kind="stable", ignore_index=True) if sort else df

    @cached_property
    def ranks(self) -> list[int]:
        """The ranks that left metadata or data; `[0]` for a single-process run.

        With several ranks every table has a `rank` column (int32).
        """
        found = set(self.rank_meta)
        if self.path is None:
            in_data = {int(r) for t in ARROW_SCHEMAS if t in self._frames
                       and "rank" in self._frames[t] for r in self._frames[t]["rank"].dropna()}
            found = in_data or found
        else:
            for table in ARROW_SCHEMAS:
                directory = self.path / table
                if directory.is_dir():
                    found.update(r for r in map(rank_of_part, (f.name for f in directory.iterdir()))
                                 if r is not None)
        return sorted(found)

    @property
    def scalars(self) -> pd.DataFrame:
        return self._table(SCALARS)

    @property
    def tensors(self) -> pd.DataFrame:
        return self._table(TENSORS)

    @property
    def inputs(self) -> pd.DataFrame:
        return self._table(INPUTS)

    @property
    def samples(self) -> pd.DataFrame:
        return self._table(SAMPLES)

    def load_all(self) -> "Run":
        for table in ARROW_SCHEMAS:
            self._table(table)
        return self

    # -- status ---------------------------------------------------------------------------------
    @property
    def status(self) -> dict[str, Any]:
        """`{"state": "completed"|"failed"|"killed"|"running", ...}`; a dead writer means killed.

        With several ranks it is the status of the rank that most likely stopped the run, plus
        `rank` (that rank) and `ranks` (every rank's state; "unknown" for a rank that left data
        but no metadata): a rank that raised, else one that was killed, else one whose
        collective failed (a consequence), each the earliest to stop; then running, completed.
        """
        if len(self.ranks) <= 1:
            return self.rank_status(min(self.rank_meta))
        states = {r: self.rank_status(r) if r in self.rank_meta else {"state": "unknown"}
                  for r in self.ranks}
        first = min(states, key=lambda r: self._stop_order(r, states[r]))
        return {**states[first], "rank": first,
                "ranks": {r: st["state"] for r, st in states.items()}}

    def _stop_order(self, rank: int, status: Mapping[str, Any]) -> tuple:
        state = status["state"]
        if state == "failed" and _COLLECTIVE_ERROR.search(
                f"{status.get('exception_type', '')} {status.get('exception_message', '')}"):
            state = "collective-failed"
        when = self.rank_meta.get(rank, {}).get("end_time") or self._heartbeat(rank)
        return _STOP_ORDER.get(state, len(_STOP_ORDER)), when or math.inf, rank

    def rank_status(self, rank: int) -> dict[str, Any]:
        """One rank's status, from its own metadata and its own writer's liveness."""
        meta = self.rank_meta[rank]
        status = dict(meta.get("status") or {"state": "running"})
        if status.get("state") == "running" and self._writer_gone(meta, rank):
            status["state"] = "killed"
            status["last_step"] = self._last_step_of(rank)
        return status

    def _last_step_of(self, rank: int) -> int | None:
        return self._rank_steps(rank)[1] if len(self.ranks) > 1 else self.last_step

    def _writer_gone(self, meta: Mapping[str, Any], rank: int) -> bool:
        if self.path is None:
            return False
        writer = meta.get("writer") or {}
        if writer.get("hostname") == socket.gethostname() and isinstance(writer.get("pid"), int):
            try:
                os.kill(writer["pid"], 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                pass
        return time.time() - self._heartbeat(rank) > KILLED_AFTER_S

    def _heartbeat(self, rank: int) -> float:
        """When the rank's writer last flushed (epoch seconds; 0 when unknown)."""
        try:
            return (self.path / heartbeat_filename(rank)).stat().st_mtime if self.path else 0.0
        except OSError:
            return 0.0

    @cached_property
    def step_range(self) -> tuple[int, int] | None:
        steps = [df["step"] for df in (self.scalars, self.tensors, self.inputs) if len(df)]
        if not steps:
            return None
        return int(min(s.min() for s in steps)), int(max(s.max() for s in steps))

    @property
    def last_step(self) -> int | None:
        return self.step_range[1] if self.step_range else None

    @property
    def is_empty(self) -> bool:
        return self.step_range is None

    # -- what was recorded ---------------------------------------------------------------------
    @cached_property
    def available(self) -> frozenset[Requirement]:
        have = set()
        sc, tn = self.scalars, self.tensors
        if len(sc):
            names = sc.loc[sc["split"] == TRAIN, "name"]
            if (names == LOSS_NAME).any():
                have.add(LOSS)
            if (names == DATA_TIME).any():
                have.add(DATA_TIMING)
            if (sc["split"] != TRAIN).any():
                have.add(EVAL)
        if len(tn):
            kinds = set(tn["kind"].unique())
            for kind, req in ((WEIGHT, WEIGHTS), (GRAD, GRADS), (UPDATE, UPDATES),
                              (ACTIVATION, ACTIVATIONS)):
                if kind in kinds:
                    have.add(req)
        if len(self.inputs):
            have.add(INPUTS_REQ)
        if len(self.samples):
            have.add(SAMPLES_REQ)
        if self.meta.get("environment"):
            have.add(ENVIRONMENT)
        if self.meta.get("model"):
            have.add(MODEL)
        return frozenset(have)

    # -- views rules share (cached: several rules read the same ones) -----------------------------
    # A distributed run's views merge its ranks the way a single process training on the global
    # batch would see them. Scalars: the mean over the ranks that logged the step, which is the
    # global-batch loss or metric for mean-reduced values and equal per-rank batches (lr is the
    # same on every rank). Tensor stats: the lowest rank that recorded the step; weights, grads
    # and updates are identical on every rank after DDP's all-reduce, and activations are that
    # rank's own batch. The raw tables keep every rank's rows; rank-divergence compares them.
    def scalar(self, name: str, split: str = TRAIN) -> pd.Series:
        """One scalar over steps (float Series indexed by step; the last value per step wins;
        several ranks: the mean over ranks of each rank's last value)."""
        key = ("scalar", name, split)
        if key not in self._frames:
            sc = self.scalars
            if "rank" in sc and len(self.ranks) > 1:
                rows = sc[(sc["name"] == name) & (sc["split"] == split)]
                rows = rows.groupby(["step", "rank"], sort=True)["value"].last().reset_index()
                series = rows.groupby("step", sort=True)["value"].mean().astype(float)
            else:
                pos = self._scalar_rows().get((split, name), np.empty(0, dtype=np.int64))
                steps, codes = np.unique(sc["step"].to_numpy(dtype=np.int64)[pos],
                                         return_inverse=True)
                values = sc["value"].to_numpy(dtype=float, na_value=np.nan)[pos]
                series = pd.Series(_last_per_cell(codes.reshape(-1), values, len(steps)),
                                   index=pd.Index(steps, name="step"))
            series.name = name
            self._frames[key] = series
        return self._frames[key]

    def _scalar_rows(self) -> dict[tuple[str, str], np.ndarray]:
        """Row positions of each (split, name) in the scalars table."""
        if "scalar_rows" not in self._frames:
            sc = self.scalars
            self._frames["scalar_rows"] = (sc.groupby(["split", "name"], sort=False).indices
                                           if len(sc) else {})
        return self._frames["scalar_rows"]

    def loss(self, split: str = TRAIN) -> pd.Series:
        return self.scalar(LOSS_NAME, split)

    def splits(self) -> list[str]:
        """Splits recorded in scalars or inputs, train first."""
        found = set(self.scalars["split"].unique()) | set(self.inputs["split"].unique())
        return sorted(found, key=lambda s: (s != TRAIN, s))

    def stat(self, kind: str, stat: str) -> pd.DataFrame:
        """One tensor statistic as a step × name frame, columns in recording (model) order
        (several ranks: each step's lowest recording rank)."""
        key = ("stat", kind, stat)
        if key not in self._frames:
            steps, names, cells, rows = self._layout(kind)
            values = rows[stat].to_numpy(dtype=float, na_value=np.nan)
            wide = _last_per_cell(cells, values, len(steps) * len(names))
            self._frames[key] = pd.DataFrame(wide.reshape(len(steps), len(names)),
                                             index=pd.Index(steps, name="step"),
                                             columns=pd.Index(names, name="name"))
        return self._frames[key]

    def _layout(self, kind: str) -> tuple[np.ndarray, list[str], np.ndarray, pd.DataFrame]:
        """A kind's rows, its steps, its names in recording order, and each row's cell."""
        key = ("layout", kind)
        if key not in self._frames:
            tn = self.tensors
            rows = tn[(tn["kind"] == kind) & tn["name"].notna()]
            if "rank" in rows and len(self.ranks) > 1:
                lowest = rows.groupby(["step", "name"])["rank"].transform("min")
                rows = rows[rows["rank"] == lowest]
            name_codes, names = pd.factorize(rows["name"])
            steps, step_codes = np.unique(rows["step"].to_numpy(dtype=np.int64),
                                          return_inverse=True)
            self._frames[key] = (steps, [str(n) for n in names],
                                 step_codes.reshape(-1) * len(names) + name_codes, rows)
        return self._frames[key]

    def names(self, kind: str) -> list[str]:
        """Parameter or module names of a kind, in recording (model) order."""
        tn = self.tensors
        return [str(n) for n in pd.unique(tn.loc[tn["kind"] == kind, "name"].dropna())]

    def module_types(self) -> dict[str, str]:
        """Module path → type name, from the model summary."""
        return {m["path"]: m["type"] for m in (self.meta.get("model") or {}).get("modules", [])}

    def summary(self) -> dict[str, Any]:
        status = self.status
        first, last = self.step_range or (None, None)
        start, end = self.meta.get("start_time"), self.meta.get("end_time")
        return {
            "path": str(self.path) if self.path else None,
            "name": self.name,
            "status": status.get("state"),
            "status_detail": status,
            "steps": [first, last],
            "start_time": start,
            "end_time": end,
            "duration_s": (end - start) if start and end else None,
            "recorded": sorted(r.key for r in self.available),
            "problems": list(self.problems),
            **({"ranks": [{"rank": r, "status": status["ranks"].get(r),
                           "steps": self._rank_steps(r)} for r in self.ranks]}
               if len(self.ranks) > 1 else {}),
        }

    def _rank_steps(self, rank: int) -> list[int | None]:
        steps = pd.concat([df.loc[df["rank"] == rank, "step"]
                           for df in (self.scalars, self.tensors, self.inputs) if len(df)]
                          or [pd.Series([], dtype="int64")])
        return [int(steps.min()), int(steps.max())] if len(steps) else [None, None]
