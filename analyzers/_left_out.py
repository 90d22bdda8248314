"""Parameters no optimizer holds: whether they are a backbone frozen on purpose by leaving it
out of the optimizer (param-not-in-optimizer, frozen-parameters). A backbone frozen on purpose
holds pretrained weights; one that still reads as its modules' default random draw (an encoder
forgotten when the optimizer was built from the decoder) is left out by mistake."""
from __future__ import annotations

import numpy as np

from tracelab.analyzers._dynamics import layer_of
from tracelab.analyzers._init_draw import drawn_at_start
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
    it out: half or more of the trainable elements, all running before the optimized ones,
    and none of their weights reading as its module's default random initialization at the
    first recording (`drawn_at_start`: a pretrained backbone is no fresh draw)."""
    inside = [n for n in trainable if info.get(n, {}).get("in_optimizer") is True]
    try:
        return bool(left) and bool(inside) and share(info, left, trainable) >= 0.5 and \
            runs_first(run, left, inside, list(info)) and not drawn_at_start(run, left)
    except (ValueError, TypeError):  # a name missing from the model summary
        return False
