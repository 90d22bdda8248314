"""Builders of small in-memory runs for the training-dynamics rule tests."""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from tracelab.core.run import Run


def scalar_rows(name: str, values: Sequence[float], *, split: str = "train",
                steps: Sequence[int] | None = None) -> pd.DataFrame:
    steps = list(range(len(values))) if steps is None else list(steps)
    return pd.DataFrame({"step": steps, "split": split, "name": name,
                         "value": np.asarray(values, dtype=float), "wall_time": 0.0})


def tensor_rows(kind: str, per_name: Mapping[str, Mapping[str, Sequence[float]]], *,
                steps: Sequence[int] | None = None) -> pd.DataFrame:
    """Rows of one kind: {name: {stat: values per step}}, names in model order per step."""
    frames = []
    for order, (name, stats) in enumerate(per_name.items()):
        n = len(next(iter(stats.values())))
        st = list(range(n)) if steps is None else list(steps)
        frame = pd.DataFrame({"step": st, "kind": kind, "name": name, "_order": order})
        for stat, values in stats.items():
            frame[stat] = np.asarray(values, dtype=float) if stat not in (
                "nan_count", "inf_count", "numel") else np.asarray(values, dtype=np.int64)
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True)
    return out.sort_values(["step", "_order"], kind="stable").drop(columns="_order")


def model_meta(params: Iterable[tuple] = (), modules: Iterable[tuple[str, str]] = (),
               **extra) -> dict:
    """meta with a model summary. params: (name, shape[, requires_grad[, in_optimizer]])."""
    plist = []
    for p in params:
        name, shape = p[0], list(p[1])
        plist.append({"name": name, "shape": shape, "dtype": "float32", "device": "cpu",
                      "requires_grad": p[2] if len(p) > 2 else True,
                      "in_optimizer": p[3] if len(p) > 3 else True})
    return {"model": {"type": "Net", "modules": [{"path": m, "type": t} for m, t in modules],
                      "parameters": plist}, **extra}


def make_run(meta: dict | None = None, *, scalars: Iterable[pd.DataFrame] = (),
             tensors: Iterable[pd.DataFrame] = (), inputs: pd.DataFrame | None = None) -> Run:
    frames = {}
    scalars, tensors = list(scalars), list(tensors)
    if scalars:
        frames["scalars"] = pd.concat(scalars, ignore_index=True)
    if tensors:
        frames["tensors"] = pd.concat(tensors, ignore_index=True).sort_values(
            "step", kind="stable", ignore_index=True)
    if inputs is not None:
        frames["inputs"] = inputs
    return Run.from_frames(meta, **frames)


def noisy_decay(n: int, *, start: float = 2.3, floor: float = 0.3, tau: float = 60.0,
                noise: float = 0.25, seed: int = 0) -> np.ndarray:
    """A converging loss with minibatch noise (multiplicative, log-normal)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    clean = floor + (start - floor) * np.exp(-t / tau)
    return clean * np.exp(noise * rng.standard_normal(n) - noise ** 2 / 2)


GRAD_LAYERS = [("l0.weight", (64, 64)), ("l0.bias", (64,)), ("l1.weight", (64, 64)),
               ("l2.weight", (64, 64)), ("l3.weight", (4, 64))]
GRAD_LEVELS = {"l0.weight": 0.3, "l0.bias": 0.05, "l1.weight": 0.5, "l2.weight": 0.8,
               "l3.weight": 1.2}


def noisy(level: float, seed: int, n: int = 100, noise: float = 0.3) -> np.ndarray:
    """A log-normal series around `level`, like a layer's gradient norm over steps."""
    return level * np.exp(noise * np.random.default_rng(seed).standard_normal(n))


def grad_run(levels: Mapping, meta: bool = True, n: int = 100) -> Run:
    """Grad norms per layer of GRAD_LAYERS: a level (noisy series) or an explicit array."""
    per = {name: {"norm": values if isinstance(values, np.ndarray) else noisy(values, i, n),
                  "numel": [4096] * n} for i, (name, values) in enumerate(levels.items())}
    return make_run(model_meta(GRAD_LAYERS) if meta else None,
                    tensors=[tensor_rows("grad", per)])
