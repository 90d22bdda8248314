"""Weight, grad and update statistics of a model's trainable parameters, in torch's own ops.

The update is the weight after `optimizer.step()` minus the weight before it, so `snapshot()`
runs in the optimizer's step pre-hook, on the steps that record updates only: one
`torch._foreach_copy_` of every parameter into buffers kept from one such step to the next.
`record()` after the step reduces the weights, the grads and the updates (the snapshot turned
into the weights before minus after in place, whose statistics are negated on the host: no
allocation on devices, no extra pass) with the fused reductions of stats.py,
which join the step's packed copy; on a step that records only the grads' norms, one
`_foreach_norm` does. `end_step()` says whether the step took its snapshot, and starts the
next one without.

A DTensor parameter (FSDP2's `fully_shard`, tensor parallelism) and its grad are read as this
rank's local shard (`to_local()`): each rank records the statistics of its shard, and the
reader merges the shards named by meta.json's `sharded_parameters` (`sharded_names`).
"""
from __future__ import annotations

import numpy as np
import torch

from tracelab.recorders.stats import (RAW, dense_equivalent, finish, norms, raw_stats)
from tracelab.recorders.transfer import StepRecord
from tracelab.core.schema import GRAD, TENSORS, UPDATE, WEIGHT

RAW_SUM, RAW_MAX, RAW_NEGMIN = RAW.index("sum"), RAW.index("max"), RAW.index("negmin")

try:
    from torch.distributed.tensor import DTensor
except ImportError:  # a torch build without torch.distributed has no DTensor
    DTensor = ()  # type: ignore[assignment,misc]


class ParameterStats:
    """The statistics rows of `tracked` ((name, parameter) pairs) at recorded steps."""

    def __init__(self, tracked: list[tuple[str, torch.nn.Parameter]]):
        self.tracked = tracked
        self._taken = False  # the step in progress has its snapshot
        self._snapshot: list[torch.Tensor] = []  # the weights before the step, then the update
        self._layout: list[tuple] = []  # (shape, dtype, device) of each snapshot buffer

    def snapshot(self) -> None:
        """Keep the weights as they are before the optimizer step (its pre-hook); once a step,
        so that an optimizer stepping twice in one step keeps the weights of its start."""
        if self._taken:
            return
        with torch.no_grad():  # the optimizer's pre-hooks run with autograd on
            params = _held([local(p).detach() for _, p in self.tracked])
            layout = [(p.shape, p.dtype, p.device) for p in params]
            if layout != self._layout:  # a parameter replaced, resized or moved
                self._snapshot = [torch.empty_like(p) for p in params]
                self._layout = layout
            if params:
                torch._foreach_copy_(self._snapshot, params)
        self._taken = True

    def end_step(self) -> bool:
        """Whether the step that ends took its snapshot; the next one starts without."""
        taken, self._taken = self._taken, False
        return taken

    def record(self, step: int, record: StepRecord, weights: bool, updates: bool,
               grads: bool = True, norms_only: bool = False) -> None:
        """Reduce now, and add the rows to `record` (they join the step's packed copy).
        weights: the weights' rows; updates: the step took its snapshot (end_step), and their
        rows are added with the weights'. grads: the grads' full statistics; norms_only: else
        their norms (rows whose other statistics are null)."""
        updates = updates and weights and bool(self.tracked)
        params = _held([local(p).detach() for _, p in self.tracked]) if weights else []
        named = [(n, local(p.grad)) for n, p in self.tracked if p.grad is not None] \
            if grads or norms_only else []
        grad_names = [n for n, _ in named]
        # A sparse grad's statistics are those of a dense stand-in, its size the grad's own.
        grad_tensors = [dense_equivalent(g).detach() for _, g in named]
        grad_sizes = [g.numel() for _, g in named]
        weight_names = [n for n, _ in self.tracked] if weights else []
        weight_sizes = [p.numel() for p in params]
        full, names = list(params), list(weight_names)
        kinds, sizes = [WEIGHT] * len(params), list(weight_sizes)
        if grads:
            full += grad_tensors
            names += grad_names
            kinds += [GRAD] * len(named)
            sizes += grad_sizes
        flipped = slice(0, 0)  # the rows of before - after: the update with its sign flipped
        if updates and self._layout == [(p.shape, p.dtype, p.device) for p in params]:
            torch._foreach_sub_(self._snapshot, params)
            flipped = slice(len(full), len(full) + len(params))
            full += self._snapshot
            names += weight_names
            kinds += [UPDATE] * len(params)
            sizes += weight_sizes
        if full:
            numel = np.array(sizes, dtype=np.int64)

            def rows(values: list[np.ndarray]) -> list[tuple[str, dict]]:
                raw = values[0].reshape(len(names), -1)
                if flipped.stop:  # negated on the host, not in a pass over every value
                    raw = raw.copy()
                    raw[flipped, RAW_SUM] *= -1
                    raw[flipped, RAW_MAX], raw[flipped, RAW_NEGMIN] = \
                        raw[flipped, RAW_NEGMIN].copy(), raw[flipped, RAW_MAX].copy()
                cols = finish(raw, numel)
                cols.update(step=np.full(len(names), step, dtype=np.int64), kind=kinds,
                            name=names)
                return [(TENSORS, cols)]
            record.add(rows, (raw_stats(full),))
        if named and norms_only and not grads:
            grad_numel = np.array(grad_sizes, dtype=np.int64)

            def norm_rows(values: list[np.ndarray]) -> list[tuple[str, dict]]:
                n = len(grad_names)
                return [(TENSORS, {"step": np.full(n, step, dtype=np.int64), "kind": [GRAD] * n,
                                   "name": grad_names, "numel": grad_numel, "norm": values[0]})]
            record.add(norm_rows, (norms(grad_tensors),))

    def sharded_names(self) -> list[str]:
        """Names of the parameters recorded as this rank's shard: DTensors sharded on every mesh
        dimension, so that each element lies on one rank (FSDP2). A fully replicated DTensor's
        local tensor is the whole parameter, read like a DDP replica; HSDP's is not merged."""
        return [n for n, p in self.tracked if isinstance(p, DTensor)
                and all(placement.is_shard() for placement in p.placements)]


def _held(params: list[torch.Tensor]) -> list[torch.Tensor]:
    """params, or ValueError where one's memory was freed (FSDP frees an unsharded
    parameter's storage, and the tensor keeps its shape): torch's fused ops would read it."""
    for p in params:
        if p.untyped_storage().nbytes() == 0 and p.numel():
            raise ValueError(f"a parameter of shape {tuple(p.shape)} has no memory (freed)")
    return params


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a DTensor (a sharded parameter or its grad); t itself otherwise."""
    return t.to_local() if isinstance(t, DTensor) else t
