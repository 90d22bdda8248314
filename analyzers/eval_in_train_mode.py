"""eval-in-train-mode: a validation split was evaluated with Dropout or BatchNorm in training mode.

What it detects
    For every split other than train that `Recorder.log()` recorded with a model attached, the
    recorder notes whether the model's Dropout (p > 0) and BatchNorm modules were in training
    mode during the evaluation's forward passes (those run without autograd), or at the
    `log()` call when it saw none. The rule fires when they were on at least `min_share` of
    that split's evaluations. Dropout written in the forward function
    (`F.dropout(x, p, training=self.training)`) or inside a recurrent layer (`nn.LSTM(...,
    dropout=p)`) has no Dropout module to count: where the model counts none, the model's own
    training flag at those evaluations is judged when the run declares a dropout probability
    above 0 -- the `dropout=` of a recurrent layer stacking 2 or more layers (one layer drops
    nothing) in its summary, or a number in (0, 1) under a dropout key of the run's config
    (`dropout`, `hidden_dropout_prob`, `drop_rate`, ...).

Why it matters
    In training mode Dropout drops units at random and BatchNorm normalizes with the batch's
    own statistics and updates its running averages with the validation data. The validation
    metrics come out noisy and pessimistic, depend on the batch size, and the evaluation
    changes the model. Early stopping and model selection then rest on wrong numbers. A
    split evaluated so can score at chance (BatchNorm normalizing a batch of one class by its
    own mean removes what tells the classes apart) and its loss can rise while the training
    loss falls: the diagnosis explains metric-stagnation and overfitting on that split.

Example
    All 8 evaluations of split 'val' ran with 1 of 1 Dropout modules in training mode:
    `model.eval()` was never called before validating.

How to fix
    Call `model.eval()` before the validation loop (and `model.train()` after it), and
    evaluate under `torch.no_grad()`.

False positives
    A model without Dropout or BatchNorm behaves the same in both modes, so its training flag
    alone stays quiet, unless the run declares a dropout its forward applies (above): a config
    key naming a dropout the model does not use is flagged too. A loop that switches back to `model.train()` before calling `log()` is
    judged by its evaluation passes, which the recorder saw under `torch.no_grad()`; Monte
    Carlo dropout on purpose (uncertainty estimates) is flagged and can be silenced by
    disabling the rule.
"""
from __future__ import annotations

import math
import re

from tracelab.core.causes import cause_is_stated, explains
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import (DROPOUT_MODULES, NORM_MODULES, TRAIN, TRAIN_MODE_DROPOUT,
                                  TRAIN_MODE_MODEL, TRAIN_MODE_NORM, Needs)

# A config key that names a dropout probability: `dropout`, `attn_dropout`,
# `hidden_dropout_prob`, `drop_rate`, `drop_path_rate`, `p_drop` (not `drop_last`).
_DROPOUT_KEY = re.compile(r"dropout|drop_?(rate|prob|path)|(^|_)p_?drop($|_)", re.IGNORECASE)
_REPR_DROPOUT = re.compile(r"\bdropout=([0-9.eE+-]+)")
_REPR_LAYERS = re.compile(r"\bnum_layers=([0-9]+)")


@rule(name="eval-in-train-mode", code="TL603", requires=(Needs.EVAL_MODES,), plot=Plot.NONE,
      links=(explains("metric-stagnation", "overfitting",
                      why="with Dropout or BatchNorm in training mode the evaluation scores a "
                          "randomly thinned network (or one normalized by the evaluated batch's "
                          "own statistics): its predictions carry noise and shifts the trained "
                          "model does not, which pull the split's accuracy towards chance and "
                          "its loss up",
                      timing="overlap", place="split", when=cause_is_stated),))
