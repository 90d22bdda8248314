"""What the framework callbacks share: metric names per split, and glue that never breaks a job.

A callback drives a Recorder from a framework's hooks. Its own code (reading the framework's
metrics and batches) is guarded: the first error is warned about once, recording stops, and
training goes on, the same promise the Recorder's writer makes.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from typing import Any, Callable

from tracelab.core.schema import LOSS_NAME, TRAIN
from tracelab.recorders.scalars import warn

# Metric-name prefixes that say which split a framework metric belongs to.
SPLIT_PREFIXES = {
    TRAIN: ("train_", "train/", "train-", "training_", "training/"),
    "val": ("val_", "val/", "val-", "valid_", "valid/", "validation_", "validation/",
            "eval_", "eval/"),
    "test": ("test_", "test/", "test-"),
}
# Bookkeeping a framework reports next to its metrics: not a property of the model.
NOT_METRICS = ("epoch", "step", "global_step", "runtime", "samples_per_second",
               "steps_per_second", "total_flos", "learning_rate", "lr")


def split_of(name: str) -> tuple[str | None, str]:
    """(split, name without its split prefix); split is None for an unprefixed name."""
    lowered = name.lower()
    for split, prefixes in SPLIT_PREFIXES.items():
        for prefix in prefixes:
            if lowered.startswith(prefix) and len(name) > len(prefix):
                return split, name[len(prefix):]
    return None, name


def metrics_for(metrics: Mapping[str, Any], split: str, *, unprefixed: bool) -> dict[str, Any]:
    """The scalar metrics of one split, names stripped of the split prefix. `unprefixed`:
    whether names without a prefix belong to this split."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        found, name = split_of(str(key))
        if found != split and not (found is None and unprefixed):
            continue
        # Lightning logs `x_step` and `x_epoch` when a metric is logged both ways.
        if name.endswith("_epoch") and split == TRAIN:
            continue
        name = name[:-len("_step")] if name.endswith("_step") else name
        if name in NOT_METRICS or not _is_scalar(value):
            continue
        out[name] = value
    return out


def _is_scalar(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    numel = getattr(value, "numel", None)
    return callable(numel) and numel() == 1


def loss_value(output: Any) -> Any:
    """The loss in a training step's or a model's output: a tensor, `out["loss"]`, `out.loss`."""
    if output is None:
        return None
    if isinstance(output, Mapping):
        return output.get(LOSS_NAME)
    loss = getattr(output, LOSS_NAME, None)
    if loss is not None:
        return loss
    return output if _is_scalar(output) else None


class Guard:
    """Holds a callback's Recorder; its `guarded` hooks stop recording on their first error."""

    framework = "framework"

    def __init__(self) -> None:
        self.recorder = None
        self.disabled = False
        self._last_step_end: float | None = None
        self._data_time: float | None = None

    def _take_data_time(self) -> float | None:
        value, self._data_time = self._data_time, None
        return value

    def _stop(self, exc: BaseException) -> None:
        self.disabled = True
        warn(f"the {self.framework} callback stopped recording ({type(exc).__name__}: {exc}); "
             "training continues", stacklevel=3)
        rec, self.recorder = self.recorder, None
        try:
            if rec is not None:
                # Training goes on, so the run did not fail: its trace just ends here.
                rec.close({"state": "completed", "note": f"recording stopped: the {self.framework}"
                           f" callback failed ({type(exc).__name__}: {exc}); training went on"})
        except Exception:  # the job matters more than the trace
            pass

    def _close(self, exc: BaseException | None = None) -> None:
        rec, self.recorder = self.recorder, None
        if rec is None:
            return
        if exc is None:
            rec.close()
        else:
            rec.__exit__(type(exc), exc, exc.__traceback__)

    # The wait between the end of one step and the next step's first forward pass: the data
    # loader's share, recorded like Recorder.iterate() records it.
    def _mark_step_end(self) -> None:
        self._last_step_end = time.perf_counter()

    def _mark_data_ready(self) -> None:
        if self._last_step_end is not None:
            self._data_time = time.perf_counter() - self._last_step_end
            self._last_step_end = None


def guarded(method: Callable) -> Callable:
    @functools.wraps(method)
    def hook(self: Guard, *args: Any, **kwargs: Any) -> Any:
        if self.disabled:
            return None
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:  # never let recording break training
            self._stop(exc)
            return None
    return hook
