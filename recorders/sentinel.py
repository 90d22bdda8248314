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


def _unchecked(value: Any) -> list[str]:
    """The type names of the parts of a batch that the sentinel cannot read."""
    if type(value) is torch.Tensor:
        return []
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in _unchecked(v)]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _unchecked(v)]
    if value is None or isinstance(value, torch.Tensor) or is_frame(value):
        return []
    return [type(value).__name__]


def named_tensors(value: Any, base: str) -> list[tuple[str, torch.Tensor]]:
    """The tensors of a batch part (a tensor, a tuple or dict of them) with their names:
    `base` alone, `base<i>` in a tuple, the key in a dict."""
    if isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, (tuple, list)):
        items = [(f"{base}{i}", v) for i, v in enumerate(value)]
    else:
        items = [(base, value)]
    return [(n, v) for n, v in items if isinstance(v, torch.Tensor) and v.numel()
            and v.layout == torch.strided and not (v.is_meta or v.is_complex() or v.is_quantized)]


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
            for kind in _unchecked(value):
                self._warn(("sentinel-type", role, kind), f"{role}s given as a {kind} are not "
                           "checked or profiled: give tensors, numpy arrays or a pandas "
                           "DataFrame; warned once")
            if is_frame(value):
                for row in frame_sentinel(value):
                    roles.append(role)
                    names.append(role)
                    host.append(row)
                continue
            for name, x in named_tensors(value, role):
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
