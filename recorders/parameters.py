"""Weight, grad and update statistics of a model's trainable parameters.

The update is the weight after `optimizer.step()` minus the weight before it, so `snapshot()`
runs in the optimizer's step pre-hook and `record()` after the step; `end_step()` says whether
the step took its snapshot, and starts the next one without.

On the CPU, when every parameter and grad is a plain contiguous tensor of one float dtype, the
compiled kernels do it all in two calls: `gather` copies the weights before the step into one
flat array, and `tensor_stats` reads every weight, grad and snapshot where they lie. When the
next step records weights too, that pass also leaves the snapshot holding the weights it read
(`record(keep=True)`), and the next pre-hook copies nothing if the weights are still those:
the same parameters at the same addresses, each with the autograd version it had (any in-place
change through the parameter moves it), and equal values at probes spread over each tensor
(8 to 32 a tensor, 2,048 in all), for writes autograd does not count (through `.data` or
numpy). Such a write to a small share of a tensor's values between a step's record and the
next optimizer step (a codebook's dead rows reset, a few weights pruned) can escape the
probes; it then counts in the next update, which is still the weight's change between two
recorded states. Otherwise (devices, mixed dtypes, other layouts, tensor subclasses) the
snapshot is one copy per parameter on its device and the statistics are fused torch reductions
that join the step's packed copy.

A DTensor parameter (FSDP2's `fully_shard`, tensor parallelism) and its grad are read as this
rank's local shard (`to_local()`): each rank records the statistics of its shard, and the
reader merges the shards named by meta.json's `sharded_parameters` (`sharded_names`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from tracelab.recorders import kernel_loader
from tracelab.recorders.stats import RAW, dense_equivalent, finish, raw_stats
from tracelab.recorders.transfer import StepRecord
from tracelab.core.schema import GRAD, TENSORS, UPDATE, WEIGHT

try:
    from torch.distributed.tensor import DTensor
except ImportError:  # a torch build without torch.distributed has no DTensor
    DTensor = ()  # type: ignore[assignment,misc]

_KERNEL_DTYPES = {torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64)}


class Layout(NamedTuple):
    """Tensors as the kernels read them: (address, size) rows of one dtype."""
    table: np.ndarray
    dtype: np.dtype | None  # None: no tensors


class ParameterStats:
    """The statistics rows of `tracked` ((name, parameter) pairs) at recorded steps."""

    def __init__(self, tracked: list[tuple[str, torch.nn.Parameter]]):
        self.tracked = tracked
        self._taken = False  # the step in progress has its snapshot
        # The weights before the step: a flat array (numba_kernels.gather), or a copy per parameter.
        self._snapshot: np.ndarray | list[torch.Tensor] | None = None
        self._weights = _LayoutCache()
        self._grads = _LayoutCache()
        self._total = 0  # the parameters' elements
        # (layout key, autograd versions) of the weights the last record left in the snapshot
        self._kept: tuple[list[tuple], list[int]] | None = None

    def snapshot(self) -> None:
        """Keep the weights as they are before the optimizer step (its pre-hook); once a step,
        so that an optimizer stepping twice in one step keeps the weights of its start."""
        if self._taken:
            return
        with torch.no_grad():  # the optimizer's pre-hooks run with autograd on
            self._snapshot_now()
        self._taken = True

    def _snapshot_now(self) -> None:
        params = [local(p) for _, p in self.tracked]  # read in place or copied
        layout = self._param_layout(params)
        kept, self._kept = self._kept, None
        if layout is not None:
            if kept is not None and self._still_kept(kept, params, layout):
                return
            # Few numpy calls: inside a training loop each costs tens of microseconds.
            if not isinstance(self._snapshot, np.ndarray) or len(self._snapshot) != self._total \
                    or self._snapshot.dtype != layout.dtype:
                self._snapshot = np.empty(self._total, layout.dtype)
            kernel_loader.kernels().gather(layout.table, self._snapshot)
        elif params:
            params = [p.detach() for p in params]
            if not isinstance(self._snapshot, list):
                self._snapshot = [torch.empty_like(p) for p in params]
            torch._foreach_copy_(self._snapshot, params)

    def end_step(self) -> bool:
        """Whether the step that ends took its snapshot; the next one starts without."""
        taken, self._taken = self._taken, False
        return taken

    def _still_kept(self, kept: tuple[list[tuple], list[int]], params: list[torch.Tensor],
                    layout: Layout) -> bool:
        """Whether the snapshot the last record kept still holds these weights."""
        key, versions = kept
        if key is not self._weights.key or [p._version for p in params] != versions:
            return False
        probes = max(8, min(32, 2048 // max(len(params), 1)))  # each one a cache miss
        return bool(kernel_loader.kernels().unchanged(layout.table, self._snapshot, probes))

    def record(self, step: int, record: StepRecord, weights: bool, updates: bool,
               keep: bool = False) -> None:
        """Reduce now, and add the rows to `record`: device reductions join the step's packed
        copy. weights: the weights' rows too, besides the grads'; updates: the step took its
        snapshot (end_step), and their rows are added with the weights'. keep: the next step
        records weights, so the kernels' pass over the updates leaves the snapshot in place."""
        self._kept = None
        updates = updates and weights and bool(self.tracked)
        # Few calls per tensor: inside a training loop each one costs microseconds.
        params = [local(p) for _, p in self.tracked] if weights else []
        grads = [(n, local(p.grad)) for n, p in self.tracked if p.grad is not None]
        weight_names = [n for n, _ in self.tracked] if weights else []
        names = weight_names + [n for n, _ in grads] + (weight_names if updates else [])
        kinds = [WEIGHT] * len(params) + [GRAD] * len(grads) + [UPDATE] * len(params) * updates
        if not names:
            return
        grad_tensors = [dense_equivalent(g) for _, g in grads]
        numel = [t.numel() for t in params + [g for _, g in grads] + params * updates]
        layout = self._param_layout(params) if params else _NO_TENSORS
        gradients = self._grads.get(grad_tensors)
        dtypes = {x.dtype for x in (layout, gradients) if x is not None and x.dtype is not None}
        snapshot = self._snapshot
        if layout is not None and gradients is not None and len(dtypes) <= 1 and (
                not updates or isinstance(snapshot, np.ndarray) and dtypes == {snapshot.dtype}
                and len(snapshot) == self._total):
            raw = np.empty((len(names), len(RAW)))
            dtype = dtypes.pop() if dtypes else np.dtype(np.float32)
            before = snapshot if updates else _NO_VALUES[dtype]
            # Without this step's snapshot (no optimizer step ran) there is nothing to keep:
            # the next pre-hook copies, as early a copy here would not be cheaper.
            keep = keep and updates
            kernel_loader.kernels().tensor_stats(layout.table, gradients.table, before, raw,
                                                 keep)
            if keep:
                self._kept = (self._weights.key, [p._version for p in params])
            packed: tuple[torch.Tensor, ...] = ()
        else:
            raw = None
            tensors = [t.detach() for t in params + grad_tensors]
            if updates:
                tensors += self._deltas(tensors[:len(params)])
            packed = (raw_stats(tensors),)

        def rows(values: list[np.ndarray]) -> list[tuple[str, dict]]:
            found = raw if raw is not None else values[0].reshape(len(names), -1)
            cols = finish(found, np.array(numel, dtype=np.int64))
            cols.update(step=np.full(len(names), step, dtype=np.int64), kind=kinds, name=names)
            return [(TENSORS, cols)]
        record.add(rows, packed)

    def _param_layout(self, params: list[torch.Tensor]) -> Layout | None:
        """The parameters' Layout, and their element count when the kernels read them."""
        layout = self._weights.get(params)
        self._total = self._weights.total
        return layout

    def sharded_names(self) -> list[str]:
        """Names of the parameters recorded as this rank's shard: DTensors sharded on every mesh
        dimension, so that each element lies on one rank (FSDP2). A fully replicated DTensor's
        local tensor is the whole parameter, read like a DDP replica; HSDP's is not merged."""
        return [n for n, p in self.tracked if isinstance(p, DTensor)
                and all(placement.is_shard() for placement in p.placements)]

    def _deltas(self, params: list[torch.Tensor]) -> list[torch.Tensor]:
        """The updates (after minus before) as tensors, for reductions in torch."""
        if isinstance(self._snapshot, np.ndarray):  # taken by numba_kernels.gather
            olds = torch.from_numpy(self._snapshot).split([p.numel() for p in params])
            return [p - old.view_as(p) for p, old in zip(params, olds)]
        # The per-parameter snapshot becomes the update in place: no allocation on devices.
        torch._foreach_sub_(self._snapshot, params)
        torch._foreach_neg_(self._snapshot)
        return self._snapshot


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a DTensor (a sharded parameter or its grad); t itself otherwise."""
    return t.to_local() if isinstance(t, DTensor) else t


class _LayoutCache:
    """host_layout of a list of tensors, checked in full again only when one of them changes
    type, address, size, dtype, contiguity or storage (`p.data = ...`, a new grad): the kernels
    read the memory a Layout names, so it must never outlive the tensors it was checked on."""

    def __init__(self) -> None:
        self._key: list[tuple] | None = None  # a new list whenever the layout is checked anew
        self._layout: Layout | None = None
        self.total = 0  # the elements the layout names

    def get(self, tensors: list[torch.Tensor]) -> Layout | None:
        try:
            key = [_key(t) for t in tensors]
        except Exception:  # a tensor without storage (a subclass): never read by address
            self._key, self._layout, self.total = None, None, 0
            return None
        if key != self._key:
            self._key, self._layout = key, host_layout(tensors, key)
            # In Python: inside a step each numpy call costs tens of microseconds.
            self.total = sum(k[1] for k in key) if self._layout else 0
        return self._layout

    @property
    def key(self) -> list[tuple] | None:
        """The keys the layout was last checked on: the same object until one changes."""
        return self._key


def _key(t: torch.Tensor) -> tuple:
    """What a Layout rests on: (address, numel, dtype, contiguity, storage offset, storage
    address, storage bytes) of a plain tensor; a subclass is refused whatever it says."""
    if type(t) not in _PLAIN:
        return (type(t),)
    storage = t.untyped_storage()
    return (t.data_ptr(), t.numel(), t.dtype, t.is_contiguous(), t.storage_offset(),
            storage.data_ptr(), storage.nbytes())


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def host_layout(tensors: list[torch.Tensor], keys: list[tuple] | None = None) -> Layout | None:
    """The Layout of tensors that the kernels may read in place, else None: all of them plain
    dense contiguous CPU tensors of one float dtype, each within its own storage. keys: their
    `_key`s, when the caller has them (each attribute read costs microseconds in a step).

    A subclass can say anything of its size and memory (a DTensor's numel is the global one,
    its memory the local shard), so only the exact types are read by address; the rest take
    the torch path, which asks the tensor itself."""
    dtype = tensors[0].dtype if tensors else None
    if tensors and dtype not in _KERNEL_DTYPES or kernel_loader.kernels() is None:
        return None
    try:
        keys = keys if keys is not None else [_key(t) for t in tensors]
        if not all(_readable(t, k, dtype) for t, k in zip(tensors, keys)):
            return None
    except Exception:  # whatever a tensor cannot answer, the torch path reads it
        return None
    if not keys:
        return _NO_TENSORS
    return Layout(np.array([k[:2] for k in keys], dtype=np.int64), _KERNEL_DTYPES[dtype])


def _readable(t: torch.Tensor, key: tuple, dtype: torch.dtype) -> bool:
    """Whether numel values of t lie at data_ptr, inside the memory its storage holds (key:
    its `_key`)."""
    if len(key) == 1 or not t.is_cpu or key[2] != dtype or t.layout != torch.strided \
            or not key[3] or t.is_neg() or t.is_conj():
        return False
    ptr, numel, _, _, offset, start, nbytes = key
    if numel == 0:  # nothing is read
        return True
    size = dtype.itemsize
    return offset >= 0 and ptr == start + offset * size and nbytes >= (offset + numel) * size


_NO_TENSORS = Layout(np.empty((0, 2), np.int64), None)
_NO_VALUES = {dtype: np.empty(0, dtype) for dtype in _KERNEL_DTYPES.values()}
