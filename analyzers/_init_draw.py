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
from tracelab.core.schema import WEIGHT


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
