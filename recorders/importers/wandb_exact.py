"""The reference decoder of `.wandb` records: one protobuf message per record, every field read
as protobuf reads it. It decodes every record of `read_wandb(..., bulk=False)`, and, with the
bulk decoders, whatever they cannot prove they read as it would (the run, config and exit
records; logged dicts, `number` values, damaged records), in its place in the file.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from tracelab.recorders.importers.common import TagMap
from tracelab.recorders.importers.tensorboard import histogram_stats
from tracelab.recorders.importers.wandb_proto import BOOKKEEPING



def _key(item) -> str:
    key = item.key
    if key:
        return key
    nested = item.nested_key
    return nested[0] if len(nested) == 1 else ".".join(nested)


def json_value(item) -> Any:
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


@dataclass
class Reading:
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


def exact_record(data: bytes, reading: Reading, name: str) -> None:
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
        elif key not in BOOKKEEPING:
            values.append((key, item))
    if step is None:
        step = history.step.num if history.HasField("step") else row
    for parent, leaves in groups.items():
        if "_type" in leaves:  # media: a histogram (or an image, a table: left out)
            add_histogram(parent, {k: json_value(v) for k, v in leaves.items()}, step, hists, tags)
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
            add_histogram(key, json_value(item), step, hists, tags)
    return max(row, step) + 1


def add_histogram(key: str, data: Any, step: int, hists: list, tags: TagMap) -> None:
    stats = _histogram(data)
    target = tags.histogram(key) if stats is not None else None
    if target:
        hists.append({"step": step, "kind": target[0], "name": target[1], **stats})
