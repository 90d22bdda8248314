"""A compact hash per input row and per input item, for a bounded sample per split: the
fingerprints table.

Each row of a profiled batch (every tensor of the batch with its batch size, or a DataFrame's
numeric columns) is hashed on its device: the bits of its values (32 bits at most, a 64-bit value as its
two halves) times fixed random multipliers (one vector for every item width), summed, mixed, and kept to 52 bits so that the hash travels exactly
in the step's float64 packed copy. Where a row holds several items of one kind, each item is
also hashed on its own, in the same pass: the tensors of a tuple or dict that share their shape
and dtype and hold items of two or more dimensions (the two images of a siamese pair, a
triplet; not token ids beside their attention mask, whose rows repeat by nature), and the
slices along dim 1 of a tensor of four or more dimensions (images stacked as channels, the
frames of a clip), those of tensors of one shape together. An item hashes
the same in every slot, so an image that is the first of a training pair and the second of a
validation pair matches; the row's hash combines its items' hashes, each times a multiplier of
its slot. Rows and items are separate units (the `input` column: the tensors' names for the
row, `items:` and the names for the items), each sampled on its own.

The sample is a consistent one (as in distinct-value sketches): a split keeps a unit's distinct
hashes below its threshold, halving the threshold whenever it holds more than `limit`. A row
kept in two splits is kept in both whenever both thresholds admit it, so the overlap of two
splits is measured on the hashes below the lower threshold (the power of two above the largest
hash a split wrote). Splits evaluated again and again write each row once, except the first
batch a split fingerprints, whose hashes are all written, repeats included: its rows' number
is the batch size that the analysis needs to tell how many values of a profiled feature one
row holds, and its repeats, with the rows later batches leave out as seen before, how often
rows repeat by chance (train-val-overlap: the training split's first epoch, and a split's
own first batch).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tracelab.recorders.profile import is_frame
from tracelab.recorders.sentinel import named_tensors
from tracelab.recorders.transfer import StepRecord
from tracelab.core.schema import FINGERPRINTS, INPUT_ROLE

HASH_BITS = 52
ITEMS = "items:"  # the input name's prefix of an item unit
_MASK = (1 << HASH_BITS) - 1
# 64-bit values as two 32-bit halves: a 64-bit word with many low zero bits (1.0 as a double is
# 0x3FF0 << 48) would keep only a few bits of its multiplier, so that rows of small integers or
# one-hot columns in float64 would collide.
_BITS = {torch.float64: torch.int32, torch.int64: torch.int32, torch.float32: torch.int32,
         torch.float16: torch.int16, torch.bfloat16: torch.int16}
_INTS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int32}
# Elements hashed at once: a batch's rows go by pieces of about this many values, so that the
# int64 copies the hash takes stay small whatever the batch's size (or an expanded tensor's).
_CHUNK = 1 << 21


def _bits(x: torch.Tensor) -> torch.Tensor:
    """[items, values] of x: a float's bits as integers of at most 32 bits (any float type,
    float8 too: its value cast to an integer would make rows of small values one), other values
    as they are (an integer's value is its bits' meaning)."""
    x = x.detach().reshape(x.shape[0], -1)
    if x.stride(-1) != 1 or not x.is_contiguous():  # a column whose stride is its rows' count
        x = x.clone(memory_format=torch.contiguous_format)
    if x.dtype in _BITS:
        return x.view(_BITS[x.dtype])
    if x.is_floating_point():
        return x.view(_INTS[x.element_size()])
    return x


def frame_tensor(df: Any) -> torch.Tensor | None:
    """A DataFrame's numeric columns as a float64 [rows, columns] tensor (NaN for missing)."""
    numeric = [c for c, dtype in df.dtypes.items() if getattr(dtype, "kind", "O") in "biuf"]
    if not numeric or not len(df):
        return None
    values = df[numeric].to_numpy(dtype=np.float64, na_value=np.nan)
    if not values.flags.writeable:  # a copy-on-write frame's block: torch warns on a view
        values = values.copy()
    return torch.from_numpy(values)


