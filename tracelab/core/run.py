"""Run: one recorded run as rules see it, and open_run, which opens a run directory.

`open_run(path)` validates the directory and reads every rank's metadata at once; the tables
are read on first use (reader.py). Parts that cannot be read are skipped and listed in
`Run.problems`, so a partly corrupt or killed run is analyzed as far as it can be read. The
status is decided once per Run (run_status.py), so one analysis sees one status even while the
run goes on; the views rules share are kept apart from the tables (run_views.py).
"""
from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator, Mapping

import pandas as pd
import pyarrow as pa

from tracelab.core import reader, run_status, tensor_grid
from tracelab.core.errors import TraceError
from tracelab.core.formats import NATIVE, Source
from tracelab.core.run_views import Views
from tracelab.core.schema import (ACTIVATION, AMP_SCALE, ARROW_SCHEMAS, BATCHES, CLASSES,
                                  DATA_TIME, FINGERPRINTS, GRAD, GRAD_LEFTOVER, GRAD_NORM_BACKWARD,
                                  INPUTS, LOSS_NAME, LR_PREFIX, META_ABSENT, META_OPTIMIZERS,
                                  SAMPLES, SCALARS, SCHEMA_VERSION, SIGNALS, TARGETS, TENSORS, TRAIN,
                                  NORM_MODULES, UPDATE, WEIGHT, Needs, Requirement,
                                  META_MODULE_SHAPES, OUTPUT_NUMEL, TRAIN_MODE_MODEL)
from tracelab.core.schema import ROWS

SAMPLE_CODES = ("split", "feature")  # the samples' columns `sample_table` dictionary-encodes


def open_run(path: str | os.PathLike) -> "Run":
    """Open a run directory written by tracelab. Raises TraceError with a one-line reason."""
    path = Path(path)
    ranks, problems = reader.read_rank_meta(path)
    run = Run(path, ranks[min(ranks)], rank_meta=ranks, source=Source(path, NATIVE))
    run.problems.extend(problems)
    run.problems.extend(_imported_problems(run.meta))
    return run


