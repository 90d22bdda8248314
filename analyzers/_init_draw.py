"""What a module's default random initialization draws: whether summarized values (numel,
mean, std, min, max, abs_mean) read as a fresh i.i.d. draw centred on 0 -- a uniform law of any
bound, or the normal law of a module's default scale. frozen-parameters judges a layer frozen
with requires_grad=False by it, and _left_out a "backbone" left out of every optimizer: a
pretrained layer does not look like a fresh draw.

Pure helpers; no rule lives here.
"""
from __future__ import annotations

import math

from tracelab.analyzers._dynamics import fmt, layer_of
from tracelab.core.run import Run
from tracelab.core.schema import ACTIVATION, WEIGHT


def init_scales(kind: str | None) -> list[float]:
    """The standard deviations of the normal law the default initialization of a module of
    this type draws its weights from: N(0, 1) for an Embedding. (Linear, Conv and the
    recurrent layers draw uniformly.)"""
    return [1.0] if kind == "Embedding" else []


def random_draw(v: dict, scales: list[float], z: float, min_values: int) -> str | None:
    """How the values summarized in `v` (numel, mean, std, min, max, abs_mean) look drawn,
    i.i.d. and centred on 0, from a uniform law (Linear's and Conv's default within
    1/sqrt(fan_in), xavier's, kaiming's, any bound) or from a normal law of one of the
    default `scales`, each statistic within `z` standard errors (or a 1e-6 chance for the
    extremes) of that law's; None when they do not, or are too few to tell. A normal law
    needs its module's default scale: training with small steps spreads weights normally
    too (a briefly pretrained layer), never into a sharp-edged uniform."""
    try:
        n, mean, std, lo, hi, absm = (float(v[k]) for k in (
            "numel", "mean", "std", "min", "max", "abs_mean"))
    except (KeyError, TypeError, ValueError):
        return None
    if not (n >= min_values and all(map(math.isfinite, (mean, std, lo, hi, absm))) and std > 0
            and lo < 0 < hi) or abs(mean) > z * std / math.sqrt(n):
        return None
    log_p = math.log(1e-6)
    bound = max(hi, -lo)
    gap = 1 - min(hi, -lo) / bound  # the nearer extreme's distance to the bound, relative
    slack = 30 / n  # the bound read off the sample's extreme falls short by about bound / n
    if n * math.log1p(-gap / 2) >= log_p and \
            abs(std * math.sqrt(3) / bound - 1) <= z * 0.45 / math.sqrt(n) + slack and \
            abs(2 * absm / bound - 1) <= z * 0.58 / math.sqrt(n) + slack:
        return f"uniform within +-{fmt(bound)}"
    if any(abs(std / scale - 1) <= z / math.sqrt(2 * n) for scale in scales) and \
            abs(absm / std - math.sqrt(2 / math.pi)) <= z * 0.22 / math.sqrt(n) and \
            all(log_p <= log_cdf_max(x / std, n) <= math.log1p(-1e-6) for x in (hi, -lo)):
        return f"normal of std {fmt(std)}"
    return None


def log_cdf_max(x: float, n: float) -> float:
    """log P(the largest of n standard normal draws <= x)."""
    tail = 0.5 * math.erfc(x / math.sqrt(2))  # P(one draw > x), exact far into the tail
    return n * math.log1p(-tail) if tail < 1 else -math.inf


def drawn_at_start(run: Run, names: list[str], z: float = 5.0, min_values: int = 1000) -> list[str]:
    """Those of `names` whose first recorded weight statistics read as their module's default
    random initialization (`random_draw` with `init_scales` of the module's type). A name
    without a full first recording is not among them; never raises."""
    try:
        stats = {k: run.stat(WEIGHT, k) for k in (
            "numel", "mean", "std", "min", "max", "abs_mean")}
        types = run.module_types()
    except Exception:  # malformed trace: nothing to say
        return []
    found = []
    for name in names:
        try:
            first = {k: frame[name].dropna().iloc[0] for k, frame in stats.items()}
        except (KeyError, IndexError):
            continue
        if random_draw(first, init_scales(types.get(layer_of(name))), z, min_values):
            found.append(name)
    return found


def keeps_information(kind: str | None, shape) -> bool:
    """Whether a layer of this module type whose parameter of this shape is a fixed random
    draw keeps the information of its input, so that the layers after it can learn from its
    output (a random feature map): a Linear at least as wide as its input (a random matrix
    with out_features >= in_features has full column rank), an Embedding -- a Linear on the
    one-hot token -- with no more rows than dimensions, a convolution with at least as many
    output channels as values in one input patch, and the bias of such a layer (an offset).
    A bottleneck (fewer outputs than inputs) loses what the draw happens to project away; other
    module types (recurrent, attention) are not judged: False."""
    try:
        dims = [int(d) for d in shape]
    except (TypeError, ValueError):
        return False
    kind = str(kind or "")
    if not dims or any(d <= 0 for d in dims):
        return False
    if kind == "Embedding":
        return len(dims) == 2 and dims[0] <= dims[1]
    if not (kind.endswith("Linear") or kind in ("Conv1d", "Conv2d", "Conv3d")):
        return False
    if len(dims) == 1:
        return True  # a bias: an offset of the output
    return dims[0] >= math.prod(dims[1:])


def read_after(run: Run, name: str, trained: list[str]) -> bool:
    """Whether some module holding one of the `trained` parameters runs after the module of
    parameter `name` (in the order of the forward pass's calls, the activations', else of the
    model's parameters): the frozen layer is not the output layer, something learns from it."""
    try:
        calls = {m: i for i, m in enumerate(run.names(ACTIVATION))}
        module, later = layer_of(name), {layer_of(n) for n in trained}
        if module in calls and any(m in calls for m in later):
            return any(calls[m] > calls[module] for m in later if m in calls)
        order = list(run.parameters())
        return name in order and any(order.index(n) > order.index(name)
                                     for n in trained if n in order)
    except Exception:  # malformed trace: nothing to say
        return False
