"""Import a Weights & Biases run from its `.wandb` file: `tracelab import wandb SRC RUN`.

`wandb` writes every run, offline or not, as `wandb/offline-run-<time>-<id>/run-<id>.wandb`
(`wandb/run-<time>-<id>/` for a run that was online or synced). The file is W&B's "LevelDB
log": a 7-byte header (`:W&B`, 0xBEE1, version 0), then 32 KiB blocks of records, each framed
by a CRC-32 (of the record type and data), its length and its type (whole, or the first,
middle or last piece of a record split across blocks). Each record is a protobuf `Record`;
`records.py` checks the framing; the history rows and the summary are decoded in bulk
(`wandb_fast.py`), and every other record, or one the bulk decoder cannot prove it read, with
the protobuf package and a descriptor of only the fields needed (`wandb_proto.py`: no wandb
package, no generated code):

    history (2)  one row of `run.log`: items `{nested_key, value_json}`, `_step`, `_timestamp`
    summary (3)  summary updates;   config (5) config updates
    run (17)     run id, project, display name, config, start time
    exit (18)    exit code and runtime

History items map to split and name by `TagMap` (`_step`, `_runtime` and `_timestamp` are
bookkeeping); histograms logged by `wandb.watch` (`gradients/…`, `parameters/…`) become tensor
statistics as TensorBoard's do. The run is completed when it exited with code 0, failed with
another code, and killed when the file has no exit record (its process died). A damaged or
truncated file is read up to its last whole record, and the run's problems say what was not.
"""
from __future__ import annotations

import json
import math
import re
import os
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from tracelab.core.errors import TraceError
from tracelab.core.formats import WANDB
from tracelab.core.schema import SCALARS, TENSORS
from tracelab.recorders.importers.common import Imported, TagMap, base_meta, scalar_columns
from tracelab.recorders.importers import protowalk
from tracelab.recorders.importers import wandb_fast as fast
from tracelab.recorders.importers.records import read_joined, read_records
from tracelab.recorders.importers.wandb_proto import item_class, record_class
from tracelab.recorders.importers.tensorboard import histogram_stats

SUFFIX = ".wandb"
_BOOKKEEPING = ("_step", "_timestamp", "_runtime")


def is_wandb_file(name: str) -> bool:
    return name.startswith("run-") and name.endswith(SUFFIX)


def _key(item) -> str:
    key = item.key
    if key:
        return key
    nested = item.nested_key
    return nested[0] if len(nested) == 1 else ".".join(nested)


def _json(item) -> Any:
    kind = item.WhichOneof("value")
    if kind is not None:
        return getattr(item, kind)
    try:
        return json.loads(item.value_json)
    except ValueError:
        return item.value_json


def _number(item) -> Optional[float]:
    """A history value as a number; None for media, text and the like."""
    text = item.value_json
    if text:
        try:
            return float(text)  # "0.25", "NaN", "Infinity": the usual case, and fast
        except ValueError:
            return None
    kind = item.WhichOneof("value")
    return float(getattr(item, kind)) if kind in ("integer", "number") else None


def _histogram(data: Any) -> Optional[dict[str, float]]:
    """Statistics of a `wandb.Histogram` (`{"_type": "histogram", "bins": [...], "values":
    [...]}`, bins are the edges): everything approximate, from the bucket midpoints."""
    if not isinstance(data, dict) or data.get("_type") != "histogram":
        return None
    try:
        edges = np.asarray(data["bins"], dtype=float)
        counts = np.asarray(data["values"], dtype=float)
    except (ValueError, KeyError, TypeError):
        return None
    if edges.ndim != 1 or len(edges) != len(counts) + 1 or not len(counts):
        return None
    used = np.flatnonzero(counts)
    if not len(used):
        return None
    return histogram_stats(edges[:-1], edges[1:], counts, vmin=float(edges[used[0]]),
                           vmax=float(edges[used[-1] + 1]), num=float(counts.sum()))


def _apply(target: dict[str, Any], update) -> None:
    """Apply config or summary updates; values stay items, decoded once at the end (W&B
    writes a summary update after every logged row)."""
    for item in update.update:
        key = item.key or _key(item)
        if key[:1] != "_":
            target[key] = item
    for item in update.remove:
        target.pop(_key(item), None)


def wandb_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    try:
        return sorted(path / e.name for e in os.scandir(path) if is_wandb_file(e.name))
    except OSError:
        return []


