"""Run: the reader of a run directory, and the views of its tables that rules share.

`open_run(path)` validates the directory and reads meta.json at once; the tables are read on
first use. Parts that cannot be read are skipped and listed in `Run.problems`, so a partly
corrupt or killed run is analyzed as far as it can be read.
"""
from __future__ import annotations

import json
import os
import re
import socket
import time
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq

from tracelab.errors import TraceError
from tracelab.schema import (ACTIVATION, ARROW_SCHEMAS, EVAL, GRAD, HEARTBEAT_FILE, INPUTS,
                             INPUTS_REQ, LOSS, LOSS_NAME, META_FILE, SAMPLES, SAMPLES_REQ,
                             SCALARS, SCHEMA_VERSION, TENSORS, TRAIN, UPDATE, WEIGHT, ACTIVATIONS,
                             ENVIRONMENT, GRADS, MODEL, UPDATES, WEIGHTS, Requirement)

_PART = re.compile(r"^r(\d+)-(.+)\.(parquet|arrows)$")
# A live writer touches its heartbeat every flush; this much silence means it is gone.
KILLED_AFTER_S = 60.0


def open_run(path: str | os.PathLike) -> "Run":
    """Open a run directory written by tracelab. Raises TraceError with a one-line reason."""
    path = Path(path)
    if not path.exists():
        raise TraceError(f"{path}: no such directory")
    if not path.is_dir():
        raise TraceError(f"{path}: not a directory; expected a tracelab run directory")
    meta_path = path / META_FILE
    if not meta_path.exists():
        raise TraceError(f"{path}: not a tracelab run (no {META_FILE})")
    meta = _read_meta(meta_path)
    ranks = {0: meta}
    for extra in sorted(path.glob("meta.rank*.json")):
        rank = int(re.sub(r"\D", "", extra.name.split(".")[1]) or 0)
        ranks[rank] = _read_meta(extra)
    return Run(path, meta, rank_meta=ranks)


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
        raise TraceError(f"{meta_path}: schema version {version} is not supported by this "
                         f"tracelab (reads 1..{SCHEMA_VERSION}); upgrade tracelab")
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
        self.rank_meta = dict(rank_meta or {0: self.meta})
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
        return cls(None, {**base, **(meta or {})}, frames=full)

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
                match = _PART.match(file.name)
                # A roll interrupted between rename and unlink leaves both; the Parquet wins.
                if match and not (file.suffix == ".arrows"
                                  and file.with_suffix(".parquet").exists()):
                    parts[file.name] = file
        tables, ranks = [], []
        for name, file in parts.items():
            try:
                tables.append(_read_part(file).select(schema.names).cast(schema))
                ranks.append(int(_PART.match(name).group(1)))
            except Exception as exc:  # a corrupt part must not hide the rest of the run
                self.problems.append(f"{table}/{name}: unreadable ({type(exc).__name__})")
        if not tables:
            return schema.empty_table().to_pandas()
        if len(set(ranks)) > 1:
            tables = [t.append_column("rank", pa.array([r] * t.num_rows, pa.int32()))
                      for t, r in zip(tables, ranks)]
        df = pa.concat_tables(tables).to_pandas()
        sort = ["step"] if "step" in df else []
        return df.sort_values(sort, kind="stable", ignore_index=True) if sort else df

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
        """`{"state": "completed"|"failed"|"killed"|"running", ...}`; a dead writer means killed."""
        status = dict(self.meta.get("status") or {"state": "running"})
        if status.get("state") == "running" and self._writer_gone():
            status["state"] = "killed"
            status["last_step"] = self.last_step
        return status

    def _writer_gone(self) -> bool:
        if self.path is None:
            return False
        writer = self.meta.get("writer") or {}
        if writer.get("hostname") == socket.gethostname() and isinstance(writer.get("pid"), int):
            try:
                os.kill(writer["pid"], 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                pass
        beats = list(self.path.glob(f"{HEARTBEAT_FILE}.r*"))
        newest = max((b.stat().st_mtime for b in beats), default=0.0)
        return time.time() - newest > KILLED_AFTER_S

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
    def scalar(self, name: str, split: str = TRAIN) -> pd.Series:
        """One scalar over steps (float Series indexed by step; the last value per step wins)."""
        key = ("scalar", name, split)
        if key not in self._frames:
            sc = self.scalars
            rows = sc[(sc["name"] == name) & (sc["split"] == split)]
            series = rows.groupby("step", sort=True)["value"].last().astype(float)
            series.name = name
            self._frames[key] = series
        return self._frames[key]

    def loss(self, split: str = TRAIN) -> pd.Series:
        return self.scalar(LOSS_NAME, split)

    def splits(self) -> list[str]:
        """Splits recorded in scalars or inputs, train first."""
        found = set(self.scalars["split"].unique()) | set(self.inputs["split"].unique())
        return sorted(found, key=lambda s: (s != TRAIN, s))

    def stat(self, kind: str, stat: str) -> pd.DataFrame:
        """One tensor statistic as a step × name frame, columns in recording (model) order."""
        key = ("stat", kind, stat)
        if key not in self._frames:
            tn = self.tensors
            rows = tn[tn["kind"] == kind]
            order = list(dict.fromkeys(rows["name"]))
            wide = rows.pivot_table(index="step", columns="name", values=stat,
                                    aggfunc="last", dropna=False)
            self._frames[key] = wide.reindex(columns=order).astype(float)
        return self._frames[key]

    def names(self, kind: str) -> list[str]:
        """Parameter or module names of a kind, in recording (model) order."""
        tn = self.tensors
        return list(dict.fromkeys(tn.loc[tn["kind"] == kind, "name"]))

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
        }
