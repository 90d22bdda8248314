"""Class counts of integer targets, per profiled batch: the classes table.

Every integer (or bool) target tensor of a profiled batch is counted by label, 0 ..
MAX_CLASSES - 1, with the labels outside that range under OTHER_CLASS. On a device the counts
are one fixed-size `scatter_add_` (its size never depends on the data, so no host sync) that
joins the step's packed copy; on the CPU, one `np.bincount`. Only the labels a batch holds are
written. From these the analysis reads each split's class balance.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tracelab.recorders.sentinel import named_tensors
from tracelab.recorders.transfer import StepRecord
from tracelab.core.schema import CLASSES, MAX_CLASSES, OTHER_CLASS, TARGET_ROLE

_INTEGER = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)


def record_classes(step: int, split: str, targets: Any, record: StepRecord) -> None:
    """Queue the class counts of the integer tensors of `targets` (others are left out)."""
    named = [(n, x) for n, x in named_tensors(targets, TARGET_ROLE) if x.dtype in _INTEGER]
    if not named:
        return
    host: list[np.ndarray | None] = []
    device: list[torch.Tensor] = []
    for _, x in named:
        if x.device.type == "cpu":
            host.append(host_counts(x))
        else:
            device.append(device_counts(x))
            host.append(None)

    names = [n for n, _ in named]  # the rows keep no tensor alive while the step waits

    def rows(values: list[np.ndarray]) -> list[tuple[str, dict]]:
        found = iter(values)
        out = []
        for name, counts in zip(names, host):
            counts = counts if counts is not None else next(found).astype(np.int64)
            labels = np.flatnonzero(counts)
            n = len(labels)
            out.append((CLASSES, {
                "step": np.full(n, step, dtype=np.int64), "split": [split] * n,
                "target": [name] * n,
                "label": np.where(labels == MAX_CLASSES, OTHER_CLASS, labels).astype(np.int64),
                "count": counts[labels]}))
        return out
    record.add(rows, device)


def _bins(x: torch.Tensor) -> torch.Tensor:
    """Each label's bin: the label itself inside 0 .. MAX_CLASSES - 1, else MAX_CLASSES."""
    flat = x.detach().reshape(-1).to(torch.int64)
    inside = (flat >= 0) & (flat < MAX_CLASSES)
    return torch.where(inside, flat, torch.full_like(flat, MAX_CLASSES))


def host_counts(x: torch.Tensor) -> np.ndarray:
    """Counts of a CPU tensor's labels: MAX_CLASSES + 1 bins (the last: outside the range)."""
    return np.bincount(_bins(x).numpy(), minlength=MAX_CLASSES + 1)


def device_counts(x: torch.Tensor) -> torch.Tensor:
    """host_counts on x's device, as float64 (exact below 2**53), with no host sync."""
    bins = _bins(x)
    counts = torch.zeros(MAX_CLASSES + 1, dtype=torch.float64, device=x.device)
    return counts.scatter_add_(0, bins, torch.ones_like(bins, dtype=torch.float64))