def eval_in_train_mode(run: Run, *, min_share: float = 0.5) -> list[Finding]:
    sg = run.signals
    findings = []
    for split in sorted(set(sg["split"]) - {TRAIN}):
        dropout, norm = run.signal(TRAIN_MODE_DROPOUT, split), run.signal(TRAIN_MODE_NORM, split)
        if not len(dropout):
            continue
        active = (dropout.fillna(0) > 0) | (norm.reindex(dropout.index).fillna(0) > 0)
        share = float(active.mean())
        if not active.any() or share < min_share:
            if not run.signal(DROPOUT_MODULES, split).max() > 0:
                findings += _functional(run, split, min_share)
            continue
        n_drop = int(run.signal(DROPOUT_MODULES, split).max())
        n_norm = int(run.signal(NORM_MODULES, split).max())
        on_drop = int(dropout[active].max())
        on_norm = int(norm.reindex(dropout.index)[active].fillna(0).max())
        parts = ([f"{on_drop} of {n_drop} Dropout"] if on_drop else []) + (
            [f"{on_norm} of {n_norm} BatchNorm"] if on_norm else [])
        effect = "its metrics are noisy" + (
            " and BatchNorm's running statistics were updated with its data" if on_norm else "")
        steps = dropout.index[active]
        findings.append(eval_in_train_mode.finding(
            WARNING, split, (int(steps[0]), int(steps[-1])),
            f"{int(active.sum())} of {len(active)} evaluations of split '{split}' ran with "
            f"{' and '.join(parts)} modules in training mode: {effect}.",
            {"evaluations": len(active), "in_train_mode": int(active.sum()),
             "dropout_active": on_drop, "batchnorm_active": on_norm},
            "Call model.eval() before the validation loop (and model.train() after it), and "
            "evaluate under torch.no_grad()."))
    return findings


def _declared_dropout(run: Run) -> tuple[str, float] | None:
    """(where, probability) of a dropout the run declares outside Dropout modules: a leaf
    module's `dropout=p` in its summary (nn.LSTM, nn.GRU) where it stacks 2 or more layers,
    else a number in (0, 1) under a dropout key of the config (nested mappings included);
    None where none is declared. A recurrent layer of one layer applies no dropout (PyTorch
    drops units only between stacked layers), so its `dropout=p` counts for nothing, and a
    config value equal to it is taken as the one passed to that layer."""
    inert = set()
    for m in run.modules():
        found = _REPR_DROPOUT.search(str(m.get("extra_repr") or ""))
        p = _probability(found.group(1)) if found else None
        if p is None:
            continue
        if _layers(m) < 2:
            inert.add(p)
            continue
        return f"{m.get('type', 'a module')} '{m.get('path', '')}' dropout={p:g}", p
    stack, seen = [run.meta.get("config")], 0
    while stack and seen < 1000:
        config = stack.pop()
        seen += 1
        if not isinstance(config, dict):
            continue
        for key, value in config.items():
            if isinstance(value, dict):
                stack.append(value)
            elif _DROPOUT_KEY.search(str(key)):
                p = _probability(value)
                if p is not None and p not in inert:
                    return f"config {key}={p:g}", p
    return None


def _layers(module: dict) -> int:
    """The stacked layers of a recurrent module: its recorded `num_layers`, else the one its
    extra_repr() shows; 1 where neither shows one (nn.LSTM's repr omits num_layers=1)."""
    config = module.get("config")
    n = config.get("num_layers") if isinstance(config, dict) else None
    if n is None:
        found = _REPR_LAYERS.search(str(module.get("extra_repr") or ""))
        n = found.group(1) if found else 1
    try:
        return int(n) if not isinstance(n, bool) else 1
    except (TypeError, ValueError, OverflowError):
        return 1


def _probability(value) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        p = float(value)
    except (TypeError, ValueError):
        return None
    return p if math.isfinite(p) and 0 < p < 1 else None


def _functional(run: Run, split: str, min_share: float) -> list[Finding]:
    """A split evaluated with the model in training mode on `min_share` of its evaluations
    while the model counts no Dropout module and the run declares a dropout its forward
    applies by the model's flag (`_declared_dropout`)."""
    mode = run.signal(TRAIN_MODE_MODEL, split).dropna()
    if not len(mode):
        return []
    on = mode > 0
    if not on.any() or float(on.mean()) < min_share:
        return []
    declared = _declared_dropout(run)
    if declared is None:
        return []
    where, p = declared
    steps = mode.index[on]
    return [eval_in_train_mode.finding(
        WARNING, split, (int(steps[0]), int(steps[-1])),
        f"{int(on.sum())} of {len(on)} evaluations of split '{split}' ran with the model in "
        f"training mode, and the run declares dropout ({where}) that no Dropout module "
        "applies: a dropout in the forward function (F.dropout(x, p, training=self.training)) "
        "or a recurrent layer's drops units at those evaluations, so its metrics are noisy.",
        {"evaluations": len(on), "in_train_mode": int(on.sum()), "dropout_active": 0,
         "batchnorm_active": 0, "declared_dropout": p, "declared_in": where},
        "Call model.eval() before the validation loop (and model.train() after it), and "
        "evaluate with a forward pass of its own under torch.no_grad(), not the training "
        "step's outputs.")]
