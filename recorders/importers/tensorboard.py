"""Import a TensorBoard log directory: `tracelab import tensorboard LOGDIR RUN`.

Event files are read with the tensorboard package's EventAccumulator (all events kept, not its
default sample). Scalars go to the scalars table, mapped to split and name by `TagMap`.
Histograms of weights, gradients, updates or activations become tensors rows with the
statistics a histogram allows:

- exact: numel (the value count), mean, std, norm (from the sum and the sum of squares),
  min, max;
- approximate, from the bucket midpoints: abs_mean, and zero_frac when the buckets resolve
  zero (the default `tensorflow` bins of `add_histogram` do); otherwise zero_frac is unknown;
- unknown (null): nan_count and inf_count (a histogram cannot hold them), dead_frac,
  saturated_frac.

TF2-style summaries (tensors with the scalars or histograms plugin) are read too; their
histograms carry only buckets, so every statistic is approximate.

Subdirectories belong to the log: `add_scalars("loss", {"train": ..})` writes its series to
`LOGDIR/loss_train/`, read back as `loss/train`; Keras writes `train/` and `validation/`.
Hyperparameters written with `add_hparams` become the run's config. Only regular files inside
the log directory are read: an event file that is a FIFO, a device or a link out of the
directory is left out, and the run's problems name it.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np
import pandas as pd

from tracelab.core.errors import TraceError, TracelabError
from tracelab.core.files import open_inside
from tracelab.core.formats import TENSORBOARD
from tracelab.core.schema import EVENT_FILES, SCALARS, TENSORS, is_event_file
from tracelab.recorders.importers.common import (Imported, ScalarKey, TagMap, base_meta,
                                                 pick_granularity)
from tracelab.recorders.importers.tfrecord import check_records

_ZERO_EPS = 1e-9


def has_event_files(path: Path) -> bool:
    """Whether `path` itself (not its subdirectories) holds TensorBoard event files."""
    try:
        return path.is_dir() and any(is_event_file(e.name) for e in os.scandir(path)
                                     if e.is_file())
    except OSError:
        return False


def event_files(logdir: Path) -> list[Path]:
    """Every event file of a log, its subdirectories included, in a stable order."""
    found = []
    for folder, dirs, files in os.walk(logdir):
        dirs.sort()
        found.extend(Path(folder) / f for f in sorted(files) if is_event_file(f))
    return found


def _tensorboard():
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        raise TracelabError("reading TensorBoard logs needs the tensorboard package: "
                            "pip install 'tracelab[tensorboard]'") from None
    return event_accumulator


def _readable(file: Path, logdir: Path) -> bool:
    """Whether `file` is a regular file inside `logdir` (see `open_inside`): TensorBoard's
    reader would block on a FIFO, read a device until memory runs out, and follow a link
    anywhere. One that is not is left to `unreadable_parts` to name."""
    try:
        open_inside(file, logdir).close()
    except OSError:
        return False
    return True


def _loaded_names(folder: Path) -> set[str]:
    """The files TensorBoard's reader of a folder opens: any name with `tfevents` in it."""
    try:
        return {name for name in os.listdir(folder) if "tfevents" in name}
    except OSError:
        return set()


def _accumulators(logdir: Path) -> Iterator[tuple[str, Any]]:
    ea = _tensorboard()
    guidance = {ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.TENSORS: 0, ea.IMAGES: 1, ea.AUDIO: 1,
                ea.COMPRESSED_HISTOGRAMS: 1}
    by_folder: dict[Path, list[Path]] = {}
    for file in event_files(logdir):
        by_folder.setdefault(file.parent, []).append(file)
    for folder, files in sorted(by_folder.items()):
        rel = folder.relative_to(logdir).as_posix()
        rel = "" if rel == "." else rel
        readable = [f for f in files if _readable(f, logdir)]
        if {f.name for f in readable} == _loaded_names(folder):
            acc = ea.EventAccumulator(str(folder), size_guidance=guidance)
            try:
                acc.Reload()
            except OSError:  # a file it cannot open (no permission): the others, one at a time
                pass
            except Exception as exc:  # the reader's own errors: one line, naming the folder
                raise TraceError(f"{folder}: unreadable TensorBoard events "
                                 f"({type(exc).__name__}: {exc})") from None
            else:
                yield rel, acc
                continue
        for file in readable:
            acc = ea.EventAccumulator(str(file), size_guidance=guidance)
            try:
                acc.Reload()
            except OSError:
                continue  # listed by unreadable_parts
            yield rel, acc


