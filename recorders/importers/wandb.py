"""Import a Weights & Biases run from its `.wandb` file: `tracelab import wandb SRC RUN`.

`wandb` writes every run, offline or not, as `wandb/offline-run-<time>-<id>/run-<id>.wandb`
(`wandb/run-<time>-<id>/` for a run that was online or synced). The file is W&B's "LevelDB
log": a 7-byte header (`:W&B`, 0xBEE1, version 0), then 32 KiB blocks of records, each framed
by a CRC-32 (of the record type and data), its length and its type (whole, or the first,
middle or last piece of a record split across blocks). Each record is a protobuf `Record`;
`records.py` checks the framing; the history rows and the summary are decoded in bulk, by
compiled kernels (`wandb_kernels.py`, numba) or numpy (`wandb_fast.py`, where numba is missing or
not yet worth starting: `pick_decoder`), and every other record, or one the bulk decoder cannot
prove it read, by the reference decoder (`wandb_exact.py`), with the protobuf package and a
descriptor of only the fields needed (`wandb_proto.py`: no wandb package, no generated code):

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
import re
import os
import sys
import warnings
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from tracelab.core.errors import TraceError
from tracelab.core.formats import WANDB
from tracelab.core.schema import SCALARS, TENSORS
from tracelab.recorders.importers.common import Imported, TagMap, base_meta, scalar_columns
from tracelab.recorders.importers import protowalk
from tracelab.recorders.importers import wandb_exact
from tracelab.recorders.importers import wandb_fast as fast
from tracelab.recorders.importers.records import read_joined, read_records
from tracelab.recorders.importers.wandb_proto import item_class, record_class

SUFFIX = ".wandb"


def is_wandb_file(name: str) -> bool:
    return name.startswith("run-") and name.endswith(SUFFIX)


def _run_files(path: Path) -> tuple[list[Path], list[Path]]:
    """The run files a W&B run is read from, and the copies left out. `path` is the file
    itself, or a folder: W&B writes one run-*.wandb per folder (a resumed run gets a new one);
    where a folder holds more files, a copy beside it perhaps, the run's is the one named after
    the folder's run id (`offline-run-<time>-<id>/run-<id>.wandb`) and the others are copies.
    Two or more files and none named so: all of them, which `read_wandb` refuses (reading both
    would count every step twice). Entries that are not files (a folder, a dangling link)
    stay, to be listed as unreadable."""
    if path.is_file():
        return [path], []
    try:
        files = sorted(path / e.name for e in os.scandir(path) if is_wandb_file(e.name))
    except OSError:
        return [], []
    regular = [f for f in files if f.is_file()]
    own = [f for f in regular if path.name.endswith("-" + f.name[len("run-"):-len(SUFFIX)])]
    if len(regular) < 2 or len(own) != 1:
        return files, []
    return [f for f in files if f not in regular or f in own], [f for f in regular if f not in own]


def wandb_files(path: Path) -> list[Path]:
    """The files `read_wandb` reads for the run at `path` (see `_run_files`)."""
    return _run_files(path)[0]


def read_wandb(path: str | os.PathLike, tags: TagMap | None = None, *,
               bulk: bool = True, compiled: Optional[bool] = None) -> Imported:
    """Read a W&B run (its folder or its `.wandb` file) into trace tables (in memory).
    `bulk=False` decodes every record with protobuf, one message object per item: the
    reference that the bulk decoders are tested against, 5 to 12x slower. `compiled`: the
    bulk decoder, compiled (`wandb_kernels`, where numba is) or numpy (`wandb_fast`); None
    lets `pick_decoder` choose."""
    path, tags = Path(path), tags or TagMap()
    files, copies = _run_files(path)
    if not files:
        raise TraceError(f"{path}: no run-*.wandb file; expected a W&B run folder "
                         "(wandb/offline-run-*/ or wandb/run-*/)")
    regular = [f for f in files if f.is_file()]
    if len(regular) > 1:  # reading both would count every step twice
        raise TraceError(f"{path}: {len(regular)} run-*.wandb files "
                         f"({', '.join(f.name for f in regular)}), none named after the "
                         "folder's run id; expected one: import one file instead of the folder")
    reading = wandb_exact.Reading(tags, record_class())
    reading.problems += [f"{copy.name}: not this folder's run file ({regular[0].name}), "
                         "left out" for copy in copies]
    kernels = None
    if bulk and compiled is None:
        kernels = pick_decoder(sum(_size(file) for file in files))
    elif bulk and compiled:
        kernels = compiled_decoder()
    for file in files:
        try:
            if kernels is not None:
                data, starts, ends, damage = kernels.joined(file, fast.PAD)
            elif bulk:
                data, starts, ends, damage = read_joined(file, fast.PAD)
            else:
                records, damage = read_records(file)
        except OSError as exc:  # a folder of that name, a dangling link, no permission
            reading.problems.append(f"{file.name}: unreadable "
                                    f"({(exc.strerror or str(exc)).lower()}), skipped")
            continue
        if damage is not None:
            reading.problems.append(damage.describe(file.name))
        if bulk:
            _read_file(data, starts, ends, reading, file.name, kernels)
        else:
            for record in records:
                wandb_exact.exact_record(record, reading, file.name)
    series = {key: tuple(np.concatenate([np.asarray(c[i], dtype=kind) for c in chunks])
                         if len(chunks) > 1 else np.asarray(chunks[0][i], dtype=kind)
                         for i, kind in enumerate((np.int64, np.float64, np.float64)))
              for key, chunks in reading.series.items()}
    config = {k: wandb_exact.json_value(item) for k, item in reading.config.items()}
    summary = {k: wandb_exact.json_value(item) for k, item in reading.summary.items()}
    return _imported(path, tags, series, reading.hists, config, summary, reading.info,
                     reading.exit_code, reading.runtime, reading.problems)


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
    which takes about 50 ms more on a run of 7 MB, but starts at once."""
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


def _read_file(data, starts: np.ndarray, ends: np.ndarray, reading: wandb_exact.Reading, name: str,
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
        wandb_exact.exact_record(bytes(data[starts[r]:ends[r]]), reading, name)
    _segment(rows, fast_rows[done:], steps, reading)


def _segment(rows: fast.History, segment: np.ndarray, steps: np.ndarray,
             reading: wandb_exact.Reading) -> None:
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
           reading: wandb_exact.Reading) -> None:
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
            wandb_exact.add_histogram(key, data, int(steps[r]), reading.hists, reading.tags)


def _imported(path: Path, tags: TagMap, series, hists, config, summary, info, exit_code,
              runtime, problems) -> Imported:
    columns = scalar_columns(series, tags, problems)
    walls = np.asarray(columns.get("wall_time", []), dtype=float)
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
    tn = pd.DataFrame(hists) if hists else {}
    return Imported.from_columns(meta, {SCALARS: columns, TENSORS: {c: tn[c] for c in tn}})


def import_wandb(path: str | os.PathLike, run_dir: str | os.PathLike,
                 tags: TagMap | None = None) -> Path:
    """Import a W&B run as the tracelab run `run_dir` (which must not exist yet)."""
    return read_wandb(path, tags).write(Path(run_dir))


__all__ = ["read_wandb", "import_wandb", "is_wandb_file", "wandb_files"]