def read_wandb(path: str | os.PathLike, tags: TagMap | None = None, *,
               bulk: bool = True, compiled: Optional[bool] = None) -> Imported:
    """Read a W&B run (its folder or its `.wandb` file) into trace tables (in memory).
    `bulk=False` decodes every record with protobuf, one message object per item: the
    reference that the bulk decoders are tested against, 10 to 30x slower. `compiled`: the
    bulk decoder, compiled (`wandb_kernels`, where numba is) or numpy (`wandb_fast`); None
    lets `pick_decoder` choose."""
    path, tags = Path(path), tags or TagMap()
    files = wandb_files(path)
    if not files:
        raise TraceError(f"{path}: no run-*.wandb file; expected a W&B run folder "
                         "(wandb/offline-run-*/ or wandb/run-*/)")
    reading = _Reading(tags, record_class())
    kernels = None
    if bulk and compiled is None:
        kernels = pick_decoder(sum(_size(file) for file in files))
    elif bulk and compiled:
        kernels = compiled_decoder()
    for file in files:
        if kernels is not None:
            data, starts, ends, damage = kernels.joined(file, fast.PAD)
        elif bulk:
            data, starts, ends, damage = read_joined(file, fast.PAD)
        else:
            records, damage = read_records(file)
        if damage is not None:
            reading.problems.append(damage.describe(file.name))
        if bulk:
            _read_file(data, starts, ends, reading, file.name, kernels)
        else:
            for record in records:
                _exact_record(record, reading, file.name)
    series = {key: tuple(np.concatenate([np.asarray(c[i], dtype=kind) for c in chunks])
                         if len(chunks) > 1 else np.asarray(chunks[0][i], dtype=kind)
                         for i, kind in enumerate((np.int64, np.float64, np.float64)))
              for key, chunks in reading.series.items()}
    config = {k: _json(item) for k, item in reading.config.items()}
    summary = {k: _json(item) for k, item in reading.summary.items()}
    return _imported(path, tags, series, reading.hists, config, summary, reading.info,
                     reading.exit_code, reading.runtime, reading.problems)


@dataclass
class _Reading:
    """What a run's records add up to, read in order (series: key -> chunks of (steps,
    values, wall times))."""
    tags: TagMap
    record_class: Any
    series: dict = field(default_factory=dict)
    hists: list = field(default_factory=list)
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    exit_code: Optional[int] = None
    runtime: Any = None
    problems: list = field(default_factory=list)
    row: int = 0
    filling: dict = field(default_factory=dict)  # key -> the chunk of lists being filled


def compiled_decoder():
    """The compiled decoder (`wandb_kernels`), loaded once per process, or None where numba
    is missing or fails: the numpy one (`wandb_fast`) then reads the same."""
    if not _COMPILED:
        try:
            from tracelab.recorders.importers import wandb_kernels as module
            module.warm_up()
        except ImportError:
            module = None
        except Exception as exc:  # a broken numba install: the numpy decoder reads the same
            warnings.warn(f"tracelab: the compiled W&B decoder is unavailable "
                          f"({type(exc).__name__}: {exc}); decoding with numpy", RuntimeWarning,
                          stacklevel=2)
            module = None
        _COMPILED.append(module)
    return _COMPILED[0]


def pick_decoder(size: int):
    """The bulk decoder for `size` more bytes of `.wandb` files: the compiled one where it is
    loaded already, or numba is (the recorder's kernels use it), or once the numpy decoder has
    spent in this process about what starting numba costs (a second: importing it, and its
    first call, even from its disk cache), that is, read NUMPY_BYTES; else None: numpy's,
    which decodes a run of 7 MB in 60 ms more, but starts at once."""
    if not _COMPILED and "numba" not in sys.modules and _NUMPY_READ[0] + size < NUMPY_BYTES:
        _NUMPY_READ[0] += size
        return None
    return compiled_decoder()


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except OSError:
        return 0


_COMPILED: list = []  # [wandb_kernels or None], once loaded
NUMPY_BYTES = 128 << 20  # what the numpy decoder reads in a process before numba is started
_NUMPY_READ = [0]  # what it has read so far


def _read_file(data, starts: np.ndarray, ends: np.ndarray, reading: _Reading, name: str,
               kernels=None) -> None:
    """The records `data[starts[i]:ends[i]]` of one file (`data`: bytes, or uint8 from
    `kernels.joined`, ending in `fast.PAD` zero bytes): history rows and the summary decoded
    in bulk (`wandb_kernels` where given, else `wandb_fast`), the rest (and whatever that
    cannot prove it read) record by record, in file order."""
    if kernels is not None:
        kinds, rows, summary = kernels.decode(data, starts, ends, item_class())
    else:
        kinds, rows, summary = _decode(data, starts, ends)
    hist_at = np.flatnonzero(kinds == fast.HISTORY)
    summary_at = np.flatnonzero(kinds == fast.SUMMARY)
    exact = np.isin(kinds, (fast.EXACT, fast.CONFIG, fast.RUN, fast.EXIT))
    exact[hist_at[rows.exact]] = True
    if summary is None:
        exact[summary_at] = True
    else:
        reading.summary.update(summary)
    fast_rows = np.flatnonzero(~rows.exact)
    exact_at = np.flatnonzero(exact)
    cuts = np.searchsorted(hist_at[fast_rows], exact_at)  # the exact records among the rows
    steps = np.zeros(len(hist_at), dtype=np.int64)
    done = 0
    for r, cut in zip(exact_at.tolist(), cuts.tolist()):
        _segment(rows, fast_rows[done:cut], steps, reading)
        done = cut
        _exact_record(bytes(data[starts[r]:ends[r]]), reading, name)
    _segment(rows, fast_rows[done:], steps, reading)


