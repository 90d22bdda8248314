"""Helpers the data rules share: per-feature profiles pooled over batches, sampled values,
descriptions of value ranges, and the expected distinct count of a smaller batch.

Pure functions over the `inputs` and `samples` tables; no rule lives here.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import fmt as number
from tracelab.analyzers._input_table import (RES_RANK, Batches, feature_rows,  # noqa: F401
                                             samples_of)
from tracelab.analyzers._profiles import (Profile, dtype_kind, feature_profiles,  # noqa: F401
                                          profile, profiles)
from tracelab.core.schema import RESOLUTIONS, unique_window

RES_NS = dict(RESOLUTIONS)
RES_WORDS = {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second",
             "min": "minute", "h": "hour", "D": "day"}


def fmt(x: float) -> str:
    """The dynamics rules' number format, with whole numbers (counts, years) in full and
    floating-point noise around zero (the mean of z-scored data) as 0."""
    x = float(x)
    if math.isfinite(x):
        if abs(x) < 1e-12:
            return "0"
        if x == int(x) and abs(x) < 1e6:
            return str(int(x))
    return number(x)


def float_bits(dtype: str) -> int:
    digits = "".join(ch for ch in str(dtype) if ch.isdigit())
    return int(digits) if digits else 64


def range_label(p: Profile) -> tuple[str | None, str]:
    """A recognisable preprocessing (a key, or None) and a short description of the values."""
    lo, hi, mean, std = p.min, p.max, p.mean, p.std
    if not all(np.isfinite([lo, hi, mean])):
        return None, "no finite values"
    if lo == hi:
        return "constant", f"constant {fmt(lo)}"
    if abs(mean) <= 0.25 and 0.7 <= std <= 1.4:
        return "zscore", "mean≈0 std≈1 (z-scored?)"
    if lo >= -0.01 and hi <= 1.01 and hi - lo >= 0.5:
        return "minmax", "in [0, 1] (min-max scaled?)"
    if lo >= -1.01 and hi <= 1.01 and lo < -0.5 and hi > 0.5:
        return "pm1", "in [-1, 1]"
    if lo >= 0 and 100 < hi <= 255 and p.int_frac >= 0.99:
        return "pixels", "in [0, 255] (raw pixel values?)"
    return None, f"mean {fmt(mean)} std {fmt(std)} in [{fmt(lo)}, {fmt(hi)}]"


def stats_text(p: Profile) -> str:
    # A mean within float32 rounding of 0 (z-scored data) reads as 0, not as -1.17e-09.
    mean = 0.0 if abs(p.mean) < 1e-6 * max(abs(p.std), abs(p.min), abs(p.max)) else p.mean
    return f"mean {fmt(mean)} std {fmt(p.std)} in [{fmt(p.min)}, {fmt(p.max)}]"


def expected_unique(u: float, c: float, m: float) -> float:
    """Distinct values a batch of m would show, for a feature showing u distinct in batches of c.

    Fits K equally likely values (u = K(1 - (1 - 1/K)^c)) and evaluates the same at m. Never
    extrapolates upwards: at m >= c it returns u, the only safe bound.
    """
    if not (u > 0 and c > 0 and m > 0):
        return 0.0
    if m >= c:
        return u
    if u >= c - 0.5:
        return m
    lo, hi = math.log(max(u, 1.0)), math.log(u) + 30.0
    for _ in range(60):
        k = math.exp((lo + hi) / 2)
        if k * (1 - (1 - 1 / k) ** c) < u:
            lo = math.log(k)
        else:
            hi = math.log(k)
    k = math.exp(hi)
    return k * (1 - (1 - 1 / k) ** m)


def expected_distinct(reference: np.ndarray, m: int) -> float:
    """Distinct values expected in m draws from a reference sample's value frequencies."""
    _, freq = np.unique(reference, return_counts=True)
    p = freq / freq.sum()
    return float(np.sum(1 - (1 - p) ** m))


# -- collapse checks (input-collapse) ------------------------------------------------------------
class Side:
    """One side of a comparison: a named set of batch rows, with its sampled values if any."""

    def __init__(self, name: str, rows: Batches, samples=None, p: Profile | None = None):
        """`samples`: the sampled values, or a callable returning them when first needed."""
        self.name, self.rows, self._samples = name, rows, samples
        self.p = p if p is not None else profile(rows)

    @property
    def samples(self) -> np.ndarray | None:
        if callable(self._samples):
            self._samples = self._samples()
        return self._samples


def _precision(dtype: str) -> float:
    kind = dtype_kind(dtype)
    if kind == "f":
        return 4 + float_bits(dtype) / 100
    return {"M": 5.0, "i": 3.0, "u": 3.0, "b": 1.0}.get(kind, 0.0)


@lru_cache(maxsize=1024)  # a few dtype pairs, asked about once per feature
def _lossy_dtype(a: str, b: str) -> bool:
    """Whether going from dtype a to dtype b loses information that matters."""
    pa, pb = _precision(a), _precision(b)
    if pb >= pa or int(pa) == int(pb) == 3:
        return False
    # float64 → float32 is routine; float32 → float16/bfloat16 is not.
    return not (int(pa) == int(pb) == 4 and float_bits(b) > 16)


