"""datetime-units: datetime values that sit at the Unix epoch: numbers read in the wrong unit.

What it detects
    A datetime feature (a DataFrame column recorded as inputs) whose values of a split all lie
    within `window_days` of 1970-01-01, the epoch. Two cases: (a) the values span seconds or
    minutes after the epoch where the integers they were built from, read in a coarser unit
    (seconds, milliseconds, microseconds, days since the epoch), give dates between
    `first_year` and `last_year`: the unit was read wrong (``pd.to_datetime(seconds)`` takes
    nanoseconds); (b) every value is exactly the epoch: zeros, or missing values filled with 0,
    turned into datetimes.

Why it matters
    Every feature built from such a column (hour, day of week, age, time since the last
    event) is constant or meaningless, and nothing raises: the model trains on noise where the
    time should matter, and the loss looks normal.

Example
    ``'signup_time' of train spans 1970-01-01 00:00:01.577836800 to 00:00:01.609372800: the
    integers read as seconds since the epoch are 2020-01-01 to 2020-12-31.``

How to fix
    Give the unit where the numbers become datetimes: ``pd.to_datetime(df[col], unit="s")``
    (or "ms", "us", "D"), ``np.datetime64(value, "s")``; assert the datetimes' year range where
    the data enters the pipeline.

False positives
    Data really recorded within a day of 1970-01-01 is reported too; nothing else is (a
    column of true datetimes never sits at the epoch). A split whose column holds other dates
    as well is judged by all its values, so a few zero-filled rows among real dates stay quiet.
"""
from __future__ import annotations

import pandas as pd

from tracelab.analyzers._inputs import feature_profiles
from tracelab.core.findings import ERROR, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import Needs

_EPOCH = pd.Timestamp("1970-01-01")
# Coarser units, the factor from one of them to a nanosecond: what the integers may have meant.
_UNITS = (("seconds", "s", 10**9), ("milliseconds", "ms", 10**6), ("microseconds", "us", 10**3),
          ("days", "D", 86_400 * 10**9))


@rule(name="datetime-units", code="TL305", requires=(Needs.INPUTS,), merge="feature",
      plot=Plot.NONE)
def datetime_units(run: Run, *, window_days: float = 1.0, first_year: int = 1980,
                   last_year: int = 2100) -> list[Finding]:
    findings = []
    near = pd.Timedelta(days=window_days)
    for feature, _, pooled in feature_profiles(run.inputs):
        zeros, misread = [], []
        for split, p in pooled.items():
            if p.kind != "M" or p.time_min is None or p.time_max is None:
                continue
            lo, hi = pd.Timestamp(p.time_min), pd.Timestamp(p.time_max)
            if lo < _EPOCH - near or hi > _EPOCH + near:
                continue
            if lo == hi == _EPOCH:
                zeros.append((split, p))
            elif (unit := _meant(lo, hi, first_year, last_year)) is not None:
                misread.append((split, p, lo, hi, unit))
        if misread:
            findings.append(_misread(feature, misread))
        if zeros:
            splits = ", ".join(s for s, _ in zeros)
            findings.append(datetime_units.finding(
                WARNING, feature, _steps(p for _, p in zeros),
                f"Every value of datetime '{feature}' in {splits} is exactly 1970-01-01 "
                f"00:00:00, the epoch ({sum(p.count for _, p in zeros)} values): zeros, or "
                "missing values filled with 0, turned into datetimes.",
                {"splits": [s for s, _ in zeros]},
                "Find where this column gets zeros before it becomes a datetime (a fill "
                "value, a failed join, an empty source column); keep missing times as NaT "
                "and check the column's year range where the data enters the pipeline."))
    return findings


def _steps(profiles) -> tuple[int, int]:
    ps = list(profiles)
    return int(min(p.first_step for p in ps)), int(max(p.last_step for p in ps))


def _misread(feature: str, misread: list) -> Finding:
    split, _, lo, hi, (words, code, scale) = misread[0]
    start, end = (pd.Timestamp(t.value * scale) for t in (lo, hi))
    others = [s for s, *_ in misread[1:]]
    also = f" (and likewise in {', '.join(others)})" if others else ""
    return datetime_units.finding(
        ERROR, feature, _steps(p for _, p, *_ in misread),
        f"Datetime '{feature}' of {split} spans {lo} to {hi}, just after the epoch{also}: "
        f"its integers read as {words} since the epoch are {start.date()} to {end.date()}. "
        "They were converted as nanoseconds.",
        {"splits": [s for s, *_ in misread], "time_min": str(lo), "time_max": str(hi),
         "unit": code, "meant_min": str(start), "meant_max": str(end)},
        f"Give the unit where the numbers become datetimes: pd.to_datetime(values, "
        f"unit=\"{code}\") (or np.datetime64(v, \"{code}\")), and check the column's year "
        "range where the data enters the pipeline.")


def _meant(lo: pd.Timestamp, hi: pd.Timestamp, first: int, last: int):
    """The coarser unit in which the values' integers (their nanoseconds) give dates in
    first..last years (the units lie 1000x or more apart: one fits at most), or None."""
    for words, code, scale in _UNITS:
        lo_ns, hi_ns = lo.value * scale, hi.value * scale
        if lo.value > 0 and hi_ns < 2**63 and (pd.Timestamp(lo_ns).year >= first
                                                and pd.Timestamp(hi_ns).year <= last):
            return words, code, scale
    return None
