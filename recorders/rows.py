"""A few whole rows of tabular batches, features and target together: the rows table.

The inputs and samples tables profile each feature on its own; whether a feature determines
the target (a label column left in the inputs, a target encoding fitted on every split) needs
rows. At each profiled batch whose inputs are one 2-D tensor of at most MAX_FEATURES features
(or a DataFrame's numeric columns) and whose target is one value per row, PER_BATCH rows are
drawn (4x more from an evaluation's batches; the recorder's own random stream), until a split
holds LIMIT rows. On a device the drawn rows, their positions and the batch's targets join the
step's packed copy: no host sync.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch

from tracelab.recorders.profile import feature_names, is_frame
from tracelab.recorders.sentinel import named_tensors
from tracelab.recorders.transfer import StepRecord
from tracelab.core.schema import ROWS, TARGET_ROLE, TRAIN

LIMIT = 512  # rows per split
PER_BATCH = 16  # rows per training batch; an evaluation's batches, seen rarely, give 4x more
MAX_FEATURES = 256


class JointRows:
    """The rows table of one recorder: drawn on the training thread, counted per split."""

    def __init__(self, names: Callable[[], Any], *, seed: int = 0, limit: int = LIMIT):
        self._names = names  # the inputs' feature names, as the inputs table names them
        self._limit = limit
        self._taken: dict[str, int] = {}
        self._seed = seed
        self._generators: dict[str, torch.Generator] = {}

    def record(self, step: int, split: str, inputs: Any, targets: Any,
               record: StepRecord) -> None:
        taken = self._taken.get(split, 0)
        if taken >= self._limit:
            return
        target = _one_target(targets)
        if target is None:
            return
        n = int(target.shape[0])
        table = _table(inputs, n, self._names())
        if table is None or n == 0:
            return
        names, values = table
        k = min(PER_BATCH * (1 if split == TRAIN else 4), n, self._limit - taken)
        self._taken[split] = taken + k
        first = taken  # the split's running row number of the first drawn row
        # The rows are drawn where the values live, by the recorder's own generator, and a
        # device batch is indexed there; the target comes whole (one value per row) and is
        # indexed on the host: no host sync, whichever devices the two are on.
        y_all = target.detach().reshape(n).double()
        if is_frame(values):
            at = torch.randperm(n, generator=self._generator(torch.device("cpu")))[:k].numpy()
            host = values.iloc[at].to_numpy(dtype=np.float64, na_value=np.nan)
            parts: tuple = (y_all,)
        else:
            pick = torch.randperm(n, device=values.device,
                                  generator=self._generator(values.device))[:k]
            host = at = None
            parts = (values.detach().index_select(0, pick).double(), pick.double(), y_all)

        def rows(found: list[np.ndarray]) -> list[tuple[str, dict]]:
            if host is None:
                x, drawn = found[0].reshape(k, len(names)), found[1].astype(np.int64)
            else:
                x, drawn = host, at
            t = found[-1].reshape(-1)[drawn]
            width = len(names)
            return [(ROWS, {"step": np.full(k * width, step, dtype=np.int64),
                            "split": [split] * (k * width),
                            "row": np.repeat(np.arange(first, first + k, dtype=np.int64), width),
                            "feature": list(names) * k,
                            "value": np.asarray(x, dtype=np.float64).reshape(-1),
                            "target": np.repeat(t.astype(np.float64), width)})]
        record.add(rows, parts)

    def _generator(self, device: torch.device) -> torch.Generator:
        """The recorder's own random stream per device: drawing rows never moves the user's."""
        key = str(device)
        if key not in self._generators:
            self._generators[key] = torch.Generator(device=device).manual_seed(self._seed)
        return self._generators[key]


def _one_target(targets: Any) -> torch.Tensor | None:
    """The target tensor with one value per row (shape [N] or [N, 1]), when there is one."""
    named = [x for _, x in named_tensors(targets, TARGET_ROLE)] if targets is not None else []
    if len(named) != 1:
        return None
    y = named[0]
    if y.dim() == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.dim() != 1 or y.is_complex() or y.layout != torch.strided or y.is_meta:
        return None
    return y


def _table(inputs: Any, n: int, names: Any
           ) -> tuple[Sequence[str], Any] | None:
    """(feature names, the [n, features] tensor or DataFrame of their values) of tabular inputs
    of n rows, else None."""
    if is_frame(inputs):
        import pandas as pd

        cols = [c for c in inputs.columns if pd.api.types.is_numeric_dtype(inputs[c])
                and not pd.api.types.is_complex_dtype(inputs[c])]
        if len(inputs) != n or not cols or len(cols) > MAX_FEATURES or \
                len(set(map(str, cols))) < len(cols):
            return None
        return [str(c) for c in cols], inputs[cols]  # converted once the rows are drawn
    if not isinstance(inputs, torch.Tensor) or inputs.dim() != 2 or inputs.shape[0] != n:
        return None
    if inputs.is_complex() or inputs.layout != torch.strided or inputs.is_meta:
        return None
    width = int(inputs.shape[1])
    if not 0 < width <= MAX_FEATURES:
        return None
    given = names if names is not None and not isinstance(names, dict) else None
    return feature_names("", width, given, 2), inputs
