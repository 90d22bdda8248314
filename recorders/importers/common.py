"""What the importers of other loggers' files share: tag mapping, and writing or opening the result.

Other loggers name their series freely (`train/loss`, `loss/train`, `Loss/train`, `train_loss`,
`val_acc_epoch`, `lr-Adam/pg1`); the trace names a scalar by split and name, and a tensor by kind
and parameter name. `TagMap` does that translation: user rules first (a regular expression that
must match the whole tag, and a target), then the defaults below.

Scalar targets are `SPLIT/NAME` (the name may use the pattern's groups, `\\1` or `\\g<name>`) or
`skip`. Histogram targets are a kind (`weight`, `grad`, `update`, `activation`), optionally
`KIND:NAME`, or `skip`.
"""
from __future__ import annotations

import errno
import math
import os
import re
import stat
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from tracelab.core.errors import ConfigError
from tracelab.core.files import building_folder
from tracelab.core.formats import Source
from tracelab.core.reader import MAX_STEP, steps_in_range
from tracelab.core.schema import (ACTIVATION, ARROW_SCHEMAS, GRAD, KINDS, LOSS_NAME, LR_PREFIX,
                                  TRAIN, UPDATE, WEIGHT)

SKIP = "skip"
_SPLITS = {"train": TRAIN, "training": TRAIN, "val": "val", "valid": "val", "validation": "val",
           "eval": "val", "evaluation": "val", "dev": "val", "test": "test", "testing": "test"}
# Bookkeeping columns and tags, not metrics.
_IGNORED = {"epoch", "step", "global_step", "created_at", "time", "timestamp", "wall_time"}
_GRANULARITY = ("step", "epoch", "batch")
_LR = re.compile(r"^(?:lr|learning[_-]rate)(?:-[A-Za-z]\w*)?(?:/pg(\d+))?$", re.I)
_KIND_MARKERS = {"grad": GRAD, "grads": GRAD, "gradient": GRAD, "gradients": GRAD,
                 "weights": WEIGHT, "params": WEIGHT, "param": WEIGHT, "parameters": WEIGHT,
                 "update": UPDATE, "updates": UPDATE,
                 "activation": ACTIVATION, "activations": ACTIVATION, "acts": ACTIVATION}
_GRAD_SUFFIX = re.compile(r"^(.+?)[._-](grad|gradient)$", re.I)


@dataclass(frozen=True)
class ScalarKey:
    split: str
    name: str
    granularity: Optional[str] = None  # "step"/"epoch" of Lightning's `_step`/`_epoch` pairs


def _parse_rules(rules: Sequence[str], what: str) -> list[tuple[re.Pattern, str]]:
    parsed = []
    for text in rules:
        pattern, sep, target = text.rpartition("=")
        if not sep or not pattern or not target:
            raise ConfigError(f"{what} rule {text!r}: expected REGEX=TARGET")
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"{what} rule {text!r}: invalid regular expression ({exc})") from None
        target = target.strip()
        try:  # the target's group references, checked now (an empty string: no match needed)
            compiled.sub(target.partition(":")[2] if ":" in target else target, "", count=0)
        except (re.error, IndexError) as exc:
            raise ConfigError(f"{what} rule {text!r}: the target refers to a group the pattern "
                              f"does not have ({exc})") from None
        parsed.append((compiled, target))
    return parsed


@dataclass
class TagMap:
    """Tag → trace series. `scalars`/`histograms`: rules `"REGEX=TARGET"`, tried in order."""
    scalars: Sequence[str] = ()
    histograms: Sequence[str] = ()
    _scalar_rules: list = field(init=False, repr=False)
    _hist_rules: list = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._scalar_rules = _parse_rules(self.scalars, "scalar tag")
        self._hist_rules = _parse_rules(self.histograms, "histogram tag")
        for pattern, target in self._scalar_rules:
            if target != SKIP and not all(target.partition("/")[::2]):
                raise ConfigError(f"scalar tag rule for {pattern.pattern!r}: target {target!r}; "
                                  "expected SPLIT/NAME or skip")
        for pattern, target in self._hist_rules:
            if target != SKIP and target.split(":", 1)[0] not in KINDS:
                raise ConfigError(f"histogram tag rule for {pattern.pattern!r}: target "
                                  f"{target!r}; expected one of {', '.join(KINDS)} (or KIND:NAME)"
                                  " or skip")

    def scalar(self, tag: str) -> Optional[ScalarKey]:
        """The split and name of a scalar tag; None to leave it out."""
        for pattern, target in self._scalar_rules:
            match = pattern.fullmatch(tag)
            if match:
                if target == SKIP:
                    return None
                split, name = match.expand(target).split("/", 1)
                return ScalarKey(split, name)
        return default_scalar(tag)

    def histogram(self, tag: str) -> Optional[tuple[str, str]]:
        """(kind, name) of a histogram tag; None to leave it out."""
        for pattern, target in self._hist_rules:
            match = pattern.fullmatch(tag)
            if match:
                if target == SKIP:
                    return None
                kind, _, name = target.partition(":")
                return kind, match.expand(name) if name else default_histogram(tag)[1]
        return default_histogram(tag)


