"""Compare two runs: `tracelab diff RUN_A RUN_B [--html PATH]`.

The post-mortem of "same code, different result". A is the reference (the good run), B the one
to explain. The comparison lists, most telling first:

- what differs in their setup: config, numerics and reproducibility flags (TF32, cuDNN,
  determinism, seeds), optimizer hyperparameters, library versions and devices, the model;
- the first step where each common series (train loss first) differs beyond tolerance;
- per-layer gradient-norm divergence (B/A ratio over their common steps);
- input drift: the data rules run on B with A as their baseline, and per-feature summaries;
- the findings present in only one of the two runs.

Each run is analyzed once: A on its own, B with A as the baseline of the data rules. The
thresholds are `DiffThresholds`, overridden in `[tool.tracelab.diff]`.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping, Optional

import numpy as np
import pandas as pd

from tracelab.core.comparison import (CAUSE, INCIDENTAL, MISSING, VERSION, Change, FeatureDiff,
                                      LayerDiff, RunDiff, SeriesDiff, show)
from tracelab.core.config import Config, DiffThresholds
from tracelab.core.errors import TracelabError
from tracelab.core.files import resolved
from tracelab.core.findings import Finding
from tracelab.core.run import Run
from tracelab.core.schema import DATA_TIME, GRAD, LOSS_NAME, STEP_TIME, TRAIN, Needs


_FLAGS = {"tf32_matmul", "tf32_cudnn", "float32_matmul_precision", "cudnn_benchmark",
          "cudnn_deterministic", "deterministic_algorithms", "seed", "seed_set",
          "pythonhashseed"}
_INCIDENTAL = {"hostname", "platform", "argv"}


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _compare(section: str, a: Mapping, b: Mapping, rank_of) -> list[Change]:
    fa, fb = _flatten(a or {}), _flatten(b or {})
    changes = []
    for key in list(fa) + [k for k in fb if k not in fa]:
        va, vb = fa.get(key, MISSING), fb.get(key, MISSING)
        if not _same(va, vb):
            changes.append(Change(section, key, va, vb, rank_of(key)))
    return changes


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _env_rank(key: str) -> int:
    if key in _FLAGS:
        return CAUSE
    return INCIDENTAL if key in _INCIDENTAL else VERSION


def setup_changes(a: Run, b: Run) -> list[Change]:
    ma, mb = a.meta, b.meta
    changes = _compare("config", ma.get("config"), mb.get("config"), lambda k: CAUSE)
    changes += _compare("environment", ma.get("environment"), mb.get("environment"), _env_rank)
    changes += _compare("optimizer", _optimizer(ma), _optimizer(mb),
                        lambda k: INCIDENTAL if k.endswith("n_params") else CAUSE)
    changes += _compare("model", _model(ma), _model(mb), lambda k: CAUSE)
    changes += _compare("tracelab", {"version": ma.get("tracelab_version")},
                        {"version": mb.get("tracelab_version")}, lambda k: INCIDENTAL)
    return sorted(_merge_tf32(changes), key=lambda c: c.rank)


def _merge_tf32(changes: list[Change]) -> list[Change]:
    """`allow_tf32 = True` and `set_float32_matmul_precision("high")` are one setting, which
    torch records in both fields: report it once."""
    found = {c.key: c for c in changes if c.section == "environment"}
    tf32, precision = found.get("tf32_matmul"), found.get("float32_matmul_precision")
    if tf32 is None or precision is None:
        return changes
    tf32.note = (f"float32_matmul_precision {show(precision.a)} → {show(precision.b)}: "
                 "the same setting")
    return [c for c in changes if c is not precision]


def _optimizer(meta: Mapping) -> dict[str, Any]:
    opt = meta.get("optimizer") or {}
    out = {"type": opt.get("type")} if opt else {}
    for i, group in enumerate(opt.get("groups") or []):
        out[f"group{i}"] = group
    return out


def _model(meta: Mapping) -> dict[str, Any]:
    model = meta.get("model") or {}
    if not model:
        return {}
    out: dict[str, Any] = {"type": model.get("type")}
    for p in model.get("parameters") or []:
        out[f"{p['name']}"] = {"shape": p.get("shape"), "dtype": p.get("dtype"),
                               "requires_grad": p.get("requires_grad")}
    return out


def _beyond(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    both_nan = np.isnan(a) & np.isnan(b)
    with np.errstate(invalid="ignore"):
        close = np.abs(a - b) <= atol + rtol * np.maximum(np.abs(a), np.abs(b))
    return ~(close | both_nan)


def series_diffs(a: Run, b: Run, *, rtol: float, atol: float) -> list[SeriesDiff]:
    keys = _series_keys(a) & _series_keys(b)
    order = sorted(keys, key=lambda k: (k != (TRAIN, LOSS_NAME), k[1] != LOSS_NAME,
                                        k[1].startswith("lr/"), k))
    out = []
    for split, name in order:
        sa, sb = a.scalar(name, split), b.scalar(name, split)
        joined = pd.concat([sa.rename("a"), sb.rename("b")], axis=1, join="inner").dropna(how="all")
        if joined.empty:
            continue
        va, vb = joined["a"].to_numpy(float), joined["b"].to_numpy(float)
        bad = _beyond(va, vb, rtol, atol)
        first = int(np.argmax(bad)) if bad.any() else None
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.abs(va - vb) / np.maximum(np.maximum(np.abs(va), np.abs(vb)), 1e-30)
        out.append(SeriesDiff(
            split, name, len(joined), int(joined.index[first]) if first is not None else None,
            float(va[first]) if first is not None else None,
            float(vb[first]) if first is not None else None,
            float(np.nanmax(rel)) if np.isfinite(rel).any() else float("nan"),
            float(sa.iloc[-1]) if len(sa) else None, float(sb.iloc[-1]) if len(sb) else None))
    return out


def _series_keys(run: Run) -> set[tuple[str, str]]:
    pairs = run.scalars[["split", "name"]].drop_duplicates()
    return {(str(s), str(n)) for s, n in pairs.itertuples(index=False)
            if n not in (STEP_TIME, DATA_TIME)}


def layer_diffs(a: Run, b: Run, *, rtol: float) -> tuple[list[LayerDiff], dict[str, list[str]]]:
    na, nb = a.stat(GRAD, "norm"), b.stat(GRAD, "norm")
    only = {"a": [n for n in na.columns if n not in nb.columns],
            "b": [n for n in nb.columns if n not in na.columns]}
    common = [n for n in na.columns if n in nb.columns]
    steps = na.index.intersection(nb.index)
    layers = []
    for name in common:
        va, vb = na.loc[steps, name].to_numpy(float), nb.loc[steps, name].to_numpy(float)
        ok = np.isfinite(va) & np.isfinite(vb) & (va > 0)
        if not ok.any():
            continue
        ratio = vb[ok] / va[ok]
        bad = _beyond(va, vb, rtol, 0.0)
        layers.append(LayerDiff(name, int(ok.sum()), float(np.median(ratio)),
                                float(ratio.max()), float(ratio.min()),
                                int(steps[int(np.argmax(bad))]) if bad.any() else None))
    layers.sort(key=lambda d: -abs(math.log10(d.median_ratio)) if d.median_ratio > 0 else 0)
    return layers, only


def feature_diffs(a: Run, b: Run, limits: DiffThresholds = DiffThresholds()) -> list[FeatureDiff]:
    """Per-feature summaries whose dtype, resolution, location, spread or cardinality moved."""
    def summary(run: Run) -> dict[tuple[str, str], dict[str, Any]]:
        inp = run.inputs
        if not len(inp):
            return {}
        out = {}
        for (split, feature), g in inp.groupby(["split", "feature"], sort=False):
            out[(split, feature)] = {
                "dtype": str(g["dtype"].iloc[-1]), "mean": float(g["mean"].mean()),
                "std": float(g["std"].mean()), "min": float(g["min"].min()),
                "max": float(g["max"].max()), "n_unique": float(g["n_unique"].max()),
                "resolution": g["resolution"].dropna().iloc[-1] if g["resolution"].notna().any()
                else None}
        return out
    sa, sb = summary(a), summary(b)
    out = []
    for key in [k for k in sa if k in sb]:
        x, y, why = sa[key], sb[key], []
        if x["dtype"] != y["dtype"]:
            why.append(f"dtype {x['dtype']} → {y['dtype']}")
        if x["resolution"] != y["resolution"]:
            why.append(f"resolution {x['resolution']} → {y['resolution']}")
        scale = x["std"] if x["std"] and np.isfinite(x["std"]) and x["std"] > 0 else None
        if scale and abs(y["mean"] - x["mean"]) / scale > limits.mean_shift:
            why.append(f"mean moved {abs(y['mean'] - x['mean']) / scale:.2g} stds")
        if scale and np.isfinite(y["std"]) and not (
                limits.std_ratio_min <= y["std"] / scale <= limits.std_ratio_max):
            why.append(f"std ×{y['std'] / scale:.2g}")
        if x["n_unique"] >= limits.unique_min and \
                y["n_unique"] < limits.unique_ratio * x["n_unique"]:
            why.append(f"distinct values {x['n_unique']:.0f} → {y['n_unique']:.0f}")
        if why:
            out.append(FeatureDiff(key[0], key[1], x, y, why))
    return out


def _drift_rules(a: Run, b: Run) -> tuple[list[str], str]:
    """The data rules with a baseline mode that can compare B with A, and what was done."""
    from tracelab.app.engine import all_rules
    data = (Needs.INPUTS, Needs.SAMPLES)
    names = [s.name for s in all_rules()
             if s.uses_baseline and any(r in data for r in s.requires)]
    if not names:
        return [], "no data rule with a baseline mode is installed"
    if not len(a.inputs) or not len(b.inputs):
        which = "A" if not len(a.inputs) else "B"
        return [], f"run {which} recorded no input stats"
    return names, f"{', '.join(names)} on B with A as baseline"


def against_baseline(finding: Finding) -> bool:
    """Whether a data rule drew the finding from its baseline comparison: those name their
    reference "the baseline's SPLIT", which a run's own findings never do."""
    return "the baseline's" in finding.message