def unreadable_parts(logdir: Path) -> list[str]:
    """What TensorBoard's reader silently left out: one line per damaged event file."""
    problems = []
    for file in event_files(logdir):
        name = file.relative_to(logdir).as_posix()
        try:
            damage = check_records(file, logdir)
        except OSError as exc:  # a symlink loop, no read permission, ...
            problems.append(f"{name}: unreadable ({(exc.strerror or str(exc)).lower()})")
            continue
        if damage is not None:
            problems.append(damage.describe(name))
    return problems


def _full_tag(prefix: str, tag: str) -> str:
    if not prefix:
        return tag
    head, _, sub = prefix.rpartition("/")
    stem = tag.replace("/", "_") + "_"
    if sub.startswith(stem) and len(sub) > len(stem):  # add_scalars' child writer
        tag = f"{tag}/{sub[len(stem):]}"
        return f"{head}/{tag}" if head else tag
    return f"{prefix}/{tag}"


def _hparams(acc) -> Optional[dict[str, Any]]:
    try:
        content = acc.PluginTagToContent("hparams")
    except KeyError:
        return None
    from tensorboard.plugins.hparams import plugin_data_pb2
    for data in content.values():
        parsed = plugin_data_pb2.HParamsPluginData.FromString(data)
        if parsed.HasField("session_start_info"):
            out = {}
            for key, value in parsed.session_start_info.hparams.items():
                kind = value.WhichOneof("kind")
                out[key] = getattr(value, kind) if kind and kind != "null_value" else None
            return out
    return None


def histogram_stats(lo: np.ndarray, hi: np.ndarray, counts: np.ndarray, *,
                    vmin: float, vmax: float, num: float,
                    total: Optional[float] = None, squares: Optional[float] = None,
                    ) -> dict[str, float]:
    """The tensors-table statistics one histogram allows (see the module docstring)."""
    nan = float("nan")
    if num <= 0:
        return {"numel": 0, "mean": nan, "std": nan, "min": nan, "max": nan, "abs_mean": nan,
                "norm": nan, "zero_frac": nan}
    mid = np.clip((lo + hi) / 2.0, vmin, vmax)
    if total is None or squares is None:  # buckets only: moments from the midpoints
        total, squares = float((counts * mid).sum()), float((counts * mid * mid).sum())
    mean = total / num
    var = (squares - total * total / num) / (num - 1) if num > 1 else nan
    if vmin > 0 or vmax < 0:
        zero = 0.0
    elif vmin == 0 and vmax == 0:
        zero = 1.0
    else:
        narrow = (lo >= -_ZERO_EPS) & (hi <= _ZERO_EPS)
        zero = float(counts[narrow].sum() / num) if narrow.any() else nan
    return {"numel": int(round(num)), "mean": mean,
            "std": math.sqrt(max(var, 0.0)) if var == var else nan,
            "min": vmin, "max": vmax, "abs_mean": float((counts * np.abs(mid)).sum() / num),
            "norm": math.sqrt(max(squares, 0.0)), "zero_frac": zero}


def _v1_histogram(h) -> dict[str, float]:
    hi = np.asarray(h.bucket_limit, dtype=float)
    counts = np.asarray(h.bucket, dtype=float)
    lo = np.concatenate([[h.min], hi[:-1]]) if len(hi) else hi
    return histogram_stats(lo, hi, counts, vmin=h.min, vmax=h.max, num=h.num,
                           total=h.sum, squares=h.sum_squares)


