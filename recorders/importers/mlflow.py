"""Import an MLflow run: `tracelab import mlflow SRC RUN`, from either of MLflow's stores.

The file store (`mlruns/`, MLflow's default until 3.13)::

    mlruns/<experiment id>/meta.yaml               the experiment (its name)
    mlruns/<experiment id>/<run id>/meta.yaml      run_name, status, start_time, end_time (ms)
    mlruns/<experiment id>/<run id>/metrics/<key>  one line per value: "timestamp value [step]"
    mlruns/<experiment id>/<run id>/params/<key>   the value as text
    mlruns/<experiment id>/<run id>/tags/<key>     the value as text (`mlflow.runName`)

Keys may hold `/` (`val/acc` is the file `metrics/val/acc`). The SQLite store (`mlflow.db`)
holds the same in the tables `runs`, `metrics`, `params`, `tags` and `experiments`, read with
the standard library's sqlite3, read-only (`mlflow_db.py`). Neither needs the mlflow package.
Only regular files inside the run's folder are read (inside the experiment's, for its name):
a FIFO, a device, or a link out of it (`params/env` to /proc/self/environ) is skipped and
listed in the run's problems, a meta.yaml refused in one line; a param or tag file is read for
64 KiB at most.

The run's name is its `mlflow.runName` tag, its config its params (numbers where they read as
numbers), its status the run's (FINISHED is completed, FAILED failed, KILLED killed; a run
still RUNNING whose client is gone is killed). Metric keys map to split and name by `TagMap`.

A damaged metric file is read up to the damage: a line that is not "timestamp value [step]",
or a last line without its newline (the write was cut short), is skipped and listed in the
run's problems, as is a metric file that cannot be read at all. A meta.yaml that is not
MLflow's is an error naming the file.
"""
from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

from tracelab.core.errors import TraceError
from tracelab.core.files import read_inside
from tracelab.core.formats import MLFLOW
from tracelab.core.schema import SCALARS
from tracelab.recorders.importers.common import (Imported, TagMap, base_meta, plain_value,
                                                 scalar_columns)
from tracelab.recorders.importers.mlflow_db import (SIDE_FILES, STORE_TABLES, is_sqlite_store,
                                                    read_store_run, reason, store_runs)

META_YAML = "meta.yaml"
RUN_PARTS = ("metrics", "params", "tags")
RUN_NAME_TAG = "mlflow.runName"
_STATES = {"FINISHED": "completed", "FAILED": "failed", "KILLED": "killed",
           "RUNNING": "running", "SCHEDULED": "running"}
# The file store writes RunStatus numbers (mlflow.entities.RunStatus).
_STATUS_NUMBERS = {"1": "RUNNING", "2": "SCHEDULED", "3": "FINISHED", "4": "FAILED",
                   "5": "KILLED"}
_LINE = re.compile(r"^([A-Za-z_][\w.-]*):(?:\s+(.*))?$")
# The most a param or tag file is read for: MLflow's own limits on their values are a few
# thousand characters (6,000 for a param, 8,000 for a tag); a meta.yaml is a few lines.
MAX_PARAM_BYTES = MAX_TAG_BYTES = 1 << 16
MAX_META_BYTES = 1 << 16


