"""unnormalized-inputs: the model is fed raw-scale inputs.

What it detects
    In the training inputs (or the first recorded split when no training inputs were recorded),
    three patterns: (a) image inputs (uint8, or fed to a convolutional model) holding whole
    numbers in [0, 255]: raw pixel intensities; (b) features whose typical magnitude, the root
    mean square sqrt(mean² + std²), exceeds `max_rms`; (c) features whose typical magnitudes
    differ by `max_scale_ratio` or more, i.e. orders of magnitude. Floating-point features (and
    uint8 images) are judged; integer features are taken to be category ids for an embedding.

Why it matters
    Gradient descent works when inputs are centred and of similar scale. Raw inputs make the
    first layer's pre-activations huge (saturating sigmoids and tanh, exploding early losses)
    and make the loss surface badly conditioned: the large-scale features dominate the
    gradients, the small ones are barely learned, and a learning rate that suits one scale is
    wrong for the other.

Example
    ``3 input features are raw pixel values in [0, 255]: 'channel[0]' (mean 112 std 71), ...``
    or ``feature scales differ by 2.2e+04x: 'area' reaches 2.5e+03, 'smoothness' 0.16``.

How to fix
    Standardize each feature with statistics fitted on the training split
    (``StandardScaler``, or ``(x - mean) / std``), or scale to [0, 1]. For images, divide by 255
    (``ToTensor`` does) and normalize per channel, e.g. ImageNet mean (0.485, 0.456, 0.406) and
    std (0.229, 0.224, 0.225).

False positives
    A few features above `max_rms` whose scales stay within `max_scale_ratio` of the others,
    while most are near unit scale (polynomial features x, x², x³, x⁴ of a standardized x),
    are information only. Integer-dtype features (ids for an embedding) are never flagged, nor whole-number floats
    when the model holds an Embedding; without one, category codes stored as floats reach a
    linear layer as numbers and are judged like any feature. Integer columns of a DataFrame
    holding raw counts are missed for the same reason. A standardized feature with rare
    outliers has an RMS near 1 and stays quiet; a rare 0/1 indicator counts as unit scale.
    Features that all lie in [-1, 1] are never judged far apart, however small some of them
    stay: images scaled to [0, 1] without mean/std normalization (ToTensor, flattened MNIST,
    inputs a VAE reconstructs with BCE), one-hot and binary codes, min-max scaled tables.
    Their mostly-zero border pixels are sparse, not in other units; a feature scaled down by
    mistake within such inputs is missed.
    Inputs recorded as a raw table holding dates or text (a DataFrame before feature
    engineering) are not what the model sees, and are skipped as a whole.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from tracelab.analyzers._dynamics import OUTCOME
from tracelab.analyzers._inputs import (Profile, dtype_kind, feature_profiles, fmt,
                                        stats_text)
from tracelab.core import causes
from tracelab.core.causes import explains
from tracelab.core.findings import INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import TRAIN, Needs

_STANDARDIZE = ("Standardize each feature with statistics fitted on the training split "
                "(StandardScaler, or (x - mean) / std) and apply the same transform to every "
                "split.")


@rule(name="unnormalized-inputs", code="TL303", requires=(Needs.INPUTS,), plot=Plot.INPUT_SCALE,
      links=(explains("saturated-activations", "dead-units", "exploding-gradients", "loss-spike",
                      "loss-oscillation", "nonfinite-values", "vanishing-gradients",
                      "update-ratio", "frozen-parameters", "collapsed-outputs", *OUTCOME,
                      why="inputs far from unit scale saturate or kill units and blow up gradients",
                      timing="overlap", when=causes.not_input),))
def unnormalized_inputs(run: Run, *, max_rms: float = 10.0, max_scale_ratio: float = 100.0,
                        min_pixel_max: float = 100.0, max_listed: int = 5) -> list[Finding]:
    types = set(run.module_types().values())
    embeds = any("Embedding" in t for t in types)
    images = any(t.startswith("Conv") for t in types)
    inputs = run.inputs
    splits = set(inputs["split"].unique())
    split = TRAIN if TRAIN in splits else (sorted(splits)[0] if splits else None)
    kinds = {dtype_kind(d) for d in inputs.loc[inputs["split"] == split, "dtype"].unique()}
    if split is None or kinds & {"M", "O"}:
        return []  # a raw table with dates or text: features are built from it later
    profiles: dict[str, Profile] = {}
    for feature, _, pooled in feature_profiles(inputs):
        p = pooled.get(split)
        if p is None or not (p.kind == "f" or p.dtype == "uint8") or not np.isfinite(
                [p.mean, p.max]).all():
            continue
        # With an embedding in the model, whole-number floats may be ids looked up there.
        if embeds and p.dtype != "uint8" and p.int_frac >= 0.99 and p.min >= 0:
            continue
        profiles[feature] = p
    if not profiles:
        return []
    first = min(p.first_step for p in profiles.values())
    last = max(p.last_step for p in profiles.values())
    findings = []

    def listed(names: list[str]) -> str:
        more = f" and {len(names) - max_listed} more" if len(names) > max_listed else ""
        return ", ".join(f"'{n}' ({stats_text(profiles[n])})" for n in names[:max_listed]) + more

    pixels = [f for f, p in profiles.items() if p.min >= 0 and min_pixel_max < p.max <= 255
              and p.int_frac >= 0.99 and (images or p.dtype == "uint8")]
    if pixels:
        findings.append(unnormalized_inputs.finding(
            WARNING, pixels[0] if len(pixels) == 1 else f"{len(pixels)} features", (first, last),
            f"{len(pixels)} {split} input feature{'s' if len(pixels) > 1 else ''} hold raw "
            f"pixel values, whole numbers in [0, 255]: {listed(pixels)}.",
            {"split": split, "features": pixels[:50]},
            "Divide by 255 (torchvision's ToTensor does) and normalize each channel, e.g. "
            "Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)) for ImageNet-like "
            "images, or the channel statistics of your training set."))
    rms = {f: float(np.hypot(p.mean, _nan_to_num(p.std))) for f, p in profiles.items()}
    # A rare 0/1 indicator has a tiny RMS but is on unit scale: its reach counts too.
    scale = {f: max(rms[f], 0.5 * min(max(abs(p.min), abs(p.max)), 1.0))
             for f, p in profiles.items() if rms[f] > 0}
    # Inputs that all lie in [-1, 1] (ToTensor images, min-max scaling, one-hot or binary
    # codes) are on the scale the first layer's initialization assumes: no feature dominates
    # its gradients, and one that stays small inside that range is sparse or nearly constant
    # (a border pixel), not in other units. Scales far apart need a feature beyond unit range.
    unit = all(max(abs(p.min), abs(p.max)) <= 1.0 for p in profiles.values())
    if len(scale) >= 2 and not unit:
        big, small = max(scale, key=scale.get), min(scale, key=scale.get)
        ratio = scale[big] / scale[small]
        if ratio >= max_scale_ratio:
            findings.append(unnormalized_inputs.finding(
                WARNING, f"{big} vs {small}", (first, last),
                f"{split} input feature scales differ by {fmt(ratio)}x: '{big}' has typical "
                f"magnitude {fmt(scale[big])} ({stats_text(profiles[big])}), '{small}' "
                f"{fmt(scale[small])} ({stats_text(profiles[small])}); the small-scale features "
                "barely move the first layer.",
                {"split": split, "ratio": ratio, "largest": big, "largest_scale": scale[big],
                 "smallest": small, "smallest_scale": scale[small]},
                _STANDARDIZE))
    large = sorted((f for f in profiles if rms[f] > max_rms and f not in pixels),
                   key=lambda f: -rms[f])
    if large:
        # Features of comparable scales, most of them near unit scale (a polynomial's x**4
        # beside x), condition the first layer well; its step size then shows in the loss.
        # Raw units throughout, or scales far apart (above), are the defect.
        spread = any("ratio" in f.evidence for f in findings)
        severe = spread or len(large) >= len(profiles) / 2
        findings.append(unnormalized_inputs.finding(
            WARNING if severe else INFO, large[0] if len(large) == 1 else
            f"{len(large)} features", (first, last),
            f"{len(large)} of {len(profiles)} {split} input features are far from unit scale "
            f"(typical magnitude sqrt(mean²+std²) above {fmt(max_rms)}): {listed(large)}.",
            {"split": split, "features": large[:50], "rms": {f: rms[f] for f in large[:50]}},
            _STANDARDIZE))
    return findings


def _nan_to_num(x: float) -> float:
    """np.nan_to_num of one float, without its array machinery (called once per feature)."""
    return 0.0 if math.isnan(x) else min(max(x, -sys.float_info.max), sys.float_info.max)