def _segment(rows: fast.History, segment: np.ndarray, steps: np.ndarray,
             reading: _Reading) -> None:
    """The bulk-decoded history rows `segment` (consecutive ones, between two records decoded
    exactly): their steps into `steps`, their values into `reading`."""
    if not len(segment):
        return
    logged, has = rows.logged_step[segment], rows.has_step_field[segment]
    known = logged | has
    step = np.where(logged, rows.step[segment], rows.step_field[segment])
    if abs(reading.row) < _SAFE and (np.abs(step[known]) < _SAFE).all():
        # row k's step: its own where known, else the row counter, which is max(counter,
        # step) + 1 after each row: with v = counter - k, v only grows, to step - k
        k = np.arange(len(segment))
        top = np.maximum.accumulate(np.where(known, step - k, np.iinfo(np.int64).min))
        counter = np.maximum(reading.row, np.concatenate([[reading.row], top[:-1]])) + k
        steps[segment] = np.where(known, step, counter)
        reading.row = int(max(reading.row, top[-1])) + len(segment)
    else:  # steps near the ends of int64: Python's integers, as the exact decoder counts
        for j, at, is_known in zip(segment.tolist(), step.tolist(), known.tolist()):
            steps[j] = at = at if is_known else reading.row
            reading.row = max(reading.row, at) + 1
    _flush(rows, int(segment[0]), int(segment[-1]), steps, reading)


_SAFE = 2**62  # steps below this in size: the counter's arithmetic fits int64


def _decode(data: bytes, starts: np.ndarray, ends: np.ndarray):
    """(record kinds, history rows, summary or None), decoded by `wandb_fast`."""
    buf = np.frombuffer(data, dtype=np.uint8)
    kinds, kstart, kend = fast.record_kinds(protowalk.fields(buf, starts, ends), len(starts))
    both = np.flatnonzero((kinds == fast.HISTORY) | (kinds == fast.SUMMARY))
    rows, summary = fast.decode(buf, data, kstart[both], kend[both],
                                kinds[both] == fast.SUMMARY, item_class(),
                                summary=not (kinds == fast.EXACT).any())
    return kinds, rows, summary


def _flush(rows: fast.History, first: int, last: int, steps: np.ndarray,
           reading: _Reading) -> None:
    """Add the values of the bulk-decoded history rows `first..last` (consecutive ones)."""
    lo, hi = np.searchsorted(rows.rec, [first, last + 1])
    key = rows.key[lo:hi]
    n_keys = len(rows.keys)
    order = np.argsort(key.astype(np.int16) if n_keys < 2**15 else key, kind="stable")
    bounds = np.zeros(n_keys + 1, dtype=np.int64)
    np.cumsum(np.bincount(key, minlength=n_keys), out=bounds[1:])
    rec = rows.rec[lo:hi][order]
    at = steps[rec]
    values, walls = rows.value[lo:hi][order], rows.wall[rec]
    present = np.flatnonzero(bounds[1:] > bounds[:-1])
    # each key's values in a stable sort by key: its first is where it first appears
    for c in present[np.argsort(order[bounds[present]])].tolist():
        a, b = bounds[c], bounds[c + 1]
        reading.filling.pop(rows.keys[c], None)  # what follows goes into a chunk after these
        reading.series.setdefault(rows.keys[c], []).append((at[a:b], values[a:b], walls[a:b]))
    for r, key, text in rows.others:
        if first <= r <= last:
            try:
                data = json.loads(text)
            except ValueError:
                data = text
            _add_histogram(key, data, int(steps[r]), reading.hists, reading.tags)


def _exact_record(data: bytes, reading: _Reading, name: str) -> None:
    """One record, decoded by protobuf."""
    try:
        record = reading.record_class.FromString(data)
    except Exception:  # a record whose checksum holds but that is no Record
        reading.problems.append(f"{name}: a record that is not W&B's (skipped)")
        return
    if record.HasField("history"):
        reading.row = _history(record.history, reading.row, reading.filling, reading.hists,
                               reading.tags, reading.series)
    elif record.HasField("config"):
        _apply(reading.config, record.config)
    elif record.HasField("summary"):
        _apply(reading.summary, record.summary)
    elif record.HasField("run"):
        run = record.run
        _apply(reading.config, run.config)
        reading.info.update(run_id=run.run_id, project=run.project, entity=run.entity,
                            name=run.display_name, tags=list(run.tags), notes=run.notes)
        if run.HasField("start_time"):
            reading.info["start"] = run.start_time.seconds + run.start_time.nanos / 1e9
    elif record.HasField("exit"):
        reading.exit_code, reading.runtime = record.exit.exit_code, record.exit.runtime


