"""What a run's logged metrics say of its loss's terms: a loss that is a sum (a VQ-VAE's
reconstruction error plus its codebook and commitment terms, a VAE's reconstruction plus its KL,
a task loss plus an auxiliary one) swings where any term does, and a logged term that carries the
loss tells which of them moved. Read by the rules that judge the loss curve's shape. Pure
functions; no rule lives here."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from tracelab.analyzers._objectives import direction
from tracelab.core.run import Run
from tracelab.core.schema import LOSS_NAME, LR_PREFIX, STEP_TIME, TRAIN


class Term(NamedTuple):
    name: str
    values: pd.Series  # the term at the loss's steps (index: step)


def main_term(run: Run, loss: pd.Series, *, share: float = 0.5, coverage: float = 0.9,
              min_points: int = 20, rtol: float = 1e-6, alpha: float = 0.05,
              rises: float = 0.25) -> Term | None:
    """The logged train metric that is the main term of the recorded loss, aligned to the
    loss's steps (`loss`: finite, indexed by step), or None. A term of a sum of non-negative
    terms: recorded at `coverage` of the loss's steps or more (`min_points` at least), finite,
    0 or more and never above the loss (within `rtol`) at any of them, carrying `share` of the
    loss or more over the first tenth of the steps (the median of term / loss there: the fit's
    own term, not a small regularizer), and named neither as the loss itself, a learning rate,
    the step's time nor a higher-is-better score (an accuracy, a reward), and moving with the
    loss: rising at `rises` as many steps as the loss does or more (a best-so-far loss never
    rises, a schedule's value keeps its course), its step-to-step changes correlated with the
    loss's beyond chance (Spearman, one-sided p < `alpha`). Where several qualify, the one with
    the largest share. None where the metrics are missing or none qualifies: nothing is known
    of the loss's terms."""
    try:
        sc = run.scalars
        names = sc.loc[sc["split"] == TRAIN, "name"].astype(str).unique()
        loss = loss[~loss.index.duplicated(keep="last")]
        l = loss.to_numpy(dtype=float, na_value=np.nan)
    except (KeyError, ValueError, TypeError, AttributeError):
        return None
    if len(l) < min_points or not (np.isfinite(l).all() and (l > 0).all()):
        return None
    best = None
    for name in names:
        if name in (LOSS_NAME, STEP_TIME) or name.startswith(LR_PREFIX) or direction(name) > 0:
            continue
        try:
            m = pd.to_numeric(run.scalar(name), errors="coerce")
            m = m[~m.index.duplicated(keep="last")].reindex(loss.index)
        except (KeyError, ValueError, TypeError):
            continue
        values = m.to_numpy(dtype=float, na_value=np.nan)
        seen = np.isfinite(values)
        if seen.sum() < max(min_points, coverage * len(l)):
            continue
        if (values[seen] < 0).any() or (values[seen] > l[seen] * (1 + rtol)).any():
            continue
        head = max(len(l) // 10, 5)
        first = (values[:head] / l[:head])[seen[:head]]
        if not len(first):
            continue
        part = float(np.median(first))
        if part < share or (best is not None and part <= best[0]):
            continue
        dl, dv = np.diff(l[seen]), np.diff(values[seen])
        if not (dv > 0).sum() >= rises * (dl > 0).sum() > 0:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            rho, p = spearmanr(dl, dv)
        if not (np.isfinite(rho) and rho > 0 and p / 2 < alpha):
            continue
        if best is None or part > best[0]:
            best = (part, Term(name, m[seen]))
    return best[1] if best else None
