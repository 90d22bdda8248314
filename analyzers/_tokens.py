"""Whether a run's 2-D inputs are token ids: rows the recorded model looks up whole in one
embedding table. Their columns are positions of a sequence (or, sequence-first, its samples)
that share one vocabulary: not features with a meaning and a scale of their own, and the ids'
order means nothing. Pure functions over the inputs table and meta.json's model and
module_shapes; no rule here."""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from tracelab.analyzers._batches import input_shapes
from tracelab.core.schema import TRAIN

LOOKUPS = frozenset({"Embedding", "EmbeddingBag"})
_COLUMN = re.compile(r"^feature\[\d+\]$")


def columns_of(features: Iterable[str]) -> set[str]:
    """The features named as columns of a 2-D input tensor (`feature[i]`)."""
    return {f for f in map(str, features) if _COLUMN.match(f)}


def lookup_shapes(meta: Mapping[str, Any] | None) -> set[tuple[int, int]]:
    """The 2-D input shapes that an Embedding or EmbeddingBag of the model read whole, on the
    step that recorded module shapes. Never raises: malformed meta gives an empty set."""
    try:
        modules = meta["model"]["modules"]  # type: ignore[index]
        types = {str(m.get("path")): str(m.get("type")) for m in modules if isinstance(m, dict)}
        shapes = meta.get("module_shapes") or {}  # type: ignore[union-attr]
        return {(shape[0], shape[1]) for path, calls in shapes.items()
                if types.get(str(path)) in LOOKUPS for shape in input_shapes(calls)
                if len(shape) == 2}
    except (KeyError, TypeError, AttributeError):
        return set()


def token_ids(inputs: pd.DataFrame, meta: Mapping[str, Any] | None) -> bool:
    """Whether the 2-D input tensor (its columns `feature[i]` in the inputs table) holds token
    ids: at a training step, its shape (values per column, columns) is one that an embedding
    of the model read whole, and every recorded value of it, in every split, is a whole
    number. The same tensor then holds ids in every split, whatever their batch sizes."""
    shapes = lookup_shapes(meta)
    if not shapes or inputs is None or not len(inputs):
        return False
    try:
        cols = inputs[inputs["feature"].astype(str).str.match(_COLUMN.pattern)]
        if not len(cols) or not (cols["int_frac"].astype(float) >= 1).all():
            return False
        train = cols[cols["split"].isna() | (cols["split"].astype(str) == TRAIN)]
        per_step = train.groupby("step").agg(n=("feature", "size"), rows=("count", "max"))
        return any((int(r.rows), int(r.n)) in shapes for r in per_step.itertuples())
    except (KeyError, TypeError, ValueError):
        return False