def rescaled(pa: Profile, pb: Profile, *, ratio: float) -> float | None:
    """How many times one side's value range spans the other's, when that is `ratio` or more
    (raw uint8 pixels beside pixels scaled to [0, 1]: 255); None otherwise. Such values are
    the same feature on another scale, not one that lost information: train-val-mismatch's."""
    if pa.kind in "MO" or pb.kind in "MO":
        return None
    span_a, span_b = pa.max - pa.min, pb.max - pb.min
    if not (span_a > 0 and span_b > 0):  # a constant side is a collapse, whatever its value
        return None
    times = max(span_a / span_b, span_b / span_a)
    return times if times >= ratio else None


def apart(pa: Profile, pb: Profile) -> bool:
    """Whether two varying sides' value ranges do not meet (standardized train values beside
    raw validation ones): the same feature transformed differently, not one that lost
    information: rounding or truncating keeps values within the other side's range or makes
    them constant."""
    if pa.kind in "MO" or pb.kind in "MO" or not (pa.max > pa.min and pb.max > pb.min):
        return False
    return pb.min > pa.max or pa.min > pb.max


def spread_matches(pa: Profile, pb: Profile, *, tolerance: float) -> bool:
    """Whether b's values have a's mean, std and range, each within `tolerance` (of a's std for
    the mean, of a's range for its ends, as a ratio for the std). Fewer distinct values with the
    same spread are a coarser grid (raw images' 256 levels beside augmented, interpolated
    ones), not a feature that stopped varying."""
    span = pa.max - pa.min
    if not (pa.std > 0 and pb.std > 0 and span > 0):
        return False
    return (abs(pb.mean - pa.mean) <= tolerance * pa.std
            and abs(math.log(pb.std / pa.std)) <= math.log1p(2 * tolerance)
            and abs(pb.min - pa.min) <= tolerance * span
            and abs(pb.max - pa.max) <= tolerance * span)


def check_pair(a: Side, b: Side, *, factor: float, min_distinct: float, max_int_frac: float,
               chance: float) -> list[dict]:
    """How b lost information that a has: dtype, resolution, fractional parts, cardinality."""
    pa, pb, out = a.p, b.p, []
    n_b = int(np.nansum(b.rows["count"] - b.rows["nan_count"]))
    if _lossy_dtype(pa.dtype, pb.dtype):
        out.append({"kind": "dtype", "text": f"dtype {pa.dtype} → {pb.dtype}",
                    "evidence": {"dtype_before": pa.dtype, "dtype_after": pb.dtype}})
    if pa.resolution and pb.resolution and RES_RANK[pb.resolution] > RES_RANK[pa.resolution]:
        odds = (RES_NS[pa.resolution] / RES_NS[pb.resolution]) ** max(n_b, 1)
        common = (a.rows["res_rank"] >= RES_RANK[pb.resolution]).mean()
        if odds < chance and common <= 0.05:
            notes = ["every value at midnight"] if pb.resolution == "D" else []
            if pb.time_min is not None:
                notes.append(f"values from {_when(pb.time_min)} to {_when(pb.time_max)}")
            out.append({"kind": "resolution", "evidence": {
                "resolution_before": pa.resolution, "resolution_after": pb.resolution},
                "text": f"timestamp resolution {RES_WORDS[pa.resolution]} → "
                        f"{RES_WORDS[pb.resolution]}"
                        + (f" ({'; '.join(notes)})" if notes else "")})
    fb = b.rows["int_frac"]
    # A constant is trivially whole; that collapse is reported as cardinality instead.
    if (pb.kind != "M" and not pb.constant and pa.int_frac <= max_int_frac and len(fb)
            and np.isfinite(fb).all() and (fb >= 1 - 1e-9).all()
            and pa.int_frac ** n_b < chance):
        out.append({"kind": "int_frac", "evidence": {"int_frac_before": pa.int_frac,
                                                     "int_frac_after": 1.0, "values_after": n_b},
                    "text": f"share of whole numbers {pa.int_frac:.0%} → 100% of {n_b} values "
                            f"(fractional parts dropped: cast to int or rounded?)"})
    card = _cardinality(a, b, factor=factor, min_distinct=min_distinct)
    if card:
        out.append(card)
    return out


def may_collapse(pa: Profile, pb: Profile, *, factor: float, min_distinct: float,
                 max_int_frac: float, chance: float) -> bool:
    """False where `check_pair` from pa to pb certainly finds nothing, from the profiles
    alone: most pairs of a run with hundreds of features are screened out here."""
    if _lossy_dtype(pa.dtype, pb.dtype) or (pa.resolution and pb.resolution and (
            RES_RANK[pb.resolution] > RES_RANK[pa.resolution])):
        return True
    if pb.all_whole and pb.kind != "M" and not pb.constant:
        return True
    # A batch of m values is expected to show at most max(u, c) distinct values, for any m
    # (`expected_unique`); every judged ratio, hence their median, is at least this bound's.
    bound = max(_or_zero(pa.batch_unique), _or_zero(pa.batch_count), 0.0)
    return not (factor > 0 and min_distinct > 0 and (
        bound < min_distinct or pb.unique_min / bound > 1 / factor))


