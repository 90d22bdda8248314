"""Reading a run directory's files: every rank's metadata, and a table's part files.

The counterpart of writer.py. It reads what a killed or partly corrupt run left as far as it
can: an unreadable part or rank metadata file is skipped and reported as a problem (one line),
so the rest of the run is still analyzed. `Run` (run.py) decides when to read what.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc
import pyarrow.parquet as pq

from tracelab.core.errors import TraceError
from tracelab.core.files import open_regular
from tracelab.core.schema import (ARROWS, ARROW_SCHEMAS, META_FILE, PARQUET, SAMPLES,
                                  SCHEMA_VERSION, SPLIT_DEFAULTS, rank_of_meta, rank_of_part)


class _UnsupportedVersion(TraceError):
    pass


def require(path: Path, missing: str) -> None:
    """TraceError `PATH: <missing>` when nothing is there, or one line saying why the path
    cannot even be looked at (a name too long, a symlink loop, ...)."""
    try:
        there = path.exists()
    except OSError as exc:
        raise TraceError(f"{path}: cannot be opened ({(exc.strerror or str(exc)).lower()})") \
            from None
    if not there:
        raise TraceError(f"{path}: {missing}")


def read_rank_meta(path: Path) -> tuple[dict[int, dict[str, Any]], list[str]]:
    """Every readable rank's metadata, and the problems met on the way.

    Raises TraceError with a one-line reason when `path` is no run, or no metadata is readable.
    """
    require(path, "no such directory")
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
    return ranks, problems


def _read_meta(meta_path: Path) -> dict[str, Any]:
    try:
        with open_regular(meta_path) as source:
            meta = json.loads(source.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"{meta_path}: unreadable ({exc}); expected tracelab run metadata "
                         "as JSON") from None
    except RecursionError:
        raise TraceError(f"{meta_path}: nested too deeply to read; expected tracelab run "
                         "metadata as JSON") from None
    if not isinstance(meta, dict):
        raise TraceError(f"{meta_path}: expected a JSON object")
    version = meta.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise TraceError(f"{meta_path}: field 'schema_version' missing or not an integer")
    if version > SCHEMA_VERSION or version < 1:
        raise _UnsupportedVersion(f"{meta_path}: schema version {version} is not supported by "
                                  f"this tracelab (reads 1..{SCHEMA_VERSION}); upgrade tracelab")
    for key, (kinds, expected) in _META_FIELDS.items():
        value = meta.get(key)
        if value is not None and not _is(value, kinds):
            raise TraceError(f"{meta_path}: field '{key}' is {_kind(value)}; expected {expected}")
    for path, (kinds, expected) in _NESTED_FIELDS.items():
        for where, value in _found(meta, path.split(".")):
            if value is not None and (not _is(value, kinds)
                                      or (kinds, expected) == _STEP and value < 0):
                raise TraceError(f"{meta_path}: field '{where}' is {_kind(value)}; expected "
                                 f"{expected}")
    return meta


def _found(data: Any, keys: list[str], where: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted name, value) of each value at `keys` in `data`, "*" standing for each item of a
    list; nothing where a step of the way is missing or of another kind (checked on its own)."""
    if not keys:
        yield where, data
        return
    key, rest = keys[0], keys[1:]
    if key == "*":
        if isinstance(data, list):
            for i, item in enumerate(data):
                yield from _found(item, rest, f"{where}[{i}]")
    elif isinstance(data, dict) and key in data:
        yield from _found(data[key], rest, f"{where}.{key}" if where else key)


_OBJECT = (dict,), "a JSON object"
_TIME = (int, float), "seconds since the epoch, a number"
# What meta.json fields must be when present: a run's story is told from them.
_META_FIELDS = {"status": ((dict,), 'an object like {"state": "completed"}'),
                "start_time": _TIME, "end_time": _TIME, "config": _OBJECT,
                "environment": _OBJECT, "model": _OBJECT, "optimizer": _OBJECT,
                "recorder": _OBJECT, "writer": _OBJECT, "source": _OBJECT,
                "rank": ((int,), "a whole number"), "name": ((str,), "a string"),
                "sharded_parameters": ((list,), "a list of parameter names")}
