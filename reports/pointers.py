"""What a finding points at, and the drawing helpers the finding plots share.

Rules name their layers, features and metrics in the finding's subject, evidence and message;
`mentioned` recovers them so a plot can mark exactly those.
"""
from __future__ import annotations

import re
from typing import Callable, Iterable, Optional

import numpy as np
import pandas as pd

from tracelab.core.findings import Diagnosis, Finding
from tracelab.reports.plots import (FINDING_WIDTH, MARK, MARKED, SPLIT_COLORS, Chart, Panel,
                                    draw_series, figure, log_if_wide, outside_legend, unique)
from tracelab.core.schema import LOSS_NAME

PlotFn = Callable[[Diagnosis, Finding], Optional[Chart]]

OTHERS = "#b0b0b0"


def canvas(height: float, width: float = FINDING_WIDTH) -> Chart:
    """A finding's figure: narrower than the overview's, to sit beside the evidence table."""
    return figure(height, width)


_QUOTED = re.compile(r"'([^'\s]+)'|\"([^\"\s]+)\"")
_SPLIT = re.compile(r"[,;\s()\[\]'\"`]+")


def _tokens(f: Finding, message: bool) -> list[str]:
    """Names a finding may point at, in order: its subject, string values of its evidence,
    then (optionally) what its message quotes or spells like a path (fc1.weight).

    Bare numbers only count as the whole subject or a quoted name: a Sequential's modules are
    called 0, 1, 2, and "8 of 11 layers" must not point at two of them."""
    out = [f.subject]
    for t in _SPLIT.split(f.subject):
        if t and not t.lstrip("+-").isdigit():
            out.append(t)
            out.extend(p for p in t.split("/") if p and "/" in t)

    def walk(v):
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
    walk(dict(f.evidence))
    if message:
        for m in _QUOTED.finditer(f.message):
            out.append(m.group(1) or m.group(2))
        for t in _SPLIT.split(f.message):
            t = t.rstrip(".:")
            if re.search(r"[A-Za-z]", t) and re.search(r"[._]", t):
                out.append(t)
    return out


def mentioned(f: Finding, candidates: Iterable[str], *, message: bool = True) -> list[str]:
    """The candidates the finding names, in order of first mention (whole names only, so
    `fc1` never matches `fc1.weight`)."""
    pos: dict[str, int] = {}
    for i, t in enumerate(_tokens(f, message)):
        pos.setdefault(t, i)
    hits = [str(c) for c in candidates if str(c) in pos]
    return sorted(hits, key=lambda c: pos[c])


def window(f: Finding, steps: pd.Index, pad: float = 4.0, least: int = 60) -> tuple[float, float]:
    """A step window around a finding's range, wide enough to show what came before."""
    a, b = f.steps
    width = max(b - a, 1)
    margin = max(width * pad, least)
    lo, hi = (steps.min(), steps.max()) if len(steps) else (a, b)
    return max(lo, a - margin), min(hi, b + margin)


def evidence_number(f: Finding, *needles: str) -> Optional[float]:
    for key, value in f.evidence.items():
        if any(n in key.lower() for n in needles) and isinstance(value, (int, float)) \
                and not isinstance(value, bool):
            return float(value)
    return None


def total_norm(run, kind: str) -> pd.Series:
    wide = run.stat(kind, "norm")
    if wide.empty:
        return pd.Series(dtype=float)
    return np.sqrt((wide ** 2).sum(axis=1, min_count=1))


def nonfinite_rug(ax: Panel, s: pd.Series) -> None:
    """Red ticks along the top of the axes at steps whose value is NaN or Inf."""
    v = pd.to_numeric(s, errors="coerce").astype(float)
    bad = v.index[~np.isfinite(v.to_numpy())].to_numpy()
    if not len(bad):
        return
    if len(bad) > 300:
        bad = bad[np.linspace(0, len(bad) - 1, 300).astype(int)]
    ax.rug(bad, color=MARK, label="steps with NaN/Inf")
    ax.show_legend()


def subject_scalar(run, f: Finding) -> tuple[str, list[str]]:
    names = unique(run.scalars["name"])
    hit = mentioned(f, names)
    name = hit[0] if hit else LOSS_NAME
    splits = mentioned(f, run.splits()) or run.splits()
    return name, splits


def curve(ax: Panel, run, name: str, splits: Iterable[str], emphasize: Iterable[str] = ()) -> list:
    drawn = []
    emphasize = set(emphasize)
    for split in splits:
        s = run.scalar(name, split)
        if len(s):
            draw_series(ax, s, name=split, color=SPLIT_COLORS.get(split),
                        lw=1.8 if split in emphasize else 1.1)
            drawn.append(s)
    log_if_wide(ax, drawn)
    ax.xlabel = "step"
    if len(drawn) > 1:
        ax.show_legend()
    return drawn


def row_median(wide: pd.DataFrame) -> pd.Series:
    """Each row's median, NaN skipped (numpy's partition when there is no NaN: pandas' skipping
    median goes row by row)."""
    v = wide.to_numpy(dtype=float)
    if np.isnan(v).any():
        return wide.median(axis=1)
    return pd.Series(np.median(v, axis=1), index=wide.index)


def layer_lines(ax: Panel, wide: pd.DataFrame, marked: list[str], *, others: bool = True) -> None:
    """The named columns in strong colours over the others in grey (or their median)."""
    rest = [c for c in wide.columns if c not in marked]
    if others and rest:
        if len(rest) <= 12:
            for i, c in enumerate(rest):
                draw_series(ax, wide[c], color=OTHERS, lw=0.8,
                            name="others" if i == 0 else "")
        else:
            draw_series(ax, row_median(wide[rest]), name=f"median of {len(rest)} others",
                        color="#777777", ls="--")
    for i, c in enumerate(marked[:len(MARKED)]):
        draw_series(ax, wide[c], name=c, lw=1.8, color=MARKED[i])
    outside_legend(ax)


def features(d: Diagnosis, f: Finding, limit: int = 3) -> list[str]:
    feats = unique(d.run.inputs["feature"])
    return mentioned(f, feats)[:limit]