def _lr(name: str) -> Optional[str]:
    match = _LR.match(name)
    if not match:
        return None
    group = int(match.group(1)) - 1 if match.group(1) else 0  # Lightning counts groups from 1
    return f"{LR_PREFIX}{max(group, 0)}"


def _normal_name(name: str) -> str:
    return LOSS_NAME if name.lower() in ("loss", "losses", "total_loss") else name


@lru_cache(maxsize=65536)
def default_scalar(tag: str) -> Optional[ScalarKey]:
    """`train/loss`, `loss/train`, `Loss/train`, `train_loss`, `val_acc_epoch`, `lr-Adam/pg1`...
    Bookkeeping is left out: `epoch`, `step`, and W&B's own `_step`, `_runtime`, `_timestamp`."""
    if tag.lower() in _IGNORED or tag.startswith("_"):
        return None
    lr = _lr(tag)
    if lr:
        return ScalarKey(TRAIN, lr)
    parts = [p for p in tag.split("/") if p]
    split = None
    for i, part in enumerate(parts):
        if part.lower() in _SPLITS:
            split = _SPLITS[part.lower()]
            parts = parts[:i] + parts[i + 1:]
            break
    if split is None and len(parts) == 1:
        # Underscore forms: train_loss, loss_train, val_acc_epoch, train_loss_step.
        words = parts[0].split("_")
        if len(words) > 1 and words[0].lower() in _SPLITS:
            split, parts = _SPLITS[words[0].lower()], ["_".join(words[1:])]
        elif len(words) > 1 and words[-1].lower() in _SPLITS:
            split, parts = _SPLITS[words[-1].lower()], ["_".join(words[:-1])]
        elif len(words) > 2 and words[-1] in _GRANULARITY and words[-2].lower() in _SPLITS:
            split, parts = _SPLITS[words[-2].lower()], ["_".join(words[:-2] + words[-1:])]
    if not parts:
        return ScalarKey(split or TRAIN, LOSS_NAME)  # a bare `train` tag: its loss
    name, granularity = "/".join(parts), None
    words = name.split("_")
    if len(words) > 1 and words[-1] in _GRANULARITY:
        name, granularity = "_".join(words[:-1]), words[-1]
    elif len(words) > 1 and words[0] in _GRANULARITY:  # Keras: epoch_loss, batch_accuracy
        name, granularity = "_".join(words[1:]), words[0]
    lr = _lr(name)
    if lr:
        return ScalarKey(TRAIN, lr, granularity)
    return ScalarKey(split or TRAIN, _normal_name(name), granularity)


def default_histogram(tag: str) -> tuple[str, str]:
    """`fc.weight` and `weights/fc.weight` are weights; `fc.weight.grad`, `fc.weight/grad`,
    `grads/fc.weight` gradients. An unmarked histogram is a parameter's weights, the usual
    `add_histogram(name, param)` loop."""
    parts = [p for p in tag.split("/") if p]
    kind = None
    for i, part in enumerate(parts):
        if part.lower() in _KIND_MARKERS and len(parts) > 1:
            kind = _KIND_MARKERS[part.lower()]
            parts = parts[:i] + parts[i + 1:]
            break
    name = "/".join(parts) or tag
    if kind is None:
        match = _GRAD_SUFFIX.match(name)
        if match:
            kind, name = GRAD, match.group(1)
    return kind or WEIGHT, name