_TEXT, _LIST, _COUNT = ((str,), "a string"), ((list,), "a list"), ((int,), "a whole number")
_NUMBER = (int, float), "a number"
_STEP = (int,), "a step, a whole number from 0"
# The same for what the reports and the rules read inside them.
_NESTED_FIELDS = {
    "status.state": ((str,), 'a string such as "completed"'), "status.last_step": _STEP,
    "status.step": _STEP, "status.ranks": _OBJECT,
    "recorder.cost": _OBJECT, "recorder.cost.steps": _COUNT,
    "recorder.cost.training_thread_s": _NUMBER, "recorder.cost.writer_cpu_s": _NUMBER,
    "optimizer.type": _TEXT, "optimizer.groups": _LIST, "optimizer.groups.*": _OBJECT,
    "model.type": _TEXT, "model.modules": _LIST, "model.modules.*": _OBJECT,
    "model.modules.*.path": _TEXT, "model.modules.*.type": _TEXT,
    "model.parameters": _LIST, "model.parameters.*": _OBJECT, "model.parameters.*.name": _TEXT,
    "model.parameters.*.shape": ((list,), "a list of whole numbers, the parameter's sizes"),
    "model.parameters.*.shape.*": _COUNT,
    "model.parameters.*.requires_grad": ((bool,), "true or false"),
    "model.parameters.*.in_optimizer": ((bool,), "true or false"),
    "environment.cuda_available": ((bool,), "true or false"), "environment.devices": _LIST,
    "environment.seed_set": ((bool,), "true or false")}


