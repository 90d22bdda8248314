"""Parameters no optimizer holds: whether they are a backbone frozen on purpose by leaving it
out of the optimizer (param-not-in-optimizer, frozen-parameters)."""
from __future__ import annotations

import numpy as np

from tracelab.analyzers._dynamics import layer_of
from tracelab.core.run import Run
from tracelab.core.schema import ACTIVATION


def share(info: dict, names: list[str], of: list[str]) -> float:
    """The share of the elements of parameters `of` that `names` hold."""
    def size(n: str) -> int:
        return int(np.prod(info[n].get("shape") or [1]))
    total = sum(size(n) for n in of)
    return sum(size(n) for n in names) / total if total else 0.0


def runs_first(run: Run, left: list[str], inside: list[str], order: list[str]) -> bool:
    """Whether every module left out runs before every optimized one: in the order of the
    forward pass's calls (the activations'), else of the model's parameters."""
    calls = {m: i for i, m in enumerate(run.names(ACTIVATION))}
    out, opt = {layer_of(n) for n in left}, {layer_of(n) for n in inside}
    if calls and all(m in calls for m in out | opt):
        return max(calls[m] for m in out) < min(calls[m] for m in opt)
    return max(order.index(n) for n in left) < min(order.index(n) for n in inside)


def frozen_backbone(run: Run, info: dict, left: list[str], trainable: list[str]) -> bool:
    """Whether the parameters `left` out of every optimizer are a backbone frozen by leaving
    it out: half or more of the trainable elements, all running before the optimized ones."""
    inside = [n for n in trainable if info.get(n, {}).get("in_optimizer") is True]
    try:
        return bool(left) and bool(inside) and share(info, left, trainable) >= 0.5 and \
            runs_first(run, left, inside, list(info))
    except (ValueError, TypeError):  # a name missing from the model summary
        return False
