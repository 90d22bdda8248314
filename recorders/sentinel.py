"""Every step's sentinel of its batches: min, max, NaN and Inf counts of each input and target.

The full input profile keeps its cadence (`input_every`); the sentinel is cheap enough for
every step, so that a loss spike or the first NaN can always be traced to its batch. On an
accelerator it is a few fused reductions per tensor, stacked into one small tensor that joins
the step's packed copy: the host never waits. On the CPU a tensor is read at once by one
vectorized torch or numpy call (`host_sentinel`), the batch as it was at `step()`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np
import torch

from tracelab.recorders.profile import is_frame
from tracelab.recorders.transfer import StepRecord
from tracelab.core.schema import BATCHES, INPUT_ROLE, TARGET_ROLE

_HALF = (torch.float16, torch.bfloat16)
_NUMPY_INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def as_tensors(value: Any) -> Any:
    """A batch part as the batch producers read it: numpy arrays of numbers as tensors (sharing
    their memory where torch can), a pandas Series as a one-column DataFrame; anything else,
    and an array torch cannot take, as it is (the sentinel then warns of it). Never raises."""
    if type(value) is torch.Tensor:  # the common case, at once
        return value
    if isinstance(value, np.ndarray):
        return _array_tensor(value)
    if isinstance(value, dict) or isinstance(value, Mapping):
        return {k: as_tensors(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [as_tensors(v) for v in value]
    if type(value).__name__ == "Series" and hasattr(value, "to_frame"):
        try:
            return value.to_frame()
        except Exception:
            return value
    return value


def _array_tensor(a: np.ndarray) -> Any:
    if a.dtype.kind not in "biuf":
        return a
    try:
        if a.flags.writeable and a.dtype.isnative and all(s >= 0 for s in a.strides):
            return torch.from_numpy(a)
        # A copy torch can take: read-only, byte-swapped or reversed arrays.
        return torch.from_numpy(np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("=")))
    except (TypeError, ValueError, RuntimeError):  # float128, ...: not a torch dtype
        return a


def frame_sentinel(df: Any) -> list[np.ndarray]:
    """[min, max, NaN count, Inf count] over the numeric and boolean columns of a pandas
    DataFrame (one row for the frame, as for a tensor), or [] when it has none."""
    numeric = [c for c, dtype in df.dtypes.items() if getattr(dtype, "kind", "O") in "biuf"]
    if not numeric or not len(df):
        return []
    values = df[numeric].to_numpy(dtype=np.float64, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        low, high = values.min(), values.max()  # NaN propagates, as for tensors
    return [np.array([low, high, np.isnan(values).sum(), np.isinf(values).sum()],
                     dtype=np.float64)]


# How far a batch part is walked: nested tuples, lists and dicts up to MAX_DEPTH levels below
# the part itself, and at most MAX_PARTS leaves, so that a deep or huge structure costs a
# bounded walk; what lies beyond is skipped and warned about.
MAX_DEPTH = 4
MAX_PARTS = 256


def batch_leaves(value: Any, base: str) -> tuple[list[tuple[str, tuple, Any]], list[str]]:
    """(leaves, skipped) of a batch part: each leaf (anything but a tuple, list or dict) as
    (name, path, leaf), in order, and what the walk left out, described for a warning.

    Names are stable from step to step: `base` for the part itself; `base<i>` for the i-th item
    of a tuple or list and the key for a dict's value, as one level always named them; deeper
    items add `.<i>` or `.<key>` (`input0.1.0`, `k.mask`). `path` holds the indices and keys
    from the top. Containers deeper than MAX_DEPTH levels and leaves past MAX_PARTS are
    skipped; a leaf that is None is dropped silently."""
    leaves: list[tuple[str, tuple, Any]] = []
    skipped: list[str] = []
    stack: list[tuple[str, tuple, Any]] = [(base, (), value)]
    while stack:
        name, path, item = stack.pop()
        if type(item) is torch.Tensor or not isinstance(item, (Mapping, tuple, list)):
            if item is None:
                continue
            if len(leaves) >= MAX_PARTS:
                skipped.append(f"{name} and any later parts (more than {MAX_PARTS} parts)")
                break
            leaves.append((name, path, item))
            continue
        if len(path) >= MAX_DEPTH:
            skipped.append(f"{name} (nested deeper than {MAX_DEPTH} levels)")
            continue
        try:
            items = list(item.items()) if isinstance(item, Mapping) else list(enumerate(item))
        except Exception as exc:  # a mapping whose items() raises
            skipped.append(f"{name} ({type(exc).__name__} reading its items)")
            continue
        children = []
        for key, child in items:
            if not path:  # the first level, named as before
                label = str(key) if isinstance(item, Mapping) else f"{base}{key}"
            else:
                label = f"{name}.{key}"
            children.append((label, path + (key,), child))
        stack.extend(reversed(children))  # depth first, in order
    return leaves, skipped


def _profiled(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and bool(x.numel()) and x.layout == torch.strided \
        and not (x.is_meta or x.is_complex() or x.is_quantized)


def _unchecked(value: Any) -> list[str]:
    """The type names of the parts of a batch that the sentinel cannot read."""
    leaves, _ = batch_leaves(value, "")
    return [type(v).__name__ for _, _, v in leaves
            if not (isinstance(v, torch.Tensor) or is_frame(v))]


def named_tensors(value: Any, base: str) -> list[tuple[str, torch.Tensor]]:
    """The tensors of a batch part (a tensor, or tuples, lists and dicts of them, nested as
    `batch_leaves` walks them) with their names: `base` alone, `base<i>` in a tuple, the key
    in a dict, `.<i>` or `.<key>` for each level below."""
    leaves, _ = batch_leaves(value, base)
    return [(n, v) for n, _, v in leaves if _profiled(v)]


def device_sentinel(x: torch.Tensor) -> torch.Tensor:
    """[min, max, NaN count, Inf count] of x as float64, on x's device, with no host sync."""
    x = x.detach()
    if x.dtype == torch.bool:
        x = x.to(torch.uint8)
    if not x.is_floating_point():
        low, high = torch.aminmax(x)
        zero = torch.zeros((), dtype=torch.float64, device=x.device)
        return torch.stack([low.to(torch.float64), high.to(torch.float64), zero, zero])
    if x.device.type == "cpu" and x.dtype in _HALF:
        x = x.float()  # CPU reductions of half types return half results
    low, high = torch.aminmax(x)
    return torch.stack([low.to(torch.float64), high.to(torch.float64),
                        torch.isnan(x).sum().to(torch.float64),
                        torch.isinf(x).sum().to(torch.float64)])


