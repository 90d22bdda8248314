"""A step's scalars, and what recording does with a value it cannot take as one.

Recording never raises into the training loop, and one odd value never stops it: a value that
is not a real number is warned about once (per name and kind of problem, per recorder) and left
out, or recorded as the nearest number it stands for, as `scalar_value` says. Ordinary values (a
float tensor, a Python or numpy number) take the fast path and are never checked further.
"""
from __future__ import annotations

import decimal
import math
import numbers
import threading
import time
import warnings
from collections.abc import Mapping
from typing import Any, Hashable

import numpy as np
import torch

from tracelab.core.schema import METRIC_PREFIX, SCALARS

# Python ints below this always fit a float; larger ones take the slow path (OverflowError).
_BIG = 2 ** 1023
# Tensors read as a float without a question: the common case, checked by one lookup.
_PLAIN = frozenset({torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                    torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool})


def warn(message: str, stacklevel: int = 2) -> None:
    """Warn `tracelab: message` (a RuntimeWarning), or drop it where it cannot be shown: under
    warnings-as-errors (`warnings.simplefilter("error")`, pytest -W error) or a showwarning
    that fails, the warning would raise into the training loop, which recording never does.
    Every warning the recorder gives from step(), its hooks or callbacks goes through here."""
    try:
        warnings.warn(f"tracelab: {message}", RuntimeWarning, stacklevel=stacklevel + 1)
    except Exception:
        pass


class WarnOnce:
    """One RuntimeWarning per key over a recorder's life (either thread may warn)."""

    def __init__(self) -> None:
        self._seen: set[Hashable] = set()
        self._lock = threading.Lock()

    def __call__(self, key: Hashable, message: str) -> None:
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
        warn(message, stacklevel=3)


class Skip(Exception):
    """A value or feature that is not recorded: its args are (kind of problem, reason)."""


def scalar_value(value: Any) -> tuple[float | torch.Tensor, str | None]:
    """The float (or one-element tensor) recorded for an odd `value`, with a note saying how it
    was read when that is worth a warning; or Skip.

    A 0-d numpy array, a Decimal or Fraction: its float value. An int too large for a float:
    +-inf, the float it rounds to. Complex values (Python, numpy or torch): skipped, since their
    real part alone would misstate a loss. Strings, meta-device tensors (they hold no values)
    and other objects: skipped.
    """
    if isinstance(value, torch.Tensor):
        if value.device.type == "meta":
            raise Skip("meta", "a meta-device tensor holds no values; not recorded")
        if value.is_complex():
            raise Skip("complex", "a complex tensor; not recorded (a loss or metric must be real)")
        if value.layout != torch.strided:
            value = value.to_dense()
        return (value.detach().float().mean() if value.numel() != 1 else value.detach()), None
    if isinstance(value, (str, bytes)):
        raise Skip("string", f"a {type(value).__name__} ({value[:40]!r}); not recorded: "
                   "pass a number or a tensor")
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise Skip(f"array-{value.dtype.kind}", f"a numpy array of {value.dtype}; "
                       "not recorded (a loss or metric must be real)")
        number = float(value.reshape(-1)[0]) if value.size == 1 else float(value.mean())
        return number, f"a {value.ndim}-d numpy array; recorded as its float value" + \
            ("" if value.size == 1 else " (the mean)")
    if isinstance(value, (numbers.Real, decimal.Decimal)) or (
            isinstance(value, np.generic) and value.dtype.kind in "biuf"):
        plain = type(value) in (int, float)
        try:
            return float(value), None if plain else \
                f"a {type(value).__name__}; recorded as its float value"
        except OverflowError:
            return (math.inf if value > 0 else -math.inf), "does not fit a float; recorded as " \
                f"{'' if value > 0 else '-'}inf"
        except (ValueError, TypeError) as exc:  # a signalling NaN Decimal, ...
            raise Skip("unreadable", f"{value!r} has no float value ({exc}); not recorded")
    if isinstance(value, (numbers.Complex, np.complexfloating)):
        raise Skip("complex", f"a complex number ({value}); not recorded "
                   "(a loss or metric must be real)")
    raise Skip(f"type-{type(value).__name__}", f"a {type(value).__name__}, not a number; "
               "not recorded")