def pick_granularity(keys: Mapping[str, ScalarKey], problems: list[str]) -> dict[str, ScalarKey]:
    """One tag per series. Where one series is logged per step and per epoch
    (`train_loss_step`/`_epoch`), keep the finest; the epoch means would double-count the same
    values. Where other tags still map to one series (`train/loss`, `loss/train` and
    `train_loss`), keep the one named as the series (else the first in order) and say which
    were left out: merged, they would make one series of several."""
    order = {None: 0, "step": 1, "batch": 1, "epoch": 2}
    best: dict[tuple[str, str], int] = {}
    for key in keys.values():
        slot = (key.split, key.name)
        best[slot] = min(best.get(slot, 9), order[key.granularity])
    by_slot: dict[tuple[str, str], list[str]] = {}  # the finest tags of each series, in order
    for tag, key in sorted(keys.items()):
        slot = (key.split, key.name)
        if order[key.granularity] == best[slot]:
            by_slot.setdefault(slot, []).append(tag)
    chosen = set()
    for slot, tags in by_slot.items():  # the tag named as its series first, then in order
        named = f"{slot[0]}/{slot[1]}"
        tag = named if named in tags else tags[0]
        chosen.add(tag)
        others = [t for t in tags if t != tag]
        if others:
            problems.append(f"tag{'s' if len(others) > 1 else ''} "
                            f"{', '.join(map(repr, others))} left out: "
                            f"{'they map' if len(others) > 1 else 'it maps'} to "
                            f"{named} as {tag!r} does (give "
                            f"{'them' if len(others) > 1 else 'it'} a series of "
                            f"{'their' if len(others) > 1 else 'its'} own with --map)")
    return {tag: key for tag, key in keys.items() if tag in chosen}


def whole_steps(steps: Any) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """`steps` as int64, and which of them a trace can hold (None: all): whole numbers in
    0..MAX_STEP (a float cast would wrap 1e23 to a negative step)."""
    raw = np.asarray(steps)
    if raw.dtype.kind in "iu":
        if not len(raw) or (raw.min() >= 0 and raw.max() < MAX_STEP):
            return raw.astype(np.int64, copy=False), None
        keep = (raw >= 0) & (raw < MAX_STEP)
        return np.where(keep, raw, 0).astype(np.int64), keep
    with np.errstate(invalid="ignore"):
        value = raw.astype(np.float64)
        keep = np.isfinite(value) & (value == np.round(value)) & (value >= 0) \
            & (value < MAX_STEP)
    return np.where(keep, value, 0).astype(np.int64), None if keep.all() else keep


def out_of_range(what: str, bad: np.ndarray) -> str:
    """The problem line for rows left out for their steps (`bad`: those steps)."""
    first = bad[0].item() if hasattr(bad[0], "item") else bad[0]
    return (f"{what}: {len(bad)} row{'s' if len(bad) > 1 else ''} with a step that is not a "
            f"whole number in 0..2**62 left out (the first: {first!r})")


def scalar_columns(series: Mapping[str, tuple[Any, Any, Any]], tags: TagMap,
                   problems: list[str]) -> dict[str, Any]:
    """The scalars table's columns from `tag → (steps, values, wall_times)` arrays, each tag
    mapped by `tags` (a tag that maps to nothing is left out), in step order: a stable sort of
    the tags' rows one tag after another, as a Run orders them."""
    keys = {tag: key for tag in series if (key := tags.scalar(tag)) is not None}
    picked = pick_granularity(keys, problems)
    parts, steps = [], []
    checked = _all_whole([series[tag][0] for tag in picked])
    for tag, key in picked.items():
        raw, values, walls = series[tag]
        step, keep = (np.asarray(raw).astype(np.int64, copy=False), None) if checked \
            else whole_steps(raw)
        if keep is not None:  # rows no trace holds: left out, and said
            problems.append(out_of_range(f"metric {tag!r}", np.asarray(raw)[~keep]))
            step = step[keep]
            values, walls = np.asarray(values)[keep], np.asarray(walls)[keep]
        parts.append((key, (step, values, walls)))
        steps.append(step)
    if not parts:
        return {}
    if _same_steps(steps):  # every tag at every step, once: the sort interleaves the tags
        step = np.repeat(steps[0], len(parts))
        value = np.stack([np.asarray(p[1][1], dtype=np.float64) for p in parts], axis=1)
        wall = np.stack([np.asarray(p[1][2], dtype=np.float64) for p in parts], axis=1)
        codes = np.tile(np.arange(len(parts), dtype=np.int32), len(steps[0]))
        return {"step": step, "split": _labels([k.split for k, _ in parts], codes),
                "name": _labels([k.name for k, _ in parts], codes), "value": value.ravel(),
                "wall_time": wall.ravel()}
    step = np.concatenate(steps)
    value = np.concatenate([np.asarray(p[1][1], dtype=np.float64) for p in parts])
    wall = np.concatenate([np.asarray(p[1][2], dtype=np.float64) for p in parts])
    codes = np.repeat(np.arange(len(parts), dtype=np.int32), [len(s) for s in steps])
    if len(step) > 1 and (step[1:] < step[:-1]).any():
        order = np.argsort(step, kind="stable")
        step, value, wall, codes = step[order], value[order], wall[order], codes[order]
    return {"step": step, "split": _labels([k.split for k, _ in parts], codes),
            "name": _labels([k.name for k, _ in parts], codes), "value": value,
            "wall_time": wall}