def _analyze_both(a: Run, b: Run, config: Config, result: RunDiff) -> None:
    """A on its own and B once, with A as the baseline of the drift rules: the drift findings,
    and the findings of only one run (B's own, without its comparisons with A)."""
    from tracelab.app.engine import analyze, selected
    own = selected(config)
    drift, result.drift_note = _drift_rules(a, b)
    drift = selected(config, drift) if drift else []  # the config's ignore still applies
    fa = analyze(a, config=config).findings if not a.is_empty else None
    fb = None
    if not b.is_empty:
        run = selected(config, own + drift) if own or drift else []
        findings = analyze(b, config=config, baseline=a if drift else None, select=run,
                           baseline_rules=drift).findings if run else []
        result.drift = [f for f in findings if f.rule in drift]
        fb = [f for f in findings if f.rule in own and not against_baseline(f)]
    elif drift:
        result.drift_note = "run B holds no recorded steps"
    key = lambda f: (f.rule, f.subject)  # noqa: E731
    if fa is None or fb is None:
        result.notes.append("Run " + ("A" if fa is None else "B") + " holds no recorded "
                            "steps: its findings were not compared.")
    else:
        ka, kb = {key(f) for f in fa}, {key(f) for f in fb}
        result.only_a = [f for f in fa if key(f) not in kb]
        result.only_b = [f for f in fb if key(f) not in ka]
        result.shared_findings = len(ka & kb)


