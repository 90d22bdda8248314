"""What enters the loss: facts of the outputs given to `step(outputs=...)` or `log(outputs=...)`.

Each broken contract of a loss is visible in its inputs and not in its value: softmax rows given
to `cross_entropy` (rows in [0, 1] summing to 1), logits given to `nll_loss` (rows that are not
log-probabilities), a sigmoid output given to `BCEWithLogitsLoss` (every value in [0, 1]), an
`(N, 1)` prediction against an `(N,)` target (they broadcast to `(N, N)`). On a profiled step
the facts are a few torch reductions on the outputs' device, stacked into one tensor that joins
the step's packed copy (no host sync); shapes and dtypes are known on the host and go to
meta.json's `outputs` when they change. At most MAX_ROWS rows and MAX_VALUES values are read
(the first ones): a language model's rows of 50,000 logits are read 20 at a time.

The rows' class dimension is dim 1 (the last one of a 2-D output); a 1-D output has none, and
its row facts are NaN. The signals rows (schema.OUTPUT_SIGNALS):
    outputs/numel, outputs/classes   elements and size of the class dimension (1 when none)
    outputs/min, outputs/max         the range of the rows read
    outputs/unit_rows                share of rows whose every value lies in [0, 1]
    outputs/row_sum_error            max |sum of a row - 1|
    outputs/logsumexp_error          max |logsumexp of a row|: 0 for log-probability rows
    outputs/broadcast                1 when outputs and targets broadcast to a larger shape
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np
import torch

from tracelab.recorders.profile import dtype_name
from tracelab.recorders.transfer import StepRecord
from tracelab.core.schema import (OUTPUT_BROADCAST, OUTPUT_CLASSES, OUTPUT_LOGSUMEXP, OUTPUT_MAX,
                                  OUTPUT_MIN, OUTPUT_NUMEL, OUTPUT_ROW_SUM, OUTPUT_UNIT_ROWS,
                                  SIGNALS)

MAX_ROWS = 4096
MAX_VALUES = 1 << 20  # 8 MB as float64
_DEVICE_FACTS = (OUTPUT_MIN, OUTPUT_MAX, OUTPUT_UNIT_ROWS, OUTPUT_ROW_SUM, OUTPUT_LOGSUMEXP)


def output_tensor(outputs: Any) -> torch.Tensor | None:
    """The tensor the loss reads: `outputs` itself, a mapping's "logits" (a Hugging Face
    model output), or the first tensor of a tuple."""
    if isinstance(outputs, Mapping):
        outputs = outputs.get("logits", next(iter(outputs.values()), None))
    elif isinstance(outputs, (tuple, list)):
        outputs = next((o for o in outputs if isinstance(o, torch.Tensor)), None)
    return outputs if isinstance(outputs, torch.Tensor) else None


def output_facts(x: torch.Tensor) -> torch.Tensor:
    """_DEVICE_FACTS of one output tensor, float64 on its device."""
    x = x.detach()
    if x.dim() >= 2:  # (N, C, ...): rows along dim 1
        per_sample = max(math.prod(x.shape[1:]), 1)
        samples = max(1, min(MAX_ROWS, MAX_VALUES // per_sample))
        rows = x[:samples].movedim(1, -1).reshape(-1, x.shape[1])
        rows = rows[:max(1, min(MAX_ROWS, MAX_VALUES // max(x.shape[1], 1)))]
    else:
        rows = x.reshape(-1, 1)[:MAX_ROWS]
    rows = rows.to(torch.float64)
    unit = ((rows >= 0) & (rows <= 1)).all(dim=1).to(torch.float64).mean()
    if x.dim() >= 2:
        row_sum = (rows.sum(dim=1) - 1).abs().amax()
        logsumexp = rows.logsumexp(dim=1).abs().amax()
    else:
        row_sum = logsumexp = torch.full((), math.nan, dtype=torch.float64, device=x.device)
    return torch.stack([rows.amin(), rows.amax(), unit, row_sum, logsumexp])


def broadcasts(outputs: torch.Tensor, targets: torch.Tensor) -> bool:
    """Whether the two shapes broadcast to more elements than either has (the `(N, 1)` against
    `(N,)` mistake); shapes that cannot broadcast are not this case."""
    try:
        shape = torch.broadcast_shapes(outputs.shape, targets.shape)
    except RuntimeError:
        return False
    return math.prod(shape) > max(outputs.numel(), targets.numel())


class OutputFacts:
    """The outputs' facts per profiled step; on_shapes(split, shapes) hears of new shapes."""

    def __init__(self, on_shapes: Callable[[str, dict[str, Any]], None]) -> None:
        self._on_shapes = on_shapes
        self._shapes: dict[str, dict[str, Any]] = {}

    def record(self, step: int, split: str, outputs: Any, targets: Any,
               record: StepRecord) -> None:
        x = output_tensor(outputs)
        if x is None or x.numel() == 0 or x.is_complex() or x.layout != torch.strided:
            return
        target = output_tensor(targets)
        shapes = {"shape": list(x.shape), "dtype": dtype_name(x)}
        if target is not None:
            shapes.update(targets_shape=list(target.shape), targets_dtype=dtype_name(target))
        if self._shapes.get(split, {}).get("layout") != shapes:
            self._shapes[split] = {"layout": shapes}
            self._on_shapes(split, dict(shapes, step=step))
        host = {OUTPUT_NUMEL: float(x.numel()),
                OUTPUT_CLASSES: float(x.shape[1] if x.dim() >= 2 else 1)}
        if target is not None:
            host[OUTPUT_BROADCAST] = float(broadcasts(x, target))
        facts = output_facts(x) if x.is_floating_point() else output_facts(x.double())

        def rows(values: list[np.ndarray]) -> list[tuple[str, dict]]:
            found = dict(zip(_DEVICE_FACTS, values[0].tolist())) | host
            n = len(found)
            return [(SIGNALS, {"step": np.full(n, step, dtype=np.int64), "split": [split] * n,
                               "name": list(found), "value": np.array(list(found.values()))})]
        record.add(rows, [facts])