def may_change(p: Profile, *, min_batches: int, factor: float) -> bool:
    """False where `time_changes` on the rows `p` pools certainly finds no candidate."""
    n = p.batches
    return n >= min_batches + 1 and (
        len(p.dtypes) > 1 or 0 < p.whole_from <= n - min_batches or p.all_resolved
        or (p.ratio_batches > min_batches and not p.ratio_min * factor > p.ratio_max))


def _or_zero(x: float) -> float:
    return 0.0 if math.isnan(x) else x


def _cardinality(a: Side, b: Side, *, factor: float, min_distinct: float) -> dict | None:
    pa, pb = a.p, b.p
    u = b.rows["n_unique"]
    c = unique_window(b.rows["count"])
    sizes, at = np.unique(c, return_inverse=True)  # a few batch sizes among many batches
    expect = np.array([expected_unique(pa.batch_unique, pa.batch_count, m)
                       for m in sizes.tolist()], dtype=float)[at.reshape(-1)]
    judged = np.isfinite(u) & (expect >= min_distinct)
    if judged.sum() < max(1, len(u) / 2):
        return None
    ratio = float(np.median(u[judged] / expect[judged]))
    if ratio > 1 / factor:
        return None
    text = (f"distinct values per batch ~{fmt(pa.batch_unique)} of {fmt(pa.batch_count)} → "
            f"~{fmt(np.median(u[judged]))} of {fmt(np.median(c[judged]))}")
    evidence = {"distinct_per_batch_before": pa.batch_unique, "batch_size_before": pa.batch_count,
                "distinct_per_batch_after": float(np.median(u[judged])),
                "batch_size_after": float(np.median(c[judged]))}
    if (a.samples is not None and b.samples is not None
            and min(len(a.samples), len(b.samples)) >= 50):
        expected = expected_distinct(a.samples, len(b.samples))
        seen = len(np.unique(b.samples))
        if expected < min_distinct or seen > expected / factor:
            return None  # the split as a whole is not collapsed: batches differ only in order
        text += (f" ({seen} distinct among {len(b.samples)} sampled values, ~{fmt(expected)} "
                 f"expected)")
        evidence.update(sampled_distinct_after=seen, sampled_distinct_expected=expected)
    constant = pb.constant
    if constant:
        text += f", always {fmt(pb.min)}" if np.isfinite(pb.min) else ", a single value"
    return {"kind": "cardinality", "text": text, "evidence": evidence, "constant": constant}


def _when(t) -> str:
    t = pd.Timestamp(t)
    return str(t.date()) if t == t.normalize() else str(t)


def time_changes(rows: Batches, *, min_batches: int, factor: float, min_distinct: float,
                 max_int_frac: float, chance: float) -> list[int]:
    """Row positions from which on every batch looks collapsed compared with the batches before.

    Candidates only, earliest first; `check_pair` on the two periods decides.
    """
    n = len(rows)
    if n < min_batches + 1:
        return []
    found = set()
    dtypes = rows["dtype"]
    found.add(_final_run(dtypes == dtypes[-1]))
    found.add(_final_run(np.nan_to_num(rows["int_frac"]) >= 1 - 1e-9))
    ranks = rows["res_rank"]
    if np.isfinite(ranks).all():
        pre = np.minimum.accumulate(ranks)
        post = np.minimum.accumulate(ranks[::-1])[::-1]
        hit = np.flatnonzero(pre[:-1] < post[1:])
        if len(hit):
            found.add(int(hit[0]) + 1)
    c = unique_window(rows["count"])
    u = rows["n_unique"]
    full = np.flatnonzero((c >= max(4.0, 0.5 * float(np.median(c)))) & np.isfinite(u))
    q = u[full] / c[full]
    # A later batch can only look collapsed when some batch has `factor` fewer distinct values.
    if len(full) > min_batches and q.min() * factor <= q.max():
        pre_med = pd.Series(q).expanding().median().to_numpy()
        post_max = np.maximum.accumulate(q[::-1])[::-1]
        ok = (post_max[1:] <= pre_med[:-1] / factor) & (
            pre_med[:-1] * np.median(c[full]) >= min_distinct)
        hit = np.flatnonzero(ok)
        if len(hit):
            found.add(int(full[hit[0] + 1]))
    return sorted(i for i in found if 0 < i <= n - min_batches)


def _final_run(flags: np.ndarray) -> int:
    """Start of the trailing run of True values (len(flags) when the last is False)."""
    false = np.flatnonzero(~flags)
    return int(false[-1]) + 1 if len(false) else 0
