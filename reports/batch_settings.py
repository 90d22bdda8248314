"""Which settings go with which diagnoses across an archive: counts, never causes.

For every setting that varies across the analyzed runs (runs.parquet's `config.KEY` columns)
and every root cause found in at least `min_runs` runs, the split of the runs that separates
that root cause best:

- a numeric setting at a threshold: "loss-oscillation in 9 of 10 runs with lr ≥ 0.1, in 0 of
  20 below";
- a text setting by one value: "input-collapse only in runs with data_version = 2024-06 (4 of
  4; 0 of 12 others)".

A split is shown only with at least `min_side` runs on each side, and only when the share of
runs with that root cause differs by at least `min_gap` between the two sides. A setting that
goes with a failure may only travel with the one that causes it (every high-lr run also used
the new data): the page says so next to the counts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from tracelab.reports.fmt import number


@dataclass(frozen=True)
class Association:
    cause: str
    setting: str
    text: str
    gap: float       # share of runs with the cause on one side minus the other's (absolute)
    runs: int        # runs on both sides


def _share(hits: int, total: int) -> float:
    return hits / total if total else 0.0


def _numeric(cause: str, key: str, pairs: list[tuple[float, bool]], min_side: int,
             ) -> Optional[tuple[float, str]]:
    best = None
    for threshold in sorted({v for v, _ in pairs})[1:]:
        high = [hit for v, hit in pairs if v >= threshold]
        low = [hit for v, hit in pairs if v < threshold]
        if len(high) < min_side or len(low) < min_side:
            continue
        gap = abs(_share(sum(high), len(high)) - _share(sum(low), len(low)))
        if best is None or gap > best[0]:
            best = (gap, f"{cause} in {sum(high)} of {len(high)} runs with {key} ≥ "
                         f"{number(threshold)}, in {sum(low)} of {len(low)} below")
    return best


def _text(cause: str, key: str, pairs: list[tuple[str, bool]], min_side: int,
          ) -> Optional[tuple[float, str]]:
    best = None
    for value in sorted({v for v, _ in pairs}):
        inside = [hit for v, hit in pairs if v == value]
        others = [hit for v, hit in pairs if v != value]
        if len(inside) < min_side or len(others) < min_side or not sum(inside):
            continue
        gap = _share(sum(inside), len(inside)) - _share(sum(others), len(others))
        if sum(others):
            text = (f"{cause} in {sum(inside)} of {len(inside)} runs with {key} = {value}, in "
                    f"{sum(others)} of {len(others)} others")
        else:
            text = (f"{cause} only in runs with {key} = {value} ({sum(inside)} of "
                    f"{len(inside)}; 0 of {len(others)} others)")
        if best is None or gap > best[0]:
            best = (gap, text)
    return best


def associations(runs: Iterable[Mapping[str, Any]], settings: Sequence[str], *,
                 min_side: int = 3, min_runs: int = 2, min_gap: float = 0.5,
                 limit: int = 12) -> list[Association]:
    """The settings↔root-cause splits worth reading, strongest first. `runs` are analyzed runs'
    rows with `root_cause` (None for a run without one) and the settings' values."""
    rows = list(runs)
    causes: dict[str, int] = {}
    for row in rows:
        if row.get("root_cause"):
            causes[row["root_cause"]] = causes.get(row["root_cause"], 0) + 1
    found = []
    for cause in sorted(c for c, n in causes.items() if n >= min_runs):
        for key in settings:
            pairs = [(row[key], row.get("root_cause") == cause) for row in rows
                     if row.get(key) is not None]
            if not pairs:
                continue
            numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool)
                          for v, _ in pairs)
            best = (_numeric if numeric else _text)(cause, key, pairs, min_side)
            if best is not None and best[0] >= min_gap:
                found.append(Association(cause, key, best[1], best[0], len(pairs)))
    found.sort(key=lambda a: (-a.gap, -a.runs, a.cause, a.setting))
    return found[:limit]