def _train_rows(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """An in-memory tensors frame's train rows, as rules read them, and all its rows; a row
    without a split is of the train split (schema.SPLIT_DEFAULTS)."""
    if "split" not in df or not df["split"].notna().any():
        df = df.assign(split=TRAIN)  # never the caller's frame
        return df, df
    df = df.assign(split=df["split"].fillna(TRAIN))
    return df[df["split"] == TRAIN].reset_index(drop=True), df


def _imported_problems(meta: dict) -> list[str]:
    """What an import could not read of its source log (meta.json's source.problems): the
    imported run is analyzed knowing it, as the log itself would be."""
    source = meta.get("source")
    found = source.get("problems") if isinstance(source, dict) else None
    return [p for p in found if isinstance(p, str)] if isinstance(found, list) else []



def summary_parameters(meta: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Parameter name → its entry in meta.json's model.parameters, the entries that are
    mappings with a name; {} where the model summary is missing or malformed."""
    model = meta.get("model")
    found = model.get("parameters") if isinstance(model, dict) else None
    if not isinstance(found, list):
        return {}
    return {str(p["name"]): p for p in found if isinstance(p, dict) and "name" in p}

class Run:
    """A recorded run: metadata plus four lazily loaded tables (pandas DataFrames).

    `source` says what it was read from (None for a run built in memory).
    """

    def __init__(self, path: Path | None, meta: Mapping[str, Any], *,
                 rank_meta: Mapping[int, Mapping[str, Any]] | None = None,
                 frames: Mapping[str, pd.DataFrame] | None = None,
                 source: Source | None = None):
        self.path = path
        self.meta = dict(meta)
        self.rank_meta = {r: self.meta if m is meta else dict(m)
                          for r, m in (rank_meta or {0: meta}).items()}
        self.source = source
        self.problems: list[str] = []
        self._tables = dict(frames or {})
        self._views = Views(self)
        self._rank_states: dict[int, dict[str, Any]] = {}
        self._sample_table: pa.Table | None = None
        self._tensor_parts: tuple[dict[str, Path], dict[str, int]] | None = None
        self._nonfinite: pd.DataFrame | None = None
        self._split_tensors: pd.DataFrame | None = None  # in memory: every split's rows
        if TENSORS in self._tables:
            self._tables[TENSORS], self._split_tensors = _train_rows(self._tables[TENSORS])

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
        if self.source is not None and self.source.imported and self.meta.get("name"):
            return str(self.meta["name"])  # the name its user gave it (an MLflow run's id is
            # its directory's name, a W&B run's folder a date and an id)
        return self.path.name if self.path else str(self.meta.get("name", "in-memory run"))

    # -- tables ---------------------------------------------------------------------------------
    def _table(self, table: str) -> pd.DataFrame:
        if table not in self._tables:
            df, problems = reader.read_table(self.path, table, distributed=len(self.ranks) > 1)
            self.problems.extend(p for p in problems if p not in self.problems)
            self._tables[table] = df
        return self._tables[table]

    @cached_property
    def ranks(self) -> list[int]:
        """The ranks that left metadata or data; `[0]` for a single-process run.

        With several ranks every table has a `rank` column (int32).
        """
        found = set(self.rank_meta)
        if self.path is None:
            in_data = {int(r) for t in ARROW_SCHEMAS if t in self._tables
                       and "rank" in self._tables[t] for r in self._tables[t]["rank"].dropna()}
            found = in_data or found
        else:
            found |= reader.part_ranks(self.path)
        return sorted(found)

    @property
    def scalars(self) -> pd.DataFrame:
        return self._table(SCALARS)

    @property
    def tensors(self) -> pd.DataFrame:
        return self._table(TENSORS)

    def tensors_of(self, split: str | None) -> pd.DataFrame:
        """The tensors table's rows of `split` (None: of every split) with their `split`
        column: "val", "eval", ... hold the activations of evaluation forward passes, which
        `tensors` (the train rows, all that rules read) leaves out. Read anew on each call."""
        if self._split_tensors is not None or self.path is None:
            df = self._split_tensors if self._split_tensors is not None else self.tensors
            return df if split is None else df[df["split"] == split].reset_index(drop=True)
        df, problems = reader.read_table(self.path, TENSORS, distributed=len(self.ranks) > 1,
                                         split=split)
        self.problems.extend(p for p in problems if p not in self.problems)
        return df

    @property
    def _tensors_in_pieces(self) -> bool:
        """Whether the tensors table is read a part at a time (a single-process run on disk
        not loaded whole) rather than from its DataFrame."""
        return self.path is not None and TENSORS not in self._tables and len(self.ranks) <= 1

    @cached_property
    def tensor_index(self) -> tensor_grid.TensorIndex:
        """What the tensors table holds (kinds, names, steps), from one pass over its step,
        kind and name columns; the parts and rows it saw are those every later pass reads."""
        if not self._tensors_in_pieces:
            return tensor_grid.index([tensor_grid.frame_piece(self.tensors)])
        problems: list[str] = []
        parts, rows = reader.part_files(self.path, TENSORS, problems), {}
        pieces = reader.read_parts(TENSORS, parts, dictionary=tensor_grid.CODES,
                                   columns=tensor_grid.KEYS, problems=problems)
        found = tensor_grid.index(part for name, part, rows[name] in pieces)
        self._tensor_parts = parts, rows
        self.problems.extend(p for p in problems if p not in self.problems)
        return found

    def tensor_pieces(self, stats: tuple[str, ...] = ()) -> Iterator[pa.Table]:
        """The tensors table a piece at a time (tensor_grid), with the statistic columns
        `stats`: one part file after another, or the whole DataFrame as one piece."""
        if not self._tensors_in_pieces:
            yield tensor_grid.frame_piece(self.tensors, stats)
            return
        self.tensor_index  # noqa: B018 -- fixes the parts and rows every pass reads
        parts, rows = self._tensor_parts
        for _, part, _ in reader.read_parts(TENSORS, parts, dictionary=tensor_grid.CODES,
                                            columns=(*tensor_grid.KEYS, *stats), rows=rows):
            yield part

    def nonfinite_tensors(self) -> pd.DataFrame:
        """The tensor recordings that held NaN or Inf (step, kind, name, nan_count,
        inf_count), sorted stably by step; read once."""
        if self._nonfinite is None:
            self._nonfinite = tensor_grid.nonfinite_rows(
                self.tensor_pieces(tensor_grid.NONFINITE))
        return self._nonfinite

    @property
    def inputs(self) -> pd.DataFrame:
        return self._table(INPUTS)

    @property
    def samples(self) -> pd.DataFrame:
        if SAMPLES not in self._tables and self.path is not None:
            self._tables[SAMPLES] = reader.to_frame(self.sample_table(), SAMPLES)
        return self._table(SAMPLES)

    def sample_table(self) -> pa.Table:
        """The samples as Arrow, `split` and `feature` dictionary-encoded: millions of rows
        at hundreds of features, which the data rules group by code without building a
        string per row. Read once; `samples` is made from it."""
        if self._sample_table is None:
            if SAMPLES in self._tables or self.path is None:  # built in memory
                df = self.samples
                self._sample_table = pa.Table.from_pandas(
                    df[list(ARROW_SCHEMAS[SAMPLES].names)], preserve_index=False).cast(
                    reader.dictionary_schema(SAMPLES, SAMPLE_CODES))
            else:
                self._sample_table, problems = reader.read_arrow(
                    self.path, SAMPLES, distributed=len(self.ranks) > 1, dictionary=SAMPLE_CODES)
                self.problems.extend(problems)
        return self._sample_table

    @property
    def batches(self) -> pd.DataFrame:
        """Every step's sentinel of its input and target batches (schema.BATCHES)."""
        return self._table(BATCHES)

    @property
    def targets(self) -> pd.DataFrame:
        return self._table(TARGETS)

    @property
    def classes(self) -> pd.DataFrame:
        """Class counts of integer targets per profiled batch (schema.CLASSES)."""
        return self._table(CLASSES)

    @property
    def signals(self) -> pd.DataFrame:
        """What the recorder observed of the loop: gradient resets, modes, loss scale."""
        return self._table(SIGNALS)

    @property
    def fingerprints(self) -> pd.DataFrame:
        return self._table(FINGERPRINTS)

    @property
    def rows(self) -> pd.DataFrame:
        """A few whole rows of tabular batches per split, each feature's value beside the
        row's target (schema.ROWS)."""
        return self._table(ROWS)

    def signal(self, name: str, split: str = TRAIN) -> pd.Series:
        """One signal over steps (float Series indexed by step; several ranks: the lowest
        rank's value at each step)."""
        sg = self.signals
        rows = sg[(sg["name"] == name) & (sg["split"] == split)]
        if "rank" in rows and len(rows):
            rows = rows[rows["rank"] == rows.groupby("step")["rank"].transform("min")]
        series = rows.groupby("step", sort=True)["value"].last().astype(float)
        series.name = name
        return series

    @property
    def absent(self) -> dict[str, str]:
        """What the recorder meant to record and could not, with why (meta.json's "absent":
        activations a compiled model kept from its hooks)."""
        absent = self.meta.get(META_ABSENT)
        return {str(k): str(v) for k, v in absent.items()} if isinstance(absent, dict) else {}

    def load_all(self) -> "Run":
        for table in ARROW_SCHEMAS:
            self._table(table)
        return self

    # -- status (decided once per Run: probing a live writer again could change it) -------------
    @cached_property
    def status(self) -> dict[str, Any]:
        """`{"state": "completed"|"failed"|"killed"|"running", ...}`; a dead writer means killed.

        With several ranks it is the status of the rank that most likely stopped the run, plus
        `rank` and `ranks` (every rank's state; "unknown" for a rank that left data but no
        metadata); see `run_status.run_status`.
        """
        if len(self.ranks) <= 1:
            return self.rank_status(min(self.rank_meta))
        states = {r: self.rank_status(r) if r in self.rank_meta else dict(run_status.UNKNOWN)
                  for r in self.ranks}
        return run_status.run_status(self.path, states, self.rank_meta)

    def rank_status(self, rank: int) -> dict[str, Any]:
        """One rank's status, from its own metadata and its own writer's liveness."""
        if rank not in self._rank_states:
            self._rank_states[rank] = run_status.rank_status(
                self.path, rank, self.rank_meta[rank], lambda: self._last_step_of(rank))
        return self._rank_states[rank]

    def _last_step_of(self, rank: int) -> int | None:
        return self._rank_steps(rank)[1] if len(self.ranks) > 1 else self.last_step

    @cached_property
    def step_range(self) -> tuple[int, int] | None:
        ends = [(int(df["step"].min()), int(df["step"].max()))
                for df in (self.scalars, self.inputs) if len(df)]
        if self.tensor_index.step_range is not None:
            ends.append(self.tensor_index.step_range)
        if not ends:
            return None
        return min(low for low, _ in ends), max(high for _, high in ends)

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
        sc = self.scalars
        if len(sc):
            names = sc.loc[sc["split"] == TRAIN, "name"]
            if (names == LOSS_NAME).any():
                have.add(Needs.LOSS)
            if (names == DATA_TIME).any():
                have.add(Needs.DATA_TIMING)
            if (sc["split"] != TRAIN).any():
                have.add(Needs.EVAL)
        if self.tensor_index.rows:
            kinds = self.tensor_index.kinds
            for kind, req in ((WEIGHT, Needs.WEIGHTS), (GRAD, Needs.GRADS), (UPDATE, Needs.UPDATES),
                              (ACTIVATION, Needs.ACTIVATIONS)):
                if kind in kinds:
                    have.add(req)
        if len(self.inputs):
            have.add(Needs.INPUTS)
        if len(self._tables[SAMPLES]) if SAMPLES in self._tables else (
                self.sample_table().num_rows):
            have.add(Needs.SAMPLES)
        if len(self.batches):
            have.add(Needs.BATCHES)
        if len(self.targets):
            have.add(Needs.TARGETS)
        if len(self.fingerprints):
            have.add(Needs.FINGERPRINTS)
        if len(self.rows):
            have.add(Needs.ROWS)
        if len(self.classes):
            have.add(Needs.CLASSES)
        signals = set(self.signals["name"].unique()) if len(self.signals) else set()
        # modules/batchnorm: written at evaluations only (train steps record their modes too)
        for name, req in ((GRAD_LEFTOVER, Needs.GRAD_RESETS), (NORM_MODULES, Needs.EVAL_MODES),
                          (AMP_SCALE, Needs.AMP)):
            if name in signals:
                have.add(req)
        if GRAD_NORM_BACKWARD in signals:
            have.add(Needs.GRAD_NORMS)
        if len(sc) and sc.loc[sc["split"] == TRAIN, "name"].astype(str).str.startswith(
                LR_PREFIX).any():
            have.add(Needs.LEARNING_RATE)
        if self.optimizers():
            have.add(Needs.OPTIMIZERS)
        train = set(self.signals.loc[self.signals["split"] == TRAIN, "name"].unique()) \
            if len(self.signals) else set()
        if OUTPUT_NUMEL in train:
            have.add(Needs.OUTPUTS)
        if TRAIN_MODE_MODEL in train:
            have.add(Needs.TRAIN_MODES)
        if self.meta.get(META_MODULE_SHAPES):
            have.add(Needs.MODULE_SHAPES)
        if any("config" in m for m in self.modules()):
            have.add(Needs.MODULE_CONFIG)
        if self.meta.get("environment"):
            have.add(Needs.ENVIRONMENT)
        if self.meta.get("model"):
            have.add(Needs.MODEL)
        return frozenset(have)

    # -- views rules share (run_views.py: cached, and how a distributed run's ranks merge) ------
    def scalar(self, name: str, split: str = TRAIN) -> pd.Series:
        """One scalar over steps (float Series indexed by step; the last value per step wins;
        several ranks: the mean over ranks of each rank's last value)."""
        return self._views.scalar(name, split)

    def loss(self, split: str = TRAIN) -> pd.Series:
        return self.scalar(LOSS_NAME, split)

    def splits(self) -> list[str]:
        """Splits recorded in scalars or inputs, train first."""
        return self._views.splits()

    def stat(self, kind: str, stat: str) -> pd.DataFrame:
        """One tensor statistic as a step × name frame, columns in recording (model) order
        (several ranks: each step's lowest recording rank)."""
        return self._views.stat(kind, stat)

    def numel(self, kind: str) -> pd.Series:
        """Each tensor's element count (the last recorded), by name in recording order: what
        a step × name frame of it would repeat at every step."""
        return self._views.per_name(kind, "numel")

    def names(self, kind: str) -> list[str]:
        """Parameter or module names of a kind, in recording (model) order."""
        return self._views.names(kind)

    def modules(self) -> list[dict[str, Any]]:
        """The model summary's module entries (meta.json's model.modules) that are mappings;
        [] where the summary is missing or malformed."""
        model = self.meta.get("model")
        found = model.get("modules") if isinstance(model, dict) else None
        return [m for m in found if isinstance(m, dict)] if isinstance(found, list) else []

    def optimizers(self) -> dict[str, dict[str, Any]]:
        """Optimizer name → its summary (meta.json's optimizers), the entries that are
        mappings; {} where the summaries are missing or malformed."""
        found = self.meta.get(META_OPTIMIZERS)
        if not isinstance(found, dict):
            return {}
        return {str(k): v for k, v in found.items() if isinstance(v, dict)}

    def parameters(self) -> dict[str, dict[str, Any]]:
        """Parameter name → its model-summary entry (summary_parameters)."""
        return summary_parameters(self.meta)

    def module_types(self) -> dict[str, str]:
        """Module path → type name, from the model summary."""
        return {str(m["path"]): str(m["type"]) for m in self.modules()
                if "path" in m and "type" in m}

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

    def too_large(self) -> TraceError:
        """The error saying that this run is beyond what this machine's memory holds."""
        size = reader.disk_size(self.path) if self.path is not None else 0
        held = f" ({size / 2**20:,.1f} MiB of tables on disk)" if size else ""
        return TraceError(f"{self.path or self.name}: too large to analyze in this machine's "
                          f"memory{held}; analyze it where more memory is free, or select "
                          "fewer rules (--select)")

    def _rank_steps(self, rank: int) -> list[int | None]:
        steps = pd.concat([df.loc[df["rank"] == rank, "step"]
                           for df in (self.scalars, self.tensors, self.inputs) if len(df)]
                          or [pd.Series([], dtype="int64")])
        return [int(steps.min()), int(steps.max())] if len(steps) else [None, None]