def plain_value(text: str) -> Any:
    """A setting stored as text (MLflow's params): a number or a boolean where it reads as
    one, so that `lr` sorts and splits as a number; any other text as it is."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def _column(values: Any, kind: pa.DataType) -> pa.Array:
    if isinstance(values, pa.Array):
        return values.cast(kind)
    return pa.array(values, type=kind, from_pandas=True)


def _all_whole(raws: list[Any]) -> bool:
    """Whether every tag's steps are integers a trace holds, checked at once: a check per tag
    costs more than the rest of its import where the names are many and the steps few."""
    if not raws:
        return False
    joined = np.concatenate([np.asarray(r) for r in raws])
    return joined.dtype.kind in "iuf" and whole_steps(joined)[1] is None


def _same_steps(steps: list[np.ndarray]) -> bool:
    """Whether every tag has the same steps, each once, in increasing order."""
    first = steps[0]
    if len(steps) < 2 or len(first) < 2 or not (first[1:] > first[:-1]).all() \
            or any(len(s) != len(first) for s in steps):
        return False
    return bool((np.concatenate(steps).reshape(len(steps), -1) == first).all())


def _labels(labels: list[str], codes: np.ndarray) -> pa.Array:
    """`labels[codes[i]]` per row, built in Arrow (a Python string per row costs more than
    the whole import of a metric); one label (a split, usually) repeated as it is."""
    if len(set(labels)) == 1 and len(labels[0].encode()) * len(codes) < 2**31:
        label = labels[0].encode()
        offsets = np.arange(0, len(label) * (len(codes) + 1), len(label) or 1, dtype=np.int32)
        offsets = offsets if label else np.zeros(len(codes) + 1, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), len(codes), [
            None, pa.py_buffer(offsets), pa.py_buffer(label * len(codes))])
    return pa.DictionaryArray.from_arrays(codes, pa.array(labels, pa.string())).cast(pa.string())


# -- the result of an import --------------------------------------------------------------------
@dataclass
class Imported:
    """An imported log: trace metadata and tables (Arrow, in the trace's schemas)."""
    meta: dict[str, Any]
    tables: dict[str, pa.Table]

    @classmethod
    def from_columns(cls, meta: Mapping[str, Any], columns: Mapping[str, Mapping[str, Any]],
                     ) -> "Imported":
        """The tables of `columns`; rows with a step no trace holds are left out, and the
        run's problems say so."""
        tables, problems = {}, []
        for table, schema in ARROW_SCHEMAS.items():
            cols = columns.get(table) or {}
            n = len(next(iter(cols.values()), ()))
            data = pa.table(
                [_column(cols[f.name], f.type) if f.name in cols else pa.nulls(n, f.type)
                 for f in schema], schema=schema)
            tables[table] = steps_in_range(data, table, problems) \
                if "step" in data.column_names and data.num_rows else data
        meta = dict(meta)
        if problems:
            meta["source"] = {**meta["source"], "problems": [
                *(meta["source"].get("problems") or []), *problems]}
        return cls(meta, tables)

    def as_run(self, path: Path):
        """An in-memory Run, named after the imported log; nothing is written anywhere. Its
        `source` is the log's format and file (or directory), from `meta["source"]`."""
        from tracelab.core.run import Run
        frames = {table: _frame(data) for table, data in self.tables.items()}
        source = self.meta["source"]
        run = Run(Path(path), self.meta, frames=frames,
                  source=Source(Path(source["path"]), source["format"], source.get("key")))
        run.problems.extend(self.problems)
        return run

    @property
    def problems(self) -> list[str]:
        """What the importer could not read (damaged or truncated files), one line each."""
        return list((self.meta.get("source") or {}).get("problems") or [])

    def write(self, run_dir: Path) -> Path:
        """Write as a tracelab run through RunWriter; refuses an existing run. A new directory
        is built beside its name and renamed into place whole: an import that is interrupted
        leaves nothing that a second try would take for a run."""
        from tracelab.core.errors import RunExistsError
        from tracelab.core.schema import META_FILE, TABLES
        run_dir = Path(run_dir)
        if run_dir.is_dir() and any(run_dir.iterdir()) and not any(
                (run_dir / name).is_dir() for name in TABLES) \
                and not (run_dir / META_FILE).exists():  # a run's: RunWriter says so below
            raise RunExistsError(f"{run_dir}: the folder holds other files; expected a new or "
                                 "empty folder for the imported run")
        if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())
                                 or os.name == "nt"):  # no rename onto a folder there
            return self._write(run_dir)  # RunWriter says whether it already holds a run
        if run_dir.is_symlink():  # a link to an empty folder: the run goes where it leads
            run_dir = Path(os.path.realpath(run_dir))
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        replaced = run_dir.stat() if run_dir.is_dir() else None  # an empty folder
        try:
            with building_folder(run_dir, ".importing") as building:
                self._write(building)
                built = os.lstat(building)
                os.rename(building, run_dir)  # fails, touching nothing, if a run appeared there
        except OSError as exc:
            if run_dir.is_dir() and any(run_dir.iterdir()):
                raise RunExistsError(f"{run_dir}: another run was created there meanwhile; "
                                     "choose another directory") from exc
            if exc.errno == errno.EBUSY and replaced is not None:
                return self._write(run_dir)  # a mount point: no rename lands on it
            raise
        if replaced is not None:
            _keep_access(run_dir, replaced, built)
        return run_dir

    def _write(self, run_dir: Path) -> Path:
        from tracelab.core.writer import RunWriter
        meta = {k: v for k, v in self.meta.items() if k not in ("status", "end_time")}
        if not _finite_time(meta.get("start_time")):  # a wall time of inf, a start of NaN
            meta["start_time"] = None
        writer = RunWriter(run_dir, meta, flush_interval=3600.0)
        for table, data in self.tables.items():
            if data.num_rows:
                writer.write((table, {c: data.column(c) for c in data.column_names}))
        writer.close(_ended(self.meta.get("status")))
        if _finite_time(self.meta.get("end_time")):
            writer.update_meta(end_time=self.meta["end_time"])
        return Path(run_dir)