def _is(value: Any, kinds: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in kinds
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if isinstance(value, int) and float in kinds and abs(value) > _LARGEST:
        return False  # a number no float holds (10**400): it cannot be a time or a figure
    return isinstance(value, kinds)


_LARGEST = 1e300


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    names = {dict: "an object", list: "a list", bool: "a boolean", int: "a number",
             float: "a number"}
    return f"{names.get(type(value), type(value).__name__)} ({json.dumps(value, default=str)[:40]})"


def part_ranks(path: Path) -> set[int]:
    """The ranks that left part files in any table of the run directory `path`."""
    found = set()
    for table in ARROW_SCHEMAS:
        try:
            names = os.listdir(path / table)
        except OSError:  # absent, or unreadable (read_table reports it)
            continue
        found.update(r for r in map(rank_of_part, names) if r is not None)
    return found


def disk_size(path: Path) -> int:
    """Bytes the tables of the run directory `path` take on disk (what could be read)."""
    total = 0
    for table in ARROW_SCHEMAS:
        try:
            with os.scandir(path / table) as entries:
                total += sum(e.stat().st_size for e in entries if rank_of_part(e.name) is not None)
        except OSError:  # absent or unreadable: nothing of it is read either
            continue
    return total


def read_part(file: Path, dictionary: tuple[str, ...] = (),
              columns: list[str] | None = None, unless_null: tuple[str, ...] = ()) -> pa.Table:
    """A Parquet part, or every complete batch of an Arrow IPC tail (a kill may have cut the
    last one short). `dictionary`: string columns kept dictionary-encoded as Parquet stores
    them (no string object per row). `columns`: only those the part has (a Parquet part reads
    no other; a column added to the table since it was written is left out), and of those in
    `unless_null` only those a Parquet part's statistics do not show null in every row."""
    # Opened by Python, not by Arrow: a path that is not valid UTF-8 (surrogate escapes) opens.
    if file.suffix == f".{PARQUET}":
        with open_regular(file) as source:
            parquet = pq.ParquetFile(source, read_dictionary=list(dictionary) or None)
            if columns is not None:
                columns = [c for c in columns if c in parquet.schema_arrow.names
                           and not (c in unless_null and _all_null(parquet.metadata, c))]
            return parquet.read(columns=columns)
    batches = []
    with open_regular(file) as source:
        try:
            reader = pa.ipc.open_stream(source)
            while True:
                batches.append(reader.read_next_batch())
        except StopIteration:
            pass
        except (pa.ArrowInvalid, OSError):
            if not batches:
                raise
    table = pa.Table.from_batches(batches)
    if columns is None:
        return table
    return table.select([c for c in columns if c in table.column_names])


def _all_null(meta: pq.FileMetaData, column: str) -> bool:
    """Whether a Parquet file's statistics say that `column` is null in every row."""
    names = [meta.schema.column(j).name for j in range(meta.num_columns)]
    j = names.index(column)
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        stats = group.column(j).statistics
        if stats is None or not stats.has_null_count or stats.null_count != group.num_rows:
            return False
    return True


def read_table(path: Path | None, table: str, *, distributed: bool,
               split: str | None = "") -> tuple[pd.DataFrame, list[str]]:
    """One table of the run directory `path` (None: an empty one), sorted by step (and rank;
    the samples as written), and the problems met. `distributed`: the table gets a `rank`
    column (int32). `split`: see read_parts."""
    arrow, problems = read_arrow(path, table, distributed=distributed, split=split)
    return to_frame(arrow, table), problems


def read_arrow(path: Path | None, table: str, *, distributed: bool,
               dictionary: tuple[str, ...] = (),
               split: str | None = "") -> tuple[pa.Table, list[str]]:
    """One table as Arrow, in the order its parts hold it, and the problems met; the string
    columns named in `dictionary` stay dictionary-encoded (int32 codes per row). `split`: see
    read_parts."""
    problems: list[str] = []
    target = dictionary_schema(table, dictionary)
    tables, ranks = [], []
    for name, part, _ in read_parts(table, part_files(path, table, problems),
                                    dictionary=dictionary, problems=problems, split=split):
        tables.append(part)
        ranks.append(rank_of_part(name))
    if distributed:
        tables = [t.append_column("rank", pa.array([r] * t.num_rows, pa.int32()))
                  for t, r in zip(tables, ranks)]
        target = target.append(pa.field("rank", pa.int32()))
    return (pa.concat_tables(tables) if tables else target.empty_table()), problems


def part_files(path: Path | None, table: str, problems: list[str]) -> dict[str, Path]:
    """The part files of one table of the run directory `path`, by name in their order."""
    directory = path / table if path else None
    parts: dict[str, Path] = {}
    try:
        names = sorted(os.listdir(directory)) if directory and directory.is_dir() else []
    except OSError as exc:  # a folder without read permission, ...
        names = []
        problems.append(f"{table}/: unreadable ({(exc.strerror or str(exc)).lower()})")
    for name in names:
        # A roll interrupted between rename and unlink leaves both; the Parquet wins.
        if rank_of_part(name) is not None and not (
                name.endswith(f".{ARROWS}") and f"{name[:-len(ARROWS)]}{PARQUET}" in names):
            parts[name] = directory / name
    return parts


def read_parts(table: str, parts: dict[str, Path], *, dictionary: tuple[str, ...] = (),
               columns: tuple[str, ...] | None = None, rows: dict[str, int] | None = None,
               problems: list[str] | None = None,
               split: str | None = "") -> Iterator[tuple[str, pa.Table, int]]:
    """Each readable part of `parts` in turn, one in memory at a time: its name, its `columns`
    (all by default) in the table's schema without rows that name no step or split or whose
    step is out of range, and how many rows it had before those were left out. `rows`: each
    part's first so many rows only (what an earlier pass saw of a tail still growing).
    Unreadable parts are skipped and said in `problems`. `split`: in a table of
    schema.SPLIT_DEFAULTS, the rows of that split only ("": the default split; None: every
    row), a row without one being of the default split."""
    said = problems if problems is not None else []
    full = dictionary_schema(table, dictionary)
    target = full if columns is None else pa.schema([full.field(c) for c in columns])
    default = SPLIT_DEFAULTS.get(table)
    read_as = target  # with the split column, which the rows are chosen by
    if default is not None and "split" not in target.names:
        read_as = target.append(full.field("split"))
    for name, file in parts.items():
        try:
            part = read_part(file, dictionary=dictionary, columns=list(read_as.names),
                             unless_null=("split",) if default is not None else ())
            if default is not None and "split" not in part.column_names:  # none, or all null
                part = part.append_column("split", pa.nulls(part.num_rows, pa.string()))
            part = part.select(read_as.names).cast(read_as)
        except Exception as exc:  # a corrupt part must not hide the rest of the run
            if isinstance(exc, OSError) and exc.errno is not None:
                # Opening it failed (no permission, not a regular file): not the file's fault.
                # Arrow's own OSErrors (a damaged footer, a stream cut short) carry no errno.
                said.append(f"{table}/{name}: unreadable "
                            f"({(exc.strerror or str(exc)).lower()}), skipped")
                continue
            kind = "Arrow stream" if name.endswith(f".{ARROWS}") else "Parquet file"
            said.append(f"{table}/{name}: unreadable ({type(exc).__name__}), skipped; "
                        f"expected a whole {kind} of this table (it was cut short, damaged "
                        "or written by something else)")
            continue
        if rows is not None:
            part = part.slice(0, rows.get(name, 0))
        read = part.num_rows
        for key in _KEYS:  # what every row of a table names: which step, which split
            if key in target.names and part.column(key).null_count \
                    and not (key == "split" and default is not None):
                said.append(f"{table}/{name}: {part.column(key).null_count} of "
                            f"{part.num_rows} rows without a {key} skipped")
                part = part.filter(pc.is_valid(part.column(key)))
        if "step" in target.names and part.num_rows:
            part = steps_in_range(part, f"{table}/{name}", said)
        if default is not None:
            part = of_split(part, default, split, "split" in target.names)
        yield name, part, read


# Steps a recorder or an import writes: from 0, and far below where step arithmetic overflows.
MAX_STEP = 2 ** 62
_KEYS = ("step", "split")


def steps_in_range(part: pa.Table, where: str, problems: list[str]) -> pa.Table:
    """`part` without its rows whose step is negative or from MAX_STEP on (a part written by
    something else, a log being imported), said in `problems`; one min/max pass when every
    step is in range."""
    steps = part.column("step")
    low, high = pc.min_max(steps).values()
    if low.as_py() >= 0 and high.as_py() < MAX_STEP:
        return part
    keep = pc.and_(pc.greater_equal(steps, 0), pc.less(steps, MAX_STEP))
    dropped = part.num_rows - pc.sum(keep).as_py()
    problems.append(f"{where}: {dropped} of {part.num_rows} rows with a step outside "
                    f"0..2**62 skipped")
    return part.filter(keep)


def of_split(part: pa.Table, default: str, split: str | None, keep: bool) -> pa.Table:
    """`part`'s rows of `split` ("": `default`; None: all), a null split being `default`;
    its split column filled in when `keep`, else dropped."""
    column = part.column("split")
    if split is not None and not (split in ("", default) and column.null_count == len(column)):
        named = pc.equal(column, split or default)
        part = part.filter(pc.or_kleene(pc.is_null(column), named) if split in ("", default)
                           else pc.fill_null(named, False))
        column = part.column("split")
    if not keep:
        return part.drop_columns(["split"])
    if not column.null_count:
        return part
    return part.set_column(part.schema.get_field_index("split"), "split",
                           pc.fill_null(column, default))


def dictionary_schema(table: str, dictionary: tuple[str, ...]) -> pa.Schema:
    """The table's schema with the columns named in `dictionary` dictionary-encoded."""
    return pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), f.type))
                      if f.name in dictionary else f for f in ARROW_SCHEMAS[table]])


def to_frame(arrow: pa.Table, table: str) -> pd.DataFrame:
    """A table read by `read_arrow` as the DataFrame rules see: plain string columns, sorted
    by step (and rank), the samples as written."""
    schema = ARROW_SCHEMAS[table]
    if "rank" in arrow.column_names:
        schema = schema.append(pa.field("rank", pa.int32()))
    if not arrow.num_rows:
        return schema.empty_table().to_pandas()
    if arrow.schema != schema:
        arrow = arrow.cast(schema)  # dictionary-encoded strings back to strings
    df = arrow.to_pandas()
    # The samples are a uniform reservoir whose rows carry their step; sorting its millions of
    # rows (one per sampled value of every feature) would cost more than the rules using them.
    sort = [c for c in ("step", "rank") if c in df] if table != SAMPLES else []
    if sort == ["step"] and df["step"].is_monotonic_increasing:
        return df  # one writer appends in step order: sorting 1M rows again costs ~0.5 s
    return df.sort_values(sort, kind="stable", ignore_index=True) if sort else df
