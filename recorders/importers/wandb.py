"""Import a Weights & Biases run from its `.wandb` file: `tracelab import wandb SRC RUN`.

`wandb` writes every run, offline or not, as `wandb/offline-run-<time>-<id>/run-<id>.wandb`
(`wandb/run-<time>-<id>/` for a run that was online or synced). The file is W&B's "LevelDB
log": a 7-byte header (`:W&B`, 0xBEE1, version 0), then 32 KiB blocks of records, each framed
by a CRC-32 (of the record type and data), its length and its type (whole, or the first,
middle or last piece of a record split across blocks). Each record is a protobuf `Record`:
`wandb_log.py` checks the framing, and `wandb_records.py` decodes the records one message at a
time, with the protobuf package and a descriptor of only the fields needed (`wandb_proto.py`:
no wandb package, no generated code):

    history (2)  one row of `run.log`: items `{nested_key, value_json}`, `_step`, `_timestamp`
    summary (3)  summary updates;   config (5) config updates
    run (17)     run id, project, display name, config, start time
    exit (18)    exit code and runtime

History items map to split and name by `TagMap` (`_step`, `_runtime` and `_timestamp` are
bookkeeping); histograms logged by `wandb.watch` (`gradients/…`, `parameters/…`) become tensor
statistics as TensorBoard's do. The run is completed when it exited with code 0, failed with
another code, and killed when the file has no exit record (its process died). A damaged or
truncated file is read up to its last whole record, and the run's problems say what was not;
so do values that cannot be read (`wandb_records`), which are left out.
"""
from __future__ import annotations

import re
import os
from pathlib import Path

import numpy as np
import pandas as pd

from tracelab.core.errors import TraceError
from tracelab.core.files import read_inside
from tracelab.core.formats import WANDB
from tracelab.core.schema import SCALARS, TENSORS
from tracelab.recorders.importers.common import Imported, TagMap, base_meta, scalar_columns
from tracelab.recorders.importers.wandb_log import read_records
from tracelab.recorders.importers.wandb_proto import record_class
from tracelab.recorders.importers.wandb_records import Reading, read_record

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


def read_wandb(path: str | os.PathLike, tags: TagMap | None = None) -> Imported:
    """Read a W&B run (its folder or its `.wandb` file) into trace tables (in memory)."""
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
    reading = Reading(tags, record_class())
    reading.problems += [f"{copy.name}: not this folder's run file ({regular[0].name}), "
                         "left out" for copy in copies]
    for file in files:
        reading.file = file.name
        try:
            data = read_inside(file, file.parent)  # not a FIFO, a device, a link elsewhere
        except OSError as exc:  # a folder of that name, a dangling link, no permission
            reading.problems.append(f"{file.name}: unreadable "
                                    f"({(exc.strerror or str(exc)).lower()}), skipped")
            continue
        records, damage = read_records(data)
        del data
        if damage is not None:
            reading.problems.append(damage.describe(file.name))
        for record in records:
            read_record(record, reading)
    series = {key: (np.asarray(steps), np.asarray(values, dtype=np.float64),
                    np.asarray(walls, dtype=np.float64))
              for key, (steps, values, walls) in reading.series.items()}
    config = reading.values(reading.config, "config")
    summary = reading.values(reading.summary, "summary")
    reading.problems += reading.left_out_problems()
    return _imported(path, tags, series, reading.hists, config, summary, reading.info,
                     reading.exit_code, reading.runtime, reading.problems)


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