def _v2_histogram(array: np.ndarray) -> dict[str, float]:
    array = np.asarray(array, dtype=float).reshape(-1, 3)
    counts = array[:, 2]
    used = np.nonzero(counts)[0]
    if not len(used):
        return histogram_stats(array[:, 0], array[:, 1], counts, vmin=0.0, vmax=0.0, num=0)
    return histogram_stats(array[:, 0], array[:, 1], counts, vmin=float(array[used[0], 0]),
                           vmax=float(array[used[-1], 1]), num=float(counts.sum()))


def read_tensorboard(logdir: str | os.PathLike, tags: TagMap | None = None) -> Imported:
    """Read a TensorBoard log directory into trace tables (in memory)."""
    logdir = Path(logdir)
    if not logdir.is_dir():
        raise TraceError(f"{logdir}: no such directory; expected a TensorBoard log directory")
    if not event_files(logdir):
        raise TraceError(f"{logdir}: no TensorBoard event files ({EVENT_FILES})")
    _tensorboard()
    from tensorboard.util import tensor_util
    tags = tags or TagMap()
    scalars: dict[str, list] = {}   # full tag → [(step, value, wall_time)]
    hists: list[dict[str, Any]] = []
    config: dict[str, Any] = {}
    for prefix, acc in _accumulators(logdir):
        hparams = _hparams(acc)
        if hparams is not None:  # add_hparams' own folder: config, and metric copies we skip
            config.update(hparams)
            continue
        found = acc.Tags()
        for tag in found.get("scalars", []):
            scalars.setdefault(_full_tag(prefix, tag), []).extend(
                (e.step, e.value, e.wall_time) for e in acc.Scalars(tag))
        for tag in found.get("histograms", []):
            target = tags.histogram(_full_tag(prefix, tag))
            if target:
                for e in acc.Histograms(tag):
                    hists.append({"step": e.step, "kind": target[0], "name": target[1],
                                  **_v1_histogram(e.histogram_value)})
        for tag in found.get("tensors", []):
            plugin = acc.SummaryMetadata(tag).plugin_data.plugin_name
            full = _full_tag(prefix, tag)
            if plugin == "scalars":
                scalars.setdefault(full, []).extend(
                    (e.step, float(tensor_util.make_ndarray(e.tensor_proto)), e.wall_time)
                    for e in acc.Tensors(tag))
            elif plugin == "histograms" and tags.histogram(full):
                kind, name = tags.histogram(full)
                for e in acc.Tensors(tag):
                    hists.append({"step": e.step, "kind": kind, "name": name,
                                  **_v2_histogram(tensor_util.make_ndarray(e.tensor_proto))})
    problems = unreadable_parts(logdir)
    keys = {tag: key for tag in scalars if (key := tags.scalar(tag)) is not None}
    rows = [(step, key.split, key.name, value, wall)
            for tag, key in pick_granularity(keys, problems).items()
            for step, value, wall in scalars[tag]]
    sc = pd.DataFrame(rows, columns=["step", "split", "name", "value", "wall_time"])
    tn = pd.DataFrame(hists) if hists else pd.DataFrame(columns=["step", "kind", "name"])
    meta = base_meta(TENSORBOARD, logdir, sc["wall_time"], config=config)
    if problems:
        meta["source"]["problems"] = problems
    return Imported.from_columns(meta, {SCALARS: {c: sc[c] for c in sc},
                                        TENSORS: {c: tn[c] for c in tn}})


def import_tensorboard(logdir: str | os.PathLike, run_dir: str | os.PathLike,
                       tags: TagMap | None = None) -> Path:
    """Import a TensorBoard log as the tracelab run `run_dir` (which must not exist yet)."""
    return read_tensorboard(logdir, tags).write(Path(run_dir))


__all__ = ["read_tensorboard", "import_tensorboard", "has_event_files", "event_files", "TagMap",
           "ScalarKey", "histogram_stats"]