class Fingerprints:
    """The fingerprints rows of one recorder: its training thread hashes a batch on the
    batch's device, and its writer thread keeps the sample."""

    def __init__(self, limit: int, *, seed: int = 0):
        self.limit = limit
        self._seed = seed
        self._coefficients: dict[str, torch.Tensor] = {}
        self._slots: dict[str, torch.Tensor] = {}
        self._kept: dict[tuple[str, str], set[int]] = {}  # writer thread
        self._threshold: dict[tuple[str, str], int] = {}

    def record(self, step: int, split: str, inputs: Any, record: StepRecord) -> None:
        """Queue the fingerprints of the rows (and items) of `inputs`."""
        if self.limit <= 0:
            return
        if is_frame(inputs):
            x = frame_tensor(inputs)
            named = [(INPUT_ROLE, x)] if x is not None else []
        else:
            named = [(n, x) for n, x in named_tensors(inputs, INPUT_ROLE) if x.dim() >= 1]
        if not named:
            return
        batch = named[0][1].shape[0]
        named = [(n, x) for n, x in named if x.shape[0] == batch]
        units, row_hashes = self._hash(named)
        names = [",".join(n for n, _ in named)] + [ITEMS + name for name, _ in units]
        packed = torch.cat([row_hashes] + [h.reshape(-1) for _, h in units]).to(torch.float64)
        sizes = [batch] + [h.numel() for _, h in units]

        def rows(found: list[np.ndarray]) -> list[tuple[str, dict]]:
            out, start = [], 0
            for name, size in zip(names, sizes):
                new = self._keep(split, name, found[0][start:start + size].astype(np.int64))
                start += size
                if len(new):
                    n = len(new)
                    out.append((FINGERPRINTS, {"step": np.full(n, step, dtype=np.int64),
                                               "split": [split] * n, "input": [name] * n,
                                               "hash": new}))
            return out
        record.add(rows, (packed,))

    def _hash(self, named: list[tuple[str, torch.Tensor]]):
        """(item units [(name, [batch, k] hashes)], [batch] row hashes), mixed."""
        per_tensor = []  # (name, [batch, slots] unmixed item hashes)
        # A batch's tensors on several devices (ids on the GPU, lengths on the CPU): their
        # hashes meet on an accelerator's, a small copy that needs no host sync.
        device = next((x.device for _, x in named if x.device.type != "cpu"), named[0][1].device)
        for name, x in named:
            if x.dim() >= 4 and x.shape[1] >= 2:  # stacked items: the slices along dim 1
                h = self._item_hashes(x.reshape(x.shape[0] * x.shape[1], *x.shape[2:]))
                per_tensor.append((name, h.reshape(x.shape[0], x.shape[1]).to(device), True))
            else:
                per_tensor.append((name, self._item_hashes(x).reshape(-1, 1).to(device), False))
        slots = torch.cat([h for _, h, _ in per_tensor], dim=1)
        rows = (slots * self._slot_multipliers(slots.device, slots.shape[1])).sum(dim=1)
        groups: dict[tuple, list[int]] = {}
        for i, (_, x) in enumerate(named):
            groups.setdefault((tuple(x.shape[1:]), x.dtype), []).append(i)
        units = []
        for members in groups.values():  # items of at least 2 dims (not a mask's or ids' row)
            stacked = per_tensor[members[0]][2]
            if stacked or (len(members) >= 2 and named[members[0]][1].dim() >= 3):
                units.append((",".join(named[i][0] for i in members),
                              _mix(torch.cat([per_tensor[i][1] for i in members], dim=1))))
        return units, _mix(rows)

    def _item_hashes(self, x: torch.Tensor) -> torch.Tensor:
        """[items] unmixed hashes of x's items (its slices along dim 0), by pieces of rows."""
        x = x.detach().reshape(x.shape[0], -1)
        step = max(1, _CHUNK // max(x.shape[1], 1))
        out = []
        for start in range(0, x.shape[0], step):
            bits = _bits(x[start:start + step])
            coefficients = self._coefficients_for(x.device, bits.shape[1])
            out.append((bits.to(torch.int64) * coefficients).sum(dim=1))
        return out[0] if len(out) == 1 else torch.cat(out)

    def _coefficients_for(self, device: torch.device, width: int) -> torch.Tensor:
        """The first `width` of one vector per device, so that items of one width (in any
        tensor or slot) hash alike."""
        key = str(device)
        have = self._coefficients.get(key)
        if have is None or have.numel() < width:
            gen = torch.Generator().manual_seed(self._seed * 1009)
            have = self._coefficients[key] = _odd(1 << max(width - 1, 63).bit_length(),
                                                  gen).to(device)
        return have[:width]

    def _slot_multipliers(self, device: torch.device, slots: int) -> torch.Tensor:
        key = str(device)
        have = self._slots.get(key)
        if have is None or have.numel() < slots:
            gen = torch.Generator().manual_seed(self._seed * 1009 + 7)
            have = self._slots[key] = _odd(max(slots, 16), gen).to(device)
        return have[:slots]

    def _keep(self, split: str, unit: str, hashes: np.ndarray) -> np.ndarray:
        """The hashes of `split`'s `unit` not kept before that its threshold admits (writer
        thread); at the unit's first batch every such hash, repeats included."""
        key = (split, unit)
        first = key not in self._kept
        kept = self._kept.setdefault(key, set())
        threshold = self._threshold.setdefault(key, 1 << HASH_BITS)
        admitted = hashes[hashes < threshold]
        fresh = np.unique(admitted)  # once the sample is full, a few rows
        new = [h for h in fresh.tolist() if h not in kept]
        kept.update(new)
        while len(kept) > self.limit:
            threshold //= 2
            kept.difference_update([h for h in kept if h >= threshold])
        self._threshold[key] = threshold
        if first:
            return admitted[admitted < threshold]
        return np.array([h for h in new if h < threshold], dtype=np.int64)


def _odd(n: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(1, 1 << 62, (n,), generator=gen, dtype=torch.int64) * 2 + 1


def _mix(hashes: Any) -> Any:
    """The summed row products of an int64 array or tensor, mixed and kept to HASH_BITS."""
    hashes = hashes ^ (hashes >> 31)
    hashes = hashes * -7046029254386353131  # 0x9E3779B97F4A7C15 as an int64
    return (hashes ^ (hashes >> 29)) & _MASK