# -- the file store -------------------------------------------------------------------------
def _scalar(text: str) -> Any:
    """One value of MLflow's flat meta.yaml (written by yaml.safe_dump); ValueError for a
    double-quoted one whose escapes do not read (`"\\x"`)."""
    text = text.strip()
    if text in ("", "null", "~"):
        return None
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    if len(text) >= 2 and text[0] == text[-1] == '"':
        # Characters past Latin-1 go through as \\u escapes, so that only the text's own
        # escapes are read as such.
        try:
            return text[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError as exc:
            raise ValueError(f"a bad escape in {text[:60]!r} ({exc.reason})") from None
    return text


def read_meta_yaml(path: Path) -> dict[str, Any]:
    """MLflow's meta.yaml: flat `key: value` lines; anything else is an error naming it."""
    try:
        text = read_inside(path, path.parent, limit=MAX_META_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: unreadable ({reason(exc)})") from None
    meta: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#") or line.startswith((" ", "-")):
            continue  # blank, a comment, or an item of a list value (tags: [])
        match = _LINE.match(line)
        if match is None:
            raise TraceError(f"{path}: line {number} is not 'key: value' ({line[:60]!r}); "
                             "expected MLflow's meta.yaml")
        try:
            meta[match.group(1)] = _scalar(match.group(2) or "")
        except ValueError as exc:
            raise TraceError(f"{path}: line {number}: {exc}; expected MLflow's meta.yaml") \
                from None
    if "run_id" not in meta and "run_uuid" not in meta:
        raise TraceError(f"{path}: no run_id; expected the meta.yaml of an MLflow run")
    return meta


def is_run_dir(path: Path, names: set[str]) -> bool:
    """An MLflow file-store run directory (not an experiment's, nor a logged model's)."""
    if META_YAML not in names or not names & set(RUN_PARTS):
        return False
    try:
        head = read_inside(path / META_YAML, path, limit=MAX_META_BYTES).decode(
            "utf-8", errors="replace")
    except OSError:
        return True  # unreadable (a FIFO, a link out of the run): it is shown as such
    return re.search(r"^model_id:", head, re.M) is None


def _key_files(folder: Path, problems: list[str]) -> list[tuple[str, Path]]:
    """(key, file) of every file under `folder`; a folder that cannot be listed goes to
    `problems` (a run without params or tags has no such folder: that is no problem)."""
    def unlisted(exc: OSError) -> None:
        if not isinstance(exc, FileNotFoundError):
            rel = Path(exc.filename).relative_to(folder.parent).as_posix()
            problems.append(f"{rel}: unreadable ({reason(exc)}); skipped")

    found = []
    for here, dirs, files in os.walk(folder, onerror=unlisted):
        dirs.sort()
        for name in sorted(files):
            file = Path(here) / name
            found.append((file.relative_to(folder).as_posix(), file))
    return found


def _parse_lines(lines: list[bytes], name: str, problems: list[str]):
    """Slow path: line by line, skipping (and listing) the lines that do not parse."""
    rows, bad = [], []
    for number, line in enumerate(lines, 1):
        parts = line.split()
        try:
            if len(parts) not in (2, 3):
                raise ValueError
            rows.append((float(parts[0]), float(parts[1]),
                         int(parts[2]) if len(parts) == 3 else 0))
        except ValueError:
            bad.append(number)
    if bad:
        problems.append(f"metrics/{name}: {len(bad)} unreadable line{'s' if len(bad) > 1 else ''}"
                        f" (line {', '.join(map(str, bad[:5]))}{', ...' if len(bad) > 5 else ''})"
                        "; skipped")
    array = np.array(rows, dtype=np.float64).reshape(-1, 3)
    return array[:, 2], array[:, 1], array[:, 0]


def read_metric_text(data: bytes, name: str, problems: list[str]):
    """(steps, values, timestamps in ms) of one metric file; damage goes to `problems`."""
    cut = data.rfind(b"\n") + 1
    if cut < len(data):  # the last write was cut short: the line may be half a number
        problems.append(f"metrics/{name}: the file ends inside a line (byte {cut}); its last "
                        f"{len(data) - cut} bytes were not read")
        data = data[:cut]
    lines = data.count(b"\n")
    if not lines:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    try:  # fast path: every line "timestamp value step"
        array = np.array(data.split(), dtype=np.float64)
    except ValueError:
        array = None
    if array is not None and len(array) == 3 * lines:
        array = array.reshape(-1, 3)
        return array[:, 2], array[:, 1], array[:, 0]
    return _parse_lines([ln for ln in data.split(b"\n")[:lines]], name, problems)


def _texts(folder: Path, problems: list[str], limit: int) -> dict[str, str]:
    out = {}
    for key, file in _key_files(folder, problems):
        try:
            out[key] = read_inside(file, folder.parent, limit=limit).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{folder.name}/{key}: unreadable ({reason(exc)}); skipped")
    return out


def _experiment_name(folder: Path) -> Optional[str]:
    try:
        return read_meta_yaml_loose(folder / META_YAML).get("name")
    except OSError:
        return None


def read_meta_yaml_loose(path: Path) -> dict[str, Any]:
    """An experiment's meta.yaml, best effort (its name only decorates the run)."""
    out = {}
    text = read_inside(path, path.parent, limit=MAX_META_BYTES).decode("utf-8", "replace")
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            with contextlib.suppress(ValueError):
                out[match.group(1)] = _scalar(match.group(2) or "")
    return out


def _read_metrics(folder: Path, problems: list[str]) -> dict[str, tuple]:
    """Every metric file of a run, parsed at once where every line is whole (the usual case),
    file by file where one is damaged."""
    texts: dict[str, bytes] = {}
    for key, file in _key_files(folder, problems):
        try:
            data = read_inside(file, folder.parent)
        except OSError as exc:
            problems.append(f"metrics/{key}: unreadable ({reason(exc)}); skipped")
            continue
        texts[key] = data
    series = {}
    whole = all(not data or data.endswith(b"\n") for data in texts.values())
    lines = [data.count(b"\n") for data in texts.values()] if whole else []
    if whole and texts:
        try:  # Arrow's CSV reader: about 5x pandas' here; any odd line fails it
            parsed = pa_csv.read_csv(
                pa.BufferReader(b"".join(texts.values())),
                read_options=pa_csv.ReadOptions(column_names=["t", "v", "s"]),
                parse_options=pa_csv.ParseOptions(delimiter=" "),
                convert_options=pa_csv.ConvertOptions(
                    column_types=dict.fromkeys("tvs", pa.float64()), strings_can_be_null=False,
                    null_values=[], quoted_strings_can_be_null=False))
            stamps, values, steps = (parsed.column(c).to_numpy() for c in "tvs")
        except (pa.ArrowInvalid, ValueError):
            steps = None
        if steps is not None and len(steps) == sum(lines):
            start = 0
            for key, count in zip(texts, lines):
                end = start + count
                series[key] = (steps[start:end], values[start:end], stamps[start:end] / 1000.0)
                start = end
            return series
    for key, data in texts.items():
        steps, values, stamps = read_metric_text(data, key, problems)
        series[key] = (steps, values, stamps / 1000.0)
    return series


def read_file_store_run(run_dir: Path, tags: TagMap) -> Imported:
    meta_file = run_dir / META_YAML
    if not os.path.lexists(meta_file):  # one that is there but no file is said by reading it
        raise TraceError(f"{run_dir}: no {META_YAML}; expected an MLflow run directory "
                         "(mlruns/<experiment>/<run>/)")
    meta = read_meta_yaml(meta_file)
    problems: list[str] = []
    series = _read_metrics(run_dir / "metrics", problems)
    params = _texts(run_dir / "params", problems, MAX_PARAM_BYTES)
    run_tags = _texts(run_dir / "tags", problems, MAX_TAG_BYTES)
    status = _STATUS_NUMBERS.get(str(meta.get("status")), str(meta.get("status") or ""))
    return _imported(run_dir, tags, series, params, run_tags, problems, status=status,
                     run_id=meta.get("run_id") or meta.get("run_uuid"),
                     name=meta.get("run_name"), start=meta.get("start_time"),
                     end=meta.get("end_time"), experiment=_experiment_name(run_dir.parent))


# -- the SQLite store (mlflow_db.py) --------------------------------------------------------
def read_sqlite_run(path: Path, run_id: Optional[str], tags: TagMap) -> Imported:
    found = read_store_run(path, run_id)
    imported = _imported(path, tags, found.series, found.params, found.tags, found.problems,
                         status=found.status, run_id=found.run_id, name=found.name,
                         start=found.start, end=found.end, experiment=found.experiment)
    imported.meta["source"]["key"] = found.key
    return imported


# -- both -----------------------------------------------------------------------------------
def _seconds(ms: Any) -> Optional[float]:
    try:
        return float(ms) / 1000.0 if ms is not None else None
    except (TypeError, ValueError):
        return None


def _imported(path: Path, tags: TagMap, series, params: dict[str, Optional[str]],
              run_tags: dict[str, Optional[str]], problems: list[str], *, status: str,
              run_id: Any, name: Any, start: Any, end: Any, experiment: Any) -> Imported:
    name = run_tags.get(RUN_NAME_TAG) or name or run_id or Path(path).name
    state = _STATES.get(str(status).upper(), "completed")
    meta = base_meta(MLFLOW, path, pd.Series([], dtype=float), name=str(name).strip(),
                     config={k: None if v is None else plain_value(v)
                             for k, v in sorted(params.items())})
    meta["start_time"], meta["end_time"] = _seconds(start), _seconds(end)
    meta["status"] = {"state": state}
    if state == "failed":
        meta["status"]["exception_message"] = "the MLflow run ended with status FAILED"
    meta["source"].update(run_id=str(run_id), experiment=experiment,
                          tags={k: v for k, v in sorted(run_tags.items())})
    columns = scalar_columns(series, tags, problems)
    if problems:
        meta["source"]["problems"] = problems
    return Imported.from_columns(meta, {SCALARS: columns})


def read_mlflow(path: str | os.PathLike, tags: TagMap | None = None, *,
                run_id: Optional[str] = None) -> Imported:
    """Read an MLflow run (a file-store run directory, or a run of a SQLite store: `run_id`,
    its id or name, may be left out when the store holds one run) into trace tables."""
    path, tags = Path(path), tags or TagMap()
    if path.is_file():
        if not is_sqlite_store(path):
            raise TraceError(f"{path}: not an MLflow SQLite database (expected the tables "
                             f"{', '.join(sorted(STORE_TABLES))})")
        return read_sqlite_run(path, run_id, tags)
    if not path.is_dir():
        raise TraceError(f"{path}: no such file or directory; expected an MLflow run directory "
                         "or an mlflow.db")
    return read_file_store_run(path, tags)


def import_mlflow(path: str | os.PathLike, run_dir: str | os.PathLike,
                  tags: TagMap | None = None, *, run_id: Optional[str] = None) -> Path:
    """Import an MLflow run as the tracelab run `run_dir` (which must not exist yet)."""
    return read_mlflow(path, tags, run_id=run_id).write(Path(run_dir))


__all__ = ["read_mlflow", "import_mlflow", "is_run_dir", "is_sqlite_store", "store_runs",
           "read_meta_yaml", "SIDE_FILES"]
