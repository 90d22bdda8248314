"""The inputs and samples rows of a recorder's input batches.

A tensor is profiled on its device when the step hands it over, by torch's batched ops
(profile.tensor_profile), and the profile joins the step's packed copy. A pandas DataFrame is
profiled now, column by column. Sampled values go into
one reservoir per recorder, whose whole state each producer hands on as the samples snapshot.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import torch

from tracelab.recorders.profile import (MAX_PROFILED_FEATURES, PACKED, Reservoir, dtype_name,
                                        feature_names, feature_shape, frame_profile, is_frame,
                                        profiled_features, tensor_profile)
from tracelab.recorders.sentinel import batch_leaves
from tracelab.recorders.transfer import StepRecord
from tracelab.core.schema import ARROW_SCHEMAS, COUNT_STATS, INPUTS, SAMPLES_SNAPSHOT

_PACKED_COUNTS = tuple(c for c in PACKED if c in COUNT_STATS)  # int64 in the trace
# The columns of a DataFrame's profile rows: every inputs column but the two the producer adds.
_FRAME_COLUMNS = tuple(c for c in ARROW_SCHEMAS[INPUTS].names if c not in ("step", "split"))


class InputStats:
    """Profiles of one recorder's input batches, per split and feature.

    feature_names: names of the input features (dim 1), or a dict of them per input key.
    on_devices: called with {"split:input": device} whenever an input's device changes.
    warn(key, message): hears of an input or column left out (see `record`).
    table, base: the table the profiles go to, and the name of an unnamed tensor's features;
    the targets' profiles (table TARGETS, base "target") keep no samples.
    """

    def __init__(self, feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None, *,
                 sample_size: int, rank: int, on_devices: Callable[[dict[str, str]], None],
                 warn: Callable[[Any, str], None] | None = None, table: str = INPUTS,
                 base: str = "input"):
        self.feature_names = feature_names
        self._table, self._base = table, base
        self._what = "input" if table == INPUTS else base
        self.rank = rank
        self._warn = warn
        self._on_devices = on_devices
        self._devices: dict[str, str] = {}
        self._reservoir = Reservoir(sample_size, seed=rank)
        self._frame_rng = np.random.default_rng(rank)  # training thread
        self._generators: dict[str, torch.Generator] = {}

    def record(self, step: int, split: str, inputs: Any, record: StepRecord) -> None:
        """Profile `inputs` (a tensor, a tuple or dict of them, or a DataFrame) into `record`.

        An input or column that cannot be profiled (a sparse or meta-device tensor, complex
        values, a column of lists, ...) is left out with one warning per feature; the others
        are profiled.
        """
        if is_frame(inputs):
            chosen = profiled_features(inputs.shape[1])
            if chosen is not None:
                self._cut(self._what + "s", inputs.shape[1], "columns")
                inputs = inputs.iloc[:, chosen]
            profile, samples = frame_profile(inputs, self._frame_rng, self._skip)
            record.add(self._frame_rows(step, split, profile, samples))
            return
        layout, packed = [], []
        for prefix, x, names in self._named_inputs(inputs):
            if not isinstance(x, torch.Tensor) or x.numel() == 0:
                continue
            name = prefix or self._base
            if x.layout != torch.strided or x.is_meta or x.is_complex() or x.is_quantized:
                kind = "meta" if x.is_meta else "complex" if x.is_complex() else str(x.layout)
                self._skip(name, kind, f"a {kind} tensor ({x.dtype}) cannot be profiled")
                continue
            key = f"{split}:{name}"
            if self._devices.get(key) != str(x.device):
                self._devices[key] = str(x.device)
                self._on_devices(dict(self._devices))
            n_feat, count = feature_shape(x.shape)
            chosen = profiled_features(n_feat) if x.dim() >= 2 else None
            if chosen is not None:
                self._cut(name, n_feat, "channels" if x.dim() >= 3 else "features")
            try:
                packed.extend(tensor_profile(x, self._generator(x.device), chosen))
            except Exception as exc:
                self._skip(name, type(exc).__name__, f"{type(exc).__name__}: {exc}")
                continue
            layout.append((feature_names(prefix, n_feat, names, x.dim(), chosen), dtype_name(x),
                           count))
        record.add(self._tensor_rows(step, split, layout), packed)

    def _skip(self, feature: str, kind: str, reason: str) -> None:
        if kind == "duplicate":  # profiled, under a new name
            message = f"{self._what} feature {feature!r}: {reason}; warned once"
        else:
            message = f"{self._what} feature {feature!r} not profiled: {reason}; the other " \
                "features and the scalars are recorded, warned once"
        if self._warn is None:
            raise ValueError(f"tracelab: {message}")
        self._warn((self._what, feature, kind), message)

    def _cut(self, name: str, n: int, what: str) -> None:
        """Warn once per input that only MAX_PROFILED_FEATURES of its n features are profiled."""
        if self._warn is not None:
            self._warn((self._what, name, "wide"), f"{self._what} {name!r} has {n} {what}: "
                       f"{MAX_PROFILED_FEATURES} of them, spread evenly over its width, are "
                       "profiled (named by their index), to bound the recorder's memory; "
                       "warned once")

    def _refused(self) -> None:
        """Warn once when the reservoir's budget refused features (writer thread)."""
        reservoir = self._reservoir
        if reservoir.refused and self._warn is not None:
            shown = ", ".join(f"{split}:{feature}" for split, feature in reservoir.refused_first)
            self._warn((self._what, "samples", "budget"), f"the input samples keep at most "
                       f"{reservoir.capacity} (split, feature) pairs of {reservoir.size} values, "
                       f"to bound the recorder's memory: features offered later ({shown}, ...) "
                       "are profiled but keep no samples; warned once")

    def _tensor_rows(self, step: int, split: str, layout: list):
        reservoir, table, samples = self._reservoir, self._table, self._table == INPUTS

        def rows(values: list[np.ndarray]) -> list[tuple[str, dict]]:
            out = []
            profiles = iter(values)  # (packed, sample) of each input
            for feats, dtype, count in layout:
                packed, sample = next(profiles), next(profiles)
                packed = packed.reshape(len(feats), len(PACKED))
                cols = {c: packed[:, i] for i, c in enumerate(PACKED)}
                for c in _PACKED_COUNTS:
                    cols[c] = cols[c].astype(np.int64)
                cols.update(step=np.full(len(feats), step, dtype=np.int64),
                            split=_strings((split,) * len(feats)), feature=_strings(tuple(feats)),
                            dtype=_strings((dtype,) * len(feats)),
                            count=np.full(len(feats), count, dtype=np.int64))
                out.append((table, cols))
                if samples:
                    reservoir.add_many(split, list(feats), step,
                                       np.asarray(sample, dtype=np.float64).reshape(len(feats), -1))
            if samples:
                self._refused()
                out.append((SAMPLES_SNAPSHOT, reservoir.columns))
            return out
        return rows

    def _frame_rows(self, step: int, split: str, profile: list[dict], samples: dict):
        reservoir, table = self._reservoir, self._table

        def rows(values: list[np.ndarray]) -> list[tuple[str, dict]]:
            cols = {key: [row.get(key) for row in profile] for key in _FRAME_COLUMNS}
            cols.update(step=[step] * len(profile), split=[split] * len(profile))
            if table != INPUTS:
                return [(table, cols)]
            for feature, vals in samples.items():
                reservoir.add(split, feature, step, vals)
            self._refused()
            return [(INPUTS, cols), (SAMPLES_SNAPSHOT, reservoir.columns)]
        return rows

    def _named_inputs(self, inputs: Any) -> list[tuple[str, Any, Sequence[str] | None]]:
        """(name prefix, leaf, feature names) of each part of `inputs`, nested tuples, lists and
        dicts walked as the sentinel walks them (which warns of what it skips)."""
        names = self.feature_names
        if type(inputs) is torch.Tensor or not isinstance(inputs, (Mapping, tuple, list)):
            single = "" if self._table == INPUTS else self._base  # inputs: feature[i] names
            return [(single, inputs, names if not isinstance(names, Mapping) else None)]
        per_key = names if isinstance(names, Mapping) and isinstance(inputs, Mapping) else {}
        leaves, _ = batch_leaves(inputs, self._base)
        return [(name, leaf, per_key.get(path[0]) if len(path) == 1 else None)
                for name, path, leaf in leaves]

    def _generator(self, device: torch.device) -> torch.Generator:
        """The recorder's own random stream per device: sampling never moves the user's."""
        key = str(device)
        if key not in self._generators:
            self._generators[key] = torch.Generator(device=device).manual_seed(self.rank)
        return self._generators[key]


@functools.lru_cache(maxsize=256)
def _strings(values: tuple[str, ...]) -> pa.Array:
    """A column of strings as Arrow holds it, made once per input layout: the writer then
    joins the steps' columns without converting thousands of Python strings per flush."""
    return pa.array(values, pa.string())