def _history(history, row: int, series, hists: list, tags: TagMap, chunks: dict) -> int:
    """One history row into `series` (key -> lists of steps, values, wall times: the chunk
    being filled, also added to `chunks` when it is started)."""
    step, wall = None, math.nan
    values = []
    groups: dict[str, dict[str, Any]] = {}  # a logged dict, as wandb-core writes it: one item
    for item in history.item:                # per leaf, its nested_key the path to it
        key = item.key
        if not key:
            nested = item.nested_key
            if len(nested) > 1:
                groups.setdefault(".".join(nested[:-1]), {})[nested[-1]] = item
                continue
            key = nested[0] if nested else ""
        if key == "_step":  # a number that cannot be a step (NaN, 1e300) counts as none: 0
            number = _number(item)
            step = int(number) if number is not None and abs(number) < 2.0**62 else 0
        elif key == "_timestamp":
            wall = _number(item)
        elif key not in _BOOKKEEPING:
            values.append((key, item))
    if step is None:
        step = history.step.num if history.HasField("step") else row
    for parent, leaves in groups.items():
        if "_type" in leaves:  # media: a histogram (or an image, a table: left out)
            _add_histogram(parent, {k: _json(v) for k, v in leaves.items()}, step, hists, tags)
        else:
            values.extend((f"{parent}.{leaf}", item) for leaf, item in leaves.items())
    for key, item in values:
        text = item.value_json
        try:
            number = float(text)  # "0.25", "NaN", "Infinity": the usual case, and fast
        except ValueError:
            number = None if text else _number(item)
        if number is not None:
            got = series.get(key)
            if got is None:
                got = series[key] = ([], [], [])
                chunks.setdefault(key, []).append(got)
            got[0].append(step)
            got[1].append(number)
            got[2].append(wall)
        elif text.startswith("{"):  # a whole dict in one item, as older clients write it
            _add_histogram(key, _json(item), step, hists, tags)
    return max(row, step) + 1


def _add_histogram(key: str, data: Any, step: int, hists: list, tags: TagMap) -> None:
    stats = _histogram(data)
    target = tags.histogram(key) if stats is not None else None
    if target:
        hists.append({"step": step, "kind": target[0], "name": target[1], **stats})


def _imported(path: Path, tags: TagMap, series, hists, config, summary, info, exit_code,
              runtime, problems) -> Imported:
    columns = scalar_columns(series, tags)
    walls = pd.Series(columns.get("wall_time", []), dtype=float)
    name = info.get("name") or info.get("run_id") or path.stem
    meta = base_meta(WANDB, path, walls, name=name, config=config)
    if info.get("start") is not None:
        meta["start_time"] = info["start"]
        if runtime:
            meta["end_time"] = info["start"] + runtime
    if exit_code is None:
        meta["status"] = {"state": "running"}  # no exit record: killed, as its writer is gone
    elif exit_code != 0:
        meta["status"] = {"state": "failed", "exception_type": "exit code",
                          "exception_message": f"the W&B run exited with code {exit_code}"}
    meta["source"].update(run_id=info.get("run_id"), project=info.get("project"),
                          entity=info.get("entity"), tags=info.get("tags") or [],
                          exit_code=exit_code,
                          summary={k: v for k, v in summary.items()  # media stays out
                                   if v is None or isinstance(v, (bool, int, float, str))})
    if problems:
        meta["source"]["problems"] = problems
    # wandb-core writes a step's histograms in no fixed order: sort them, so that one file
    # always reads as the same run (names in natural order: layer 2 before layer 10).
    hists.sort(key=lambda h: (h["step"], h["kind"], [int(p) if p.isdigit() else p
                                                     for p in re.split(r"(\d+)", h["name"])]))
    tn = pd.DataFrame(hists) if hists else pd.DataFrame(columns=["step", "kind", "name"])
    return Imported.from_columns(meta, {SCALARS: columns, TENSORS: {c: tn[c] for c in tn}})


def import_wandb(path: str | os.PathLike, run_dir: str | os.PathLike,
                 tags: TagMap | None = None) -> Path:
    """Import a W&B run as the tracelab run `run_dir` (which must not exist yet)."""
    return read_wandb(path, tags).write(Path(run_dir))


__all__ = ["read_wandb", "import_wandb", "is_wandb_file", "wandb_files"]
