"""The cause keys of the calibration sets and the rules whose findings name each (CAUSES.md).

A scenario's `LABEL["cause"]` is one of these keys (None when the run is healthy).
`benchmarks/calibrate_rules.py` counts a faulty run's first diagnosis as naming its planted
cause when the diagnosis's rule is one of the key's rules. Some rules named here may not be
registered yet; the scorer lists them, and a run whose cause only they name is a miss.
"""
from __future__ import annotations

CAUSES: dict[str, tuple[str, ...]] = {
    "lr-too-high": ("learning-rate-too-high", "update-ratio"),
    "lr-too-low": ("update-ratio", "frozen-parameters"),
    "lr-schedule": ("lr-schedule",),
    "weight-decay-too-high": ("weight-decay-too-high",),
    "clip-misuse": ("clip-misuse",),
    "missing-zero-grad": ("missing-zero-grad",),
    "gradient-accumulation-bug": ("gradient-accumulation",),
    "optimizer-step-missing": ("optimizer-step-missing",),
    "param-not-in-optimizer": ("param-not-in-optimizer",),
    "frozen-by-mistake": ("frozen-parameters",),
    "train-in-eval-mode": ("train-in-eval-mode",),
    "eval-in-train-mode": ("eval-in-train-mode",),
    "batchnorm-small-batch": ("batchnorm-small-batch",),
    "wrong-batch-axis": ("wrong-batch-axis",),
    "loss-input-contract": ("loss-input-contract",),
    "shape-broadcast": ("shape-broadcast",),
    "wrong-loss-sign": ("loss-below-bound", "loss-against-objective"),
    "vanishing-gradients": ("vanishing-gradients",),
    "exploding-gradients": ("exploding-gradients",),
    "dead-units": ("dead-units",),
    "nonfinite-values": ("nonfinite-values",),
    "input-scale": ("unnormalized-inputs",),
    "train-val-preprocessing-mismatch": ("train-val-mismatch",),
    "label-corruption": ("target-problems",),
    "data-leak": ("data-leak",),
    "train-val-overlap": ("train-val-overlap",),
    "constant-input": ("input-collapse",),
}