class Scalars:
    """One step's scalars: numbers and CPU tensors are read now, device tensors join the packed
    copy (reading one would sync the host)."""

    def __init__(self, step: int, split: str, warn: WarnOnce):
        self.step, self.split, self.warn = step, split, warn
        self.names: list[str] = []
        self.values: list[float] = []
        self.tensor_names: list[str] = []
        self.tensors: list[torch.Tensor] = []
        self.wall_time = time.time()

    def add(self, name: str, value: Any) -> None:
        if isinstance(value, torch.Tensor) and value.dtype in _PLAIN:
            device = value.device.type
            if device == "cpu":  # reading it costs nothing, packing it would
                try:
                    self.values.append(float(value.detach() if value.numel() == 1
                                             else value.detach().float().mean()))
                    self.names.append(name)
                    return
                except Exception:  # a sparse tensor, ...: the slow path says what it is
                    pass
            elif device != "meta" and value.layout == torch.strided:
                self.tensor_names.append(name)
                self.tensors.append((value.detach() if value.numel() == 1
                                     else value.detach().float().mean()).reshape(1))
                return
        elif isinstance(value, float) or (isinstance(value, int) and -_BIG < value < _BIG) \
                or (isinstance(value, np.number) and value.dtype.kind in "iuf"):
            self.names.append(name)
            self.values.append(float(value))
            return
        elif value is None:
            return
        self._add_odd(name, value)

    def _add_odd(self, name: str, value: Any) -> None:
        try:
            value, note = scalar_value(value)
            if isinstance(value, torch.Tensor):
                if value.device.type != "cpu":
                    self.tensor_names.append(name)
                    self.tensors.append(value.detach().reshape(1))
                    return
                value = float(value)
        except Skip as skip:
            kind, reason = skip.args
            self.warn(("scalar", name, kind), f"{self.split} scalar {name!r} at step "
                      f"{self.step}: {reason}; warned once")
            return
        except Exception as exc:  # never raise into the training loop
            self.warn(("scalar", name, type(exc).__name__), f"{self.split} scalar {name!r} "
                      f"at step {self.step} not recorded ({type(exc).__name__}: {exc}); "
                      "warned once")
            return
        if note is not None:
            self.warn(("scalar", name, note), f"{self.split} scalar {name!r} at step "
                      f"{self.step}: {note}; warned once")
        self.names.append(name)
        self.values.append(value)

    def add_all(self, metrics: Any, reserved: frozenset[str] = frozenset(),
                reserved_prefix: str | None = None) -> None:
        """Every (name, value) of `metrics`, a mapping; anything else is warned about once. A
        name in `reserved`, starting with `reserved_prefix` or already added is the recorder's
        own series, on every step whether or not it has a value this step: the metric goes in
        as METRIC_PREFIX + name."""
        if metrics is None:
            return
        if not isinstance(metrics, Mapping):
            items = getattr(metrics, "items", None)  # a pandas Series, ...
            try:
                named = dict(items()) if callable(items) else None
            except Exception:
                named = None
            if named is None:
                self.warn(("metrics", self.split, "not-mapping"), f"{self.split} metrics given "
                          f"as a {type(metrics).__name__}, not a mapping of names to values: "
                          "not recorded (they have no names); warned once")
                return
            metrics = named
        taken = reserved.union(self.names, self.tensor_names)
        for key, value in metrics.items():
            name = str(key)
            # Two series under one name: a reader would see one of them.
            if name in taken or reserved_prefix and name.startswith(reserved_prefix):
                renamed = f"{METRIC_PREFIX}{name}"
                self.warn(("scalar-name", name), f"{self.split} metric {name!r} has the name of "
                          f"a scalar the recorder writes itself: recorded as {renamed!r}; "
                          "warned once")
                name = renamed
            self.add(name, value)

    def rows(self, values: list[np.ndarray]) -> list[tuple[str, dict]]:
        """values: the host copies of `tensors`."""
        tensor_values = [float(v[0]) for v in values]
        names = self.names + self.tensor_names
        if not names:
            return []
        n = len(names)
        return [(SCALARS, {"step": np.full(n, self.step, dtype=np.int64),
                           "split": [self.split] * n, "name": names,
                           "value": np.array(self.values + tensor_values, dtype=np.float64),
                           "wall_time": np.full(n, self.wall_time)})]
