"""Helpers the training-dynamics rules share: windows, robust statistics, parameter names.

Pure functions over pandas/numpy values; no rule lives here.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from tracelab.core.run import Run
from tracelab.core.schema import TRAIN, UPDATE, WEIGHT

# Names a validation split usually goes by, most likely first.
EVAL_SPLITS = ("val", "valid", "validation", "eval", "dev", "test")
# What a model that stopped learning shows: the effects most causes end in.
OUTCOME = ("loss-plateau", "metric-stagnation")
# 1.4826 * MAD estimates the standard deviation of normal data.
MAD_TO_STD = 1.4826


def fmt(x: float) -> str:
    """A number for a message: 3 significant digits, scientific when tiny or huge."""
    x = float(x)
    if x != x or x in (float("inf"), float("-inf")):
        return str(x)
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return f"{x:.2e}"
    return f"{x:.3g}"


def finite(series: pd.Series) -> pd.Series:
    return series[np.isfinite(series.to_numpy(dtype=float, na_value=np.nan))]


def initial(values: np.ndarray) -> float:
    """The loss a run starts from: its first recorded value (the model before any update), or
    the median of the first five when that is lower (an unlucky first batch)."""
    return float(min(values[0], np.median(values[:5])))


def edge_len(n: int, *, frac: float = 0.1, lo: int = 5, hi: int = 100) -> int:
    """Length of the head or tail window of an n-point series."""
    return int(min(max(lo, n * frac), hi, n))


def rolling_previous(values: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Median and MAD of the `window` values before each point (NaN where too few precede)."""
    n = len(values)
    med = np.full(n, np.nan)
    mad = np.full(n, np.nan)
    if n <= window:
        return med, mad
    views = np.lib.stride_tricks.sliding_window_view(values[:-1], window)
    m = np.median(views, axis=1)
    med[window:] = m
    mad[window:] = np.median(np.abs(views - m[:, None]), axis=1)
    return med, mad


def finite_stat(run: Run, kind: str, stat: str) -> pd.DataFrame:
    """`run.stat(kind, stat)` with the recordings of tensors holding NaN/Inf blanked out:
    once a NaN spreads, every other statistic of that tensor is meaningless."""
    frame = run.stat(kind, stat)
    bad = run.nonfinite_tensors()
    bad = bad[(bad["kind"] == kind).to_numpy()]
    rows, cols = frame.index.get_indexer(bad["step"]), frame.columns.get_indexer(bad["name"])
    held = (rows >= 0) & (cols >= 0)
    values = frame.to_numpy(dtype=float, copy=True)
    values[rows[held], cols[held]] = np.nan
    return pd.DataFrame(values, index=frame.index, columns=frame.columns)


def param_shapes(run: Run) -> dict[str, tuple[int, ...]]:
    """Parameter name → shape, where the model summary gives one (a Lazy module's parameter
    has none until its first forward)."""
    shapes = {}
    for name, p in run.parameters().items():
        shape = p.get("shape")
        if isinstance(shape, list) and all(isinstance(d, int) for d in shape):
            shapes[name] = tuple(shape)
    return shapes


def matrix_params(run: Run, names: Iterable[str]) -> list[str]:
    """The weight matrices and kernels among `names`: biases and norm scales scale differently."""
    shapes = param_shapes(run)
    out = []
    for name in names:
        shape = shapes.get(name)
        if shape is not None:
            if len(shape) >= 2:
                out.append(name)
        elif not name.endswith("bias"):
            out.append(name)
    return out


def update_ratios(run: Run, frac: float = 1.0) -> pd.Series:
    """Per weight matrix, the median ||update|| / ||weight|| over the last `frac` of the
    recorded steps (empty when updates or weights were not recorded)."""
    upd, w = run.stat(UPDATE, "norm"), run.stat(WEIGHT, "norm")
    names = matrix_params(run, [n for n in upd.columns if n in w.columns])
    if not names or upd.empty:
        return pd.Series(dtype=float)
    upd = tail(upd[names], frac)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = upd / w[names].reindex(upd.index)
    return ratio.replace([np.inf, -np.inf], np.nan).median().dropna()


def layer_of(param: str) -> str:
    """Module path of a parameter name: "encoder.0.weight" -> "encoder.0"."""
    return param.rsplit(".", 1)[0] if "." in param else param


def name_list(names: Sequence[str], limit: int = 3) -> str:
    names = list(names)
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])} and {len(names) - limit} more"


def subject_of(names: Sequence[str]) -> str:
    """A finding's subject for one or several layers."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1} more)"


def eval_split(run: Run, metric: str | None = None) -> str | None:
    """The validation split: a conventional name first, else the first non-train split."""
    sc = run.scalars
    rows = sc if metric is None else sc[sc["name"] == metric]
    found = [str(s) for s in pd.unique(rows["split"].dropna()) if s != TRAIN]
    for name in EVAL_SPLITS:
        if name in found:
            return name
    return sorted(found)[0] if found else None


def sustained(frame: pd.DataFrame, columns, threshold: float, window: float, minimum: int):
    """(column, series, recent, level) for each column whose median over its last `window` of
    recordings (at least `minimum`) reaches `threshold`."""
    for column in columns:
        series = frame[column].dropna()
        if len(series) < minimum:
            continue
        recent = tail(series, window, minimum=minimum)
        level = float(recent.median())
        if level >= threshold:
            yield column, series, recent, level


def tail(frame: pd.DataFrame | pd.Series, frac: float, minimum: int = 1):
    """The last `frac` of the rows (at least `minimum`)."""
    n = len(frame)
    k = min(n, max(minimum, int(np.ceil(n * frac))))
    return frame.iloc[n - k:]


WEIGHT_STATS = ("norm", "mean", "min", "max")


def weights_unchanged(run: Run, name: str, rtol: float = 1e-7) -> bool:
    """Whether parameter `name` never changed over the recorded steps: every recorded update
    exactly 0, or else every recorded weight statistic (norm, mean, min, max) the same, within
    `rtol`, from its first recording to its last. False when neither was recorded (at least
    two recordings of some statistic); a statistic that was not recorded is not judged."""
    upd = run.stat(UPDATE, "norm")
    if name in upd.columns and upd[name].notna().any():
        return bool((upd[name].dropna() == 0).all())
    judged = False
    for stat in WEIGHT_STATS:
        frame = run.stat(WEIGHT, stat)
        if name not in frame.columns:
            continue
        col = frame[name].dropna().to_numpy(dtype=float)
        if len(col) < 2:
            continue
        if np.any(np.abs(col - col[0]) > rtol * max(abs(col[0]), 1e-30)):
            return False
        judged = True
    return judged