def host_sentinel(x: torch.Tensor) -> np.ndarray:
    """device_sentinel of a CPU tensor, read now. A float tensor takes one vectorized
    `aminmax`: NaN propagates into it and Inf is an extreme, so finite extremes mean no NaN or
    Inf, and only a tensor holding them is counted (five times cheaper than a moments pass)."""
    x = x.detach()
    if x.dtype in _NUMPY_INTS or x.dtype == torch.bool:
        values = x.numpy()
        return np.array([values.min(), values.max(), 0, 0], dtype=np.float64)
    if x.is_floating_point():
        low, high = torch.aminmax(x)
        low, high = float(low), float(high)
        if math.isfinite(low) and math.isfinite(high):
            return np.array([low, high, 0.0, 0.0])
    return device_sentinel(x).numpy()


class Sentinel:
    """The batches rows of one recorder. warn(key, message) hears of a tensor left out."""

    def __init__(self, warn: Callable[[Any, str], None]):
        self._warn = warn

    def record(self, step: int, split: str, inputs: Any, targets: Any,
               record: StepRecord) -> None:
        """Queue the batches rows of `inputs` and `targets`."""
        roles, names, host, device = [], [], [], []
        for role, value in ((INPUT_ROLE, inputs), (TARGET_ROLE, targets)):
            if value is None:
                continue
            leaves, skipped = batch_leaves(value, role)
            unread: dict[str, list[str]] = {}
            for name, _, leaf in leaves:
                if not (isinstance(leaf, torch.Tensor) or is_frame(leaf)):
                    unread.setdefault(type(leaf).__name__, []).append(name)
            for kind, where in unread.items():
                self._warn(("sentinel-type", role, kind), f"{role}s given as a {kind} are not "
                           f"checked or profiled ({_listed(where)}): give tensors, numpy arrays "
                           "or a pandas DataFrame; warned once")
            if skipped:
                self._warn(("sentinel-limits", role), f"{role} parts not checked or profiled: "
                           f"{_listed(skipped)}; warned once")
            if is_frame(value):
                for row in frame_sentinel(value):
                    roles.append(role)
                    names.append(role)
                    host.append(row)
                continue
            for name, x in ((n, v) for n, _, v in leaves if _profiled(v)):
                try:
                    if x.device.type == "cpu":
                        host.append(host_sentinel(x))
                    else:
                        device.append(device_sentinel(x))
                        host.append(None)
                except Exception as exc:  # this tensor only: the others are checked
                    self._unchecked(role, name, exc)
                    continue
                roles.append(role)
                names.append(name)
        if not names:
            return

        def rows(values: list[np.ndarray]) -> list[tuple[str, dict]]:
            found = iter(values)
            table = np.stack([next(found) if h is None else h for h in host])
            n = len(names)
            return [(BATCHES, {"step": np.full(n, step, dtype=np.int64), "split": [split] * n,
                               "role": roles, "name": names, "min": table[:, 0],
                               "max": table[:, 1], "nan_count": table[:, 2].astype(np.int64),
                               "inf_count": table[:, 3].astype(np.int64)})]
        record.add(rows, device)

    def _unchecked(self, role: str, name: str, exc: Exception) -> None:
        self._warn(("sentinel", name, type(exc).__name__), f"{role} {name!r} not checked "
                   f"({type(exc).__name__}: {exc}); warned once")


def _listed(names: list[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
