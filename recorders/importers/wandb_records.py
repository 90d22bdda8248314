"""W&B's records decoded one protobuf message at a time (`wandb_proto`: the fields read), in
file order, into what a run's records add up to (`Reading`).

Values are JSON text (`value_json`), or one of the `boolean`, `integer`, `number` fields. A
history value is a number (a metric), a whole dict in one item (as older clients write a
logged dict), or one leaf of a dict (wandb-core writes an item per leaf, its `nested_key` the
path to it). Histograms (`{"_type": "histogram", "bins": edges, "values": counts}`) become
tensor statistics. What cannot be read is left out and named in the run's problems, once per
field: JSON nested more than DEEPEST levels (json's parser recurses once per level, and so
would whatever reads the value after it), a histogram whose bins or counts are not finite
numbers (a 400-digit integer), a name or label holding NUL (which no path or C string holds).
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

DEEPEST = 64  # levels of nesting read in a JSON value
_LAST_STEP = 2**63 - 1  # the row counter stops here (int64's last), out of a trace's range


@dataclass
class Reading:
    """What a run's records add up to, read in order (series: key -> (steps, values, wall
    times)); `file`: the name of the file being read, for the problems."""
    tags: TagMap
    record_class: Any
    file: str = ""
    series: dict = field(default_factory=dict)
    hists: list = field(default_factory=list)
    config: dict = field(default_factory=dict)   # key -> Item, decoded by `values`
    summary: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    exit_code: Optional[int] = None
    runtime: Any = None
    problems: list = field(default_factory=list)
    row: int = 0
    left_out: dict = field(default_factory=dict)  # (file, what, why) -> [count, first step]

    def leave_out(self, what: str, why: str, step: Optional[int] = None) -> None:
        seen = self.left_out.setdefault((self.file, what, why), [0, step])
        seen[0] += 1

    def left_out_problems(self) -> list[str]:
        """One line per field and reason: what was left out, where, how often."""
        lines = []
        for (file, what, why), (count, step) in self.left_out.items():
            at = "" if step is None else f" at step {step}"
            more = f" and {count - 1} more times" if count > 1 else ""
            lines.append(f"{file}: {what}: {why}{at}{more}, left out")
        return lines

    def values(self, items: dict[str, Any], what: str) -> dict[str, Any]:
        """Config or summary items decoded (once, at the end: W&B writes a summary update
        after every logged row)."""
        out = {}
        for key, item in items.items():
            value, why = json_value(item)
            if why is None:
                out[key] = value
            else:
                self.leave_out(f"{what} {key!r}", why)
        return out

    def label(self, text: str, what: str) -> str:
        """A name or label of the run, or "" where it holds NUL."""
        if "\0" not in text:
            return text
        self.leave_out(what, "holds NUL")
        return ""


def parse(text: str) -> tuple[Any, Optional[str]]:
    """A JSON value (text that is not JSON stays text), or (None, why) where it is nested more
    than DEEPEST levels."""
    try:
        value = json.loads(text)
    except RecursionError:
        return None, f"JSON nested more than {DEEPEST} levels deep"
    except ValueError:
        return text, None
    if isinstance(value, (dict, list)) and _deeper(value):
        return None, f"JSON nested more than {DEEPEST} levels deep"
    return value, None


def _deeper(value: Any) -> bool:
    """Whether `value` nests more than DEEPEST levels of lists and dicts (walked without
    recursion)."""
    level = [value]
    for _ in range(DEEPEST):
        level = [c for v in level if isinstance(v, (dict, list))
                 for c in (v.values() if isinstance(v, dict) else v)]
        if not level:
            return False
    return any(isinstance(v, (dict, list)) for v in level)


def json_value(item) -> tuple[Any, Optional[str]]:
    """An item's value, or (None, why it cannot be read)."""
    kind = item.WhichOneof("value")
    if kind is not None:
        return getattr(item, kind), None
    return parse(item.value_json)


def _key(item) -> str:
    key = item.key
    if key:
        return key
    nested = item.nested_key
    return nested[0] if len(nested) == 1 else ".".join(nested)


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


