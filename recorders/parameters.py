"""Weight, grad and update statistics of a model's trainable parameters.

The update is the weight after `optimizer.step()` minus the weight before it, so `snapshot()`
runs in the optimizer's step pre-hook and `record()` after the step; `end_step()` says whether
the step took its snapshot, and starts the next one without.

On the CPU, when every parameter and grad is a contiguous tensor of one float dtype, the
compiled kernels do it all in two calls: `gather` copies the weights before the step into one
flat array, and `tensor_stats` reads every weight, grad and snapshot where they lie. Otherwise
(devices, mixed dtypes, other layouts) the snapshot is one copy per parameter on its device and
the statistics are fused torch reductions that join the step's packed copy.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from tracelab.recorders import kernel_loader
from tracelab.recorders.stats import RAW, dense_equivalent, finish, raw_stats
from tracelab.recorders.transfer import StepRecord
from tracelab.core.schema import GRAD, TENSORS, UPDATE, WEIGHT

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
        self._layout_key: list[tuple] | None = None  # what _param_layout last checked
        self._layout: Layout | None = None
        self._total = 0  # the parameters' elements

    def snapshot(self) -> None:
        """Keep the weights as they are before the optimizer step (its pre-hook); once a step,
        so that an optimizer stepping twice in one step keeps the weights of its start."""
        if self._taken:
            return
        params = [p for _, p in self.tracked]  # read in place or copied: autograd never sees it
        layout = self._param_layout(params)
        if layout is not None:
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
        self._taken = True

    def end_step(self) -> bool:
        """Whether the step that ends took its snapshot; the next one starts without."""
        taken, self._taken = self._taken, False
        return taken

    def record(self, step: int, record: StepRecord, updates: bool) -> None:
        """Reduce now, and add the rows to `record`: device reductions join the step's packed
        copy. updates: the step took its snapshot (end_step)."""
        updates = updates and bool(self.tracked)
        # Few calls per tensor: inside a training loop each one costs microseconds.
        params = [p for _, p in self.tracked]
        grads = [(n, p.grad) for n, p in self.tracked if p.grad is not None]
        weight_names = [n for n, _ in self.tracked]
        names = weight_names + [n for n, _ in grads] + (weight_names if updates else [])
        kinds = [WEIGHT] * len(params) + [GRAD] * len(grads) + [UPDATE] * len(params) * updates
        if not names:
            return
        grad_tensors = [dense_equivalent(g) for _, g in grads]
        numel = [t.numel() for t in params + [g for _, g in grads] + params * updates]
        weights, gradients = self._param_layout(params), host_layout(grad_tensors)
        dtypes = {x.dtype for x in (weights, gradients) if x is not None and x.dtype is not None}
        snapshot = self._snapshot
        if weights is not None and gradients is not None and len(dtypes) <= 1 and (
                not updates or isinstance(snapshot, np.ndarray) and dtypes == {snapshot.dtype}):
            raw = np.empty((len(names), len(RAW)))
            dtype = dtypes.pop() if dtypes else np.dtype(np.float32)
            before = snapshot if updates else _NO_VALUES[dtype]
            kernel_loader.kernels().tensor_stats(weights.table, gradients.table, before, raw)
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
        """host_layout of the parameters, checked in full again only when one of them changes
        address, size, dtype or contiguity (`p.data = ...`): the kernels read the memory a
        Layout names, so it must never outlive the tensors' shapes."""
        key = [(p.data_ptr(), p.numel(), p.dtype, p.is_contiguous()) for p in params]
        if key != self._layout_key:
            self._layout_key, self._layout = key, host_layout(params)
            self._total = int(self._layout.table[:, 1].sum()) if self._layout else 0
        return self._layout

    def _deltas(self, params: list[torch.Tensor]) -> list[torch.Tensor]:
        """The updates (after minus before) as tensors, for reductions in torch."""
        if isinstance(self._snapshot, np.ndarray):  # taken by numba_kernels.gather
            olds = torch.from_numpy(self._snapshot).split([p.numel() for p in params])
            return [p - old.view_as(p) for p, old in zip(params, olds)]
        # The per-parameter snapshot becomes the update in place: no allocation on devices.
        torch._foreach_sub_(self._snapshot, params)
        torch._foreach_neg_(self._snapshot)
        return self._snapshot


def host_layout(tensors: list[torch.Tensor]) -> Layout | None:
    """The Layout of tensors that are all contiguous CPU tensors of one float dtype, which the
    kernels read in place; else None."""
    dtype = tensors[0].dtype if tensors else None
    if tensors and dtype not in _KERNEL_DTYPES or kernel_loader.kernels() is None:
        return None
    for t in tensors:
        if not t.is_cpu or t.dtype != dtype or t.layout != torch.strided \
                or not t.is_contiguous():
            return None
    table = np.array([(t.data_ptr(), t.numel()) for t in tensors], dtype=np.int64)
    return Layout(table.reshape(-1, 2), _KERNEL_DTYPES.get(dtype))


_NO_VALUES = {dtype: np.empty(0, dtype) for dtype in _KERNEL_DTYPES.values()}