def _keep_access(folder: Path, replaced: os.stat_result, built: os.stat_result) -> None:
    """Give `folder` (the run, renamed from the folder `built` describes) the permissions of
    the empty folder it replaced, when that one had the run's owner and group: whoever could
    open that one opens the run. Another owner's or group's permissions could shut that owner
    out, so then the run keeps those of a new folder. The mode is set through a descriptor of
    the folder itself, checked to be the one renamed: never through a link put in its place."""
    if (replaced.st_uid, replaced.st_gid) != (built.st_uid, built.st_gid):
        return
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) == (built.st_dev, built.st_ino):
            os.fchmod(fd, stat.S_IMODE(replaced.st_mode))
    except OSError:
        pass
    finally:
        os.close(fd)


def _finite_time(value: Any) -> bool:
    """Whether a start or end time can be written as one (a finite number of seconds)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _ended(status: Any) -> dict[str, Any]:
    """The imported run's end status: the source run's. One the source left running (its
    process died: nothing writes it any more) is killed; the import itself has ended."""
    status = dict(status) if isinstance(status, Mapping) else {"state": "completed"}
    if status.get("state") == "running":
        status.update(state="killed", note="the source run has no end: its process died")
    return status


def _frame(data: pa.Table) -> pd.DataFrame:
    """A table as a DataFrame in step order (a stable sort: the order of a step's rows stays),
    sorted in Arrow before the conversion, which costs less than sorting the DataFrame."""
    if not data.num_rows:
        return _empty_frame(data.schema).copy()
    if "step" in data.column_names:
        steps = data.column("step").to_numpy()
        if len(steps) > 1 and (steps[1:] < steps[:-1]).any():
            data = data.take(np.argsort(steps, kind="stable"))
    return data.to_pandas(split_blocks=True)  # a block per column: no copy to consolidate


@lru_cache(maxsize=32)
def _empty_frame(schema: pa.Schema) -> pd.DataFrame:
    return schema.empty_table().to_pandas()


def base_meta(fmt: str, path: Path, wall_times: pd.Series, *, name: Optional[str] = None,
              **extra: Any) -> dict[str, Any]:
    from tracelab._version import __version__
    from tracelab.core.schema import SCHEMA_VERSION
    walls = np.asarray(pd.to_numeric(wall_times, errors="coerce"), dtype=float)
    start = float(np.fmin.reduce(walls)) if len(walls) else math.nan  # NaN: none known
    end = float(np.fmax.reduce(walls)) if len(walls) else math.nan
    start, end = (None, None) if math.isnan(start) else (start, end)
    return {"schema_version": SCHEMA_VERSION, "tracelab_version": __version__,
            "name": name or Path(path).name, "start_time": start, "end_time": end,
            "status": {"state": "completed"},
            "source": {"format": fmt, "path": str(Path(path).resolve())}, **extra}