def diff_runs(a: Run, b: Run, *, config: Optional[Config] = None, rtol: Optional[float] = None,
              atol: Optional[float] = None) -> RunDiff:
    """Compare run B with the reference run A. `rtol` and `atol` override the config's."""
    from tracelab.app.engine import checked
    config = checked(config)
    limits = config.diff_thresholds()
    overrides = {k: v for k, v in (("rtol", rtol), ("atol", atol)) if v is not None}
    if overrides:
        limits = replace(limits, **overrides)
        limits.check("diff_runs")
    result = RunDiff(a=str(a.path or a.name), b=str(b.path or b.name), rtol=limits.rtol,
                     atol=limits.atol)
    result.changes = setup_changes(a, b)
    env_a, env_b = a.meta.get("environment") or {}, b.meta.get("environment") or {}
    if any(c.key == "seed" for c in result.changes) and not env_a.get("seed_set", True) \
            and not env_b.get("seed_set", True):
        result.notes.append("Neither run set a seed: torch picked a random one for each.")
    if not env_a or not env_b:
        result.notes.append("The environment of " + ("A" if not env_a else "B") + " was not "
                            "recorded (an imported log?): flags and versions cannot be compared.")
    result.series = series_diffs(a, b, rtol=limits.rtol, atol=limits.atol)
    result.layers, result.layers_only = layer_diffs(a, b, rtol=limits.rtol)
    result.features = feature_diffs(a, b, limits)
    _analyze_both(a, b, config, result)
    result.unreadable = {side: list(run.problems) for side, run in (("A", a), ("B", b))
                         if run.problems}
    return result


def open_pair(path_a: str, path_b: str) -> tuple[Run, Run]:
    from tracelab.app.sources import open_any
    a, b = open_any(path_a), open_any(path_b)
    key = lambda run: getattr(run.source, "key", None)  # noqa: E731  (a run of a database)
    if a.path is not None and b.path is not None and resolved(a.path) == resolved(b.path) \
            and key(a) == key(b):
        raise TracelabError(f"{path_a}: both arguments name the same run")
    return a, b

