"""A compact hash per input row, for a bounded sample per split: the fingerprints table.

Each row of a profiled batch (every tensor of the batch with its batch size) is hashed on its
device: the bits of its values times fixed random multipliers, summed, mixed, and kept to 52
bits so that the hash travels exactly in the step's float64 packed copy. The sample is a
consistent one (as in distinct-value sketches): a split keeps the distinct hashes below its
threshold, halving the threshold whenever it holds more than `limit`. A row kept in two
splits is kept in both whenever both thresholds admit it, so the overlap of two splits is
measured on the hashes below the lower threshold (the power of two above the largest hash a
split wrote). Splits evaluated again and again write each row once.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tracelab.recorders.sentinel import named_tensors
from tracelab.recorders.transfer import StepRecord
from tracelab.core.schema import FINGERPRINTS, INPUT_ROLE

HASH_BITS = 52
_MASK = (1 << HASH_BITS) - 1
_BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
         torch.bfloat16: torch.int16}


def _bits(x: torch.Tensor) -> torch.Tensor:
    """[rows, values] of x: a float's bits as the integer of its width, other values as they
    are (an integer's value is its bits' meaning)."""
    x = x.detach().reshape(x.shape[0], -1)
    return x.contiguous().view(_BITS[x.dtype]) if x.dtype in _BITS else x.contiguous()


class Fingerprints:
    """The fingerprints rows of one recorder: its training thread hashes a batch on the
    batch's device, and its writer thread keeps the sample."""

    def __init__(self, limit: int, *, seed: int = 0):
        self.limit = limit
        self._seed = seed
        self._coefficients: dict[tuple[str, int], torch.Tensor] = {}
        self._kept: dict[str, set[int]] = {}  # writer thread
        self._threshold: dict[str, int] = {}

    def record(self, step: int, split: str, inputs: Any, record: StepRecord) -> None:
        """Queue the fingerprints of the rows of `inputs`."""
        if self.limit <= 0:
            return
        named = [(n, x) for n, x in named_tensors(inputs, INPUT_ROLE) if x.dim() >= 1]
        if not named:
            return
        batch = named[0][1].shape[0]
        named = [(n, x) for n, x in named if x.shape[0] == batch]
        name = ",".join(n for n, _ in named)
        tensors = [x for _, x in named]
        hashes = None
        for i, x in enumerate(tensors):
            h = self._row_hashes(x, i)
            hashes = h if hashes is None else hashes + h
        mixed = _mix(hashes).to(torch.float64)

        def rows(found: list[np.ndarray]) -> list[tuple[str, dict]]:
            new = self._keep(split, found[0].astype(np.int64))
            n = len(new)
            if not n:
                return []
            return [(FINGERPRINTS, {"step": np.full(n, step, dtype=np.int64),
                                    "split": [split] * n, "input": [name] * n, "hash": new})]
        record.add(rows, (mixed,))

    def _row_hashes(self, x: torch.Tensor, index: int) -> torch.Tensor:
        bits = _bits(x).to(torch.int64)
        return (bits * self._coefficients_for(x.device, bits.shape[1], index)).sum(dim=1)

    def _coefficients_for(self, device: torch.device, width: int, index: int) -> torch.Tensor:
        key = (str(device), index)
        have = self._coefficients.get(key)
        if have is None or have.numel() < width:
            gen = torch.Generator().manual_seed(self._seed * 1009 + index)
            coef = torch.randint(1, 1 << 62, (max(width, 64),), generator=gen,
                                 dtype=torch.int64) * 2 + 1
            have = self._coefficients[key] = coef.to(device)
        return have[:width]

    def _keep(self, split: str, hashes: np.ndarray) -> np.ndarray:
        """The hashes of `split` not kept before that its threshold admits (writer thread)."""
        kept = self._kept.setdefault(split, set())
        threshold = self._threshold.setdefault(split, 1 << HASH_BITS)
        fresh = np.unique(hashes[hashes < threshold])  # once the sample is full, a few rows
        new = [h for h in fresh.tolist() if h not in kept]
        kept.update(new)
        while len(kept) > self.limit:
            threshold //= 2
            kept.difference_update([h for h in kept if h >= threshold])
        self._threshold[split] = threshold
        return np.array([h for h in new if h < threshold], dtype=np.int64)


def _mix(hashes: Any) -> Any:
    """The summed row products of an int64 array or tensor, mixed and kept to HASH_BITS."""
    hashes = hashes ^ (hashes >> 31)
    hashes = hashes * -7046029254386353131  # 0x9E3779B97F4A7C15 as an int64
    return (hashes ^ (hashes >> 29)) & _MASK