def _histogram(data: Any) -> tuple[Optional[dict[str, float]], Optional[str]]:
    """Statistics of a `wandb.Histogram` (bins are the edges), everything approximate, from the
    bucket midpoints; (None, None) for anything else (an image, a table) or an empty one,
    (None, why) for one that cannot be read."""
    if not isinstance(data, dict) or data.get("_type") != "histogram":
        return None, None
    beyond = "a histogram whose bins or values are not finite numbers in a float's range"
    try:
        edges = np.asarray(data["bins"], dtype=float)
        counts = np.asarray(data["values"], dtype=float)
    except OverflowError:  # an integer of 400 digits
        return None, beyond
    except (KeyError, TypeError, ValueError):
        return None, "a histogram whose bins or values are not lists of numbers"
    if edges.ndim != 1 or counts.ndim != 1 or len(edges) != len(counts) + 1:
        return None, "a histogram whose bins are not one edge more than its values"
    if not (np.isfinite(edges).all() and np.isfinite(counts).all()):
        return None, beyond
    used = np.flatnonzero(counts)
    if not len(used):
        return None, None
    return histogram_stats(edges[:-1], edges[1:], counts, vmin=float(edges[used[0]]),
                           vmax=float(edges[used[-1] + 1]), num=float(counts.sum())), None


def _apply(target: dict[str, Any], update) -> None:
    """Apply config or summary updates; values stay items, decoded once at the end."""
    for item in update.update:
        key = _key(item)
        if key[:1] != "_":
            target[key] = item
    for item in update.remove:
        target.pop(_key(item), None)


def read_record(data: bytes, reading: Reading) -> None:
    """One record, decoded by protobuf, into `reading`."""
    try:
        record = reading.record_class.FromString(data)
    except Exception:  # a record whose checksum holds but that is no Record
        reading.problems.append(f"{reading.file}: a record that is not W&B's (skipped)")
        return
    if record.HasField("history"):
        _history(record.history, reading)
    elif record.HasField("summary"):
        _apply(reading.summary, record.summary)
    elif record.HasField("config"):
        _apply(reading.config, record.config)
    elif record.HasField("run"):
        run = record.run
        _apply(reading.config, run.config)
        reading.info.update(run_id=reading.label(run.run_id, "run id"),
                            project=reading.label(run.project, "project"),
                            entity=reading.label(run.entity, "entity"),
                            name=reading.label(run.display_name, "display name"),
                            tags=[t for t in run.tags if reading.label(t, "tag")])
        if run.HasField("start_time"):
            reading.info["start"] = run.start_time.seconds + run.start_time.nanos / 1e9
    elif record.HasField("exit"):
        reading.exit_code, reading.runtime = record.exit.exit_code, record.exit.runtime


def _history(history, reading: Reading) -> None:
    """One history row: its numbers into `reading.series`, its histograms into `hists`."""
    step, wall = None, math.nan
    values = []
    groups: dict[str, dict[str, Any]] = {}  # a logged dict: one item per leaf
    for item in history.item:
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
        step = history.step.num if history.HasField("step") else reading.row
    reading.row = min(max(reading.row, step) + 1, _LAST_STEP)
    for parent, leaves in groups.items():
        if "_type" in leaves:  # media: a histogram (or an image, a table: left out)
            data = {}
            for leaf, item in leaves.items():
                data[leaf], why = json_value(item)
                if why is not None:
                    reading.leave_out(f"history {parent + '.' + leaf!r}", why, step)
                    break
            else:
                _add_histogram(parent, data, step, reading)
        else:
            values.extend((f"{parent}.{leaf}", item) for leaf, item in leaves.items())
    series = reading.series
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
            got[0].append(step)
            got[1].append(number)
            got[2].append(wall)
        elif text.startswith("{"):  # a whole dict in one item, as older clients write it
            data, why = parse(text)
            if why is None:
                _add_histogram(key, data, step, reading)
            else:
                reading.leave_out(f"history {key!r}", why, step)


def _add_histogram(key: str, data: Any, step: int, reading: Reading) -> None:
    stats, why = _histogram(data)
    if why is not None:
        reading.leave_out(f"history {key!r}", why, step)
    target = reading.tags.histogram(key) if stats is not None else None
    if target:
        reading.hists.append({"step": step, "kind": target[0], "name": target[1], **stats})
