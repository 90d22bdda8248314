"""input-collapse: a feature loses its information between splits, over time, or against a baseline.

What it detects
    Four ways a feature silently stops carrying what it used to:
    (a) a datetime's resolution drops (seconds to days: every value at midnight);
    (b) its cardinality collapses: many distinct values per batch in one split or period, few or
    one in another (compared at equal batch size, and on the sampled values when recorded);
    (c) its dtype changes (float to int, datetime to object, float32 to float16);
    (d) its fractional parts vanish (the share of whole numbers jumps to 100%).
    Each is checked between the training split and every other split, within each split from
    some step on, and, with ``--baseline``, against the same split of the baseline run. A feature
    constant in every batch of every split is reported: as a warning when it is a named column
    holding a value other than 0 (a computed feature that never varies), else as information.
    Where every recorded feature holds one and the same value in every row of every batch of
    every split (a noise buffer allocated and never drawn: a generator fed zeros), and no
    logged metric that names its direction (a reward, an accuracy) kept improving, the whole
    input is reported once, as an error: the model's output cannot depend on its input.

Why it matters
    Nothing raises an error: an ETL step that casts a timestamp to a date turns hour-of-day
    features into constants, the loss still falls, and the model is useless where the time of day
    matters. Only the recorded profiles of the inputs show it.

Example
    ``Feature 'ts' collapsed in val (steps 400-460) compared with train: timestamps lost their
    time of day: resolution s in train, D in val (every value at midnight).``

How to fix
    Find the step that truncates or casts the feature for the collapsed split or period
    (``.dt.floor("D")``, ``.dt.date``, ``astype(int)``, ``round``, a failed join filling a
    default) and keep full precision; assert dtypes and resolutions at pipeline boundaries.

False positives
    Each check asks for odds below `chance` that the collapse happened by luck, and cardinality
    must drop by `factor` at equal batch size in both the per-batch counts and the samples, so
    unshuffled validation loaders and small validation sets stay quiet. A split that reads
    the same rows at every step (full-batch training on one graph: the same batch profiles at
    every step) is as many draws as it has rows, whatever was sampled over the steps: a sparse
    column 0 in 140 training nodes is expected of validation's value shares at 140 draws. Fewer distinct values
    with the same mean, std and range (within `spread_tolerance`) are a coarser grid, not a
    collapse: train-only augmentation (random shifts, mixup) makes training images continuous
    while validation keeps the raw levels. Values whose range spans `span_ratio` times the
    other side's (uint8 pixels never scaled to [0, 1]), or whose range does not meet the other
    side's (a split left unstandardized), are on another scale, which train-val-mismatch
    reports. A split that really covers less (a validation month during
    which a month feature is constant) is still reported. A column constant at 0 everywhere
    (the dummy of a category never seen, `get_dummies(dummy_na=True)` without NaNs) and a
    tensor's numbered columns (an image's blank border pixels) are information only, and so
    is a fixed input whose features hold values of their own (Deep Image Prior's one noise
    vector fed at every step): only one value in every feature is the whole input. One value
    everywhere is a note per feature too where the objective kept improving (a logged reward
    or accuracy whose last quarter beats its first eighth, one-sided Mann-Whitney p <
    `alpha`; in a game of several players, a reward only): a contextless bandit's policy is fed one constant state by design and learns its
    best arm. A tensor
    feature's distinct values and whole-number share are counted on a strided window of the
    batch, which can read an image's blank border column alone: where the batch's exact range
    varies but its window saw one value, or its randomly sampled values hold fractions, the
    window's 100% whole numbers or single value are not the batch's.
"""
from __future__ import annotations

import re
from functools import lru_cache, partial

import numpy as np

from tracelab.analyzers._inputs import (Batches, Side, apart, check_pair, expected_distinct,
                                        feature_profiles, fmt, may_change, may_collapse,
                                        rescaled, samples_of, spread_matches, time_changes)
from tracelab.analyzers._dynamics import OUTCOME
from tracelab.analyzers._learning_rate import several_players
from tracelab.analyzers._objectives import objective_gained
from tracelab.analyzers._reorder import reordered_between
from tracelab.analyzers._splits import repeated_rows
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import TRAIN, Needs

_NUMBERED = re.compile(r"[A-Za-z_]*\d*\[\d+\]")  # a tensor's unnamed columns: feature[3]

_FIX = {
    "resolution": "Find the step that truncates this timestamp ({where}): .dt.floor('D'), "
                  ".dt.date, astype('datetime64[D]'), a date-only file format or database "
                  "column; keep full resolution and assert it where the data enters the "
                  "pipeline.",
    "dtype": "Find the cast applied to this feature ({where}) — astype(int), .long(), "
             ".half(), a CSV round trip — and keep the original dtype; assert dtypes at the "
             "pipeline's boundaries.",
    "int_frac": "Find where this feature is rounded or cast to integers ({where}) and keep it "
                "floating point; assert dtypes at the pipeline's boundaries.",
    "cardinality": "Check how this feature is computed ({where}): a truncated timestamp (for "
                   "time-of-day features), a failed join or a fill value leaves it (nearly) "
                   "constant; build it exactly as for the healthy data.",
}


@rule(name="input-collapse", code="TL302", requires=(Needs.INPUTS,), merge="feature",
      plot=Plot.FEATURE_SPREAD,
      links=(explains("train-val-mismatch", "unnormalized-inputs",
                      why="a collapsed feature no longer matches its own distribution elsewhere",
                      timing="overlap", place="feature"),
             explains("collapsed-outputs", "dead-units", *OUTCOME,
                      why="an input that is one value everywhere gives every unit one value "
                          "for every row: the outputs cannot vary with the input, a unit "
                          "below zero is dead for the whole batch, and nothing about the "
                          "data can be learned", timing="overlap",
                      when=lambda cause, _: cause.evidence.get("whole_input") is True)))
def input_collapse(run: Run, *, factor: float = 6.0, min_distinct: float = 5.0,
                   max_int_frac: float = 0.9, chance: float = 1e-6, min_batches: int = 3,
                   span_ratio: float = 10.0, spread_tolerance: float = 0.25,
                   reorder_distance: float = 0.3, alpha: float = 1e-3,
                   baseline: Run | None = None) -> list[Finding]:
    limits = dict(factor=factor, min_distinct=min_distinct, max_int_frac=max_int_frac,
                  chance=chance)
    samples = samples_of(run)
    base = ({f: (by, pooled) for f, by, pooled in feature_profiles(baseline.inputs)}
            if baseline is not None else {})
    base_samples = samples_of(baseline) if baseline is not None else {}
    findings: list[Finding] = []
    every = [(f, pooled) for f, _, pooled in feature_profiles(run.inputs)]
    # A split whose columns arrive in another order shows other features' values under each
    # name: train-val-mismatch names the order; nothing collapsed.
    moved = lru_cache(maxsize=None)(partial(_moved, every, min_w=reorder_distance))
    constant: dict[str, tuple[list, float]] = {}  # feature -> its batches, its one value
    varied = False  # some feature varies (or collapsed against another split)
    for feature, by_split, pooled in feature_profiles(run.inputs):
        sides = {s: Side(s, rows, partial(samples.get, (s, feature)), pooled[s])
                 for s, rows in by_split.items()}
        reported: set[tuple[str, str]] = set()  # (collapsed split, kind): each told once

        def report(split: str, a: Side, b: Side, held: float | None = None) -> bool:
            # One dtype change explains itself wherever it shows: told once per feature.
            key = lambda s: ("*" if s["kind"] == "dtype" else split, s["kind"])  # noqa: E731
            if (not may_collapse(a.p, b.p, **limits) or rescaled(a.p, b.p, ratio=span_ratio)
                    or apart(a.p, b.p)):
                return False
            sym = [s for s in check_pair(a, b, **limits) if key(s) not in reported
                   and not _window_refuted(s, b)]
            if held:
                sym = [s for s in sym if _still_collapsed(s, a, b, held, factor=factor,
                                                          min_distinct=min_distinct)]
            if spread_matches(a.p, b.p, tolerance=spread_tolerance):
                sym = [s for s in sym if s["kind"] != "cardinality"]
            reported.update(key(s) for s in sym)
            if sym:
                findings.append(_finding(feature, b.name, a.name, b.rows, sym))
            return bool(sym)

        # Over time within a split first: the step it started at is the most useful fact.
        for split, rows in by_split.items():
            if not may_change(pooled[split], min_batches=min_batches, factor=factor):
                continue
            for i in time_changes(rows, min_batches=min_batches, **limits):
                before, after = rows.rows(0, i), rows.rows(i)
                if report(split, Side(f"steps {before['step'].min()}-{before['step'].max()} of "
                                      f"{split}", before),
                          Side(f"{split} from step {after['step'].min()} on", after)):
                    break
        train = sides.get(TRAIN)
        for split, side in sides.items():
            if train is not None and split != TRAIN and feature not in moved(split):
                report(split, train, side, repeated_rows(run.inputs, split))
                report(TRAIN, side, train, repeated_rows(run.inputs, TRAIN))
        # Whether the feature is constant is this run's own finding, baseline or not.
        own = bool(reported)
        for split, side in sides.items():
            ref_rows, ref_pooled = base.get(feature, ({}, {}))
            if split in ref_rows:
                report(split, Side(f"the baseline's {split}", ref_rows[split],
                                   partial(base_samples.get, (split, feature)),
                                   ref_pooled[split]),
                       Side(f"this run's {split}", side.rows, lambda side=side: side.samples,
                            side.p))
        if not own and all(side.p.constant for side in sides.values()):
            values = {side.p.min for side in sides.values()}
            if len(values) == 1:
                constant[feature] = (list(by_split.values()), values.pop())
                continue
        varied = True
    whole = None if varied else _one_value(constant)
    # One input everywhere explains nothing where the objective kept improving: an input with
    # nothing to tell (a contextless bandit's one state) is fed so by design.
    # In a game (a GAN's generator and discriminator) a player's own error or accuracy
    # moves as the other player learns, whatever the input: only a return speaks.
    if whole is not None and not objective_gained(run, alpha,
                                                  returns_only=several_players(run)):
        findings.append(_whole_input(list(constant), constant, whole))
    else:
        findings += [_constant(f, groups, value) for f, (groups, value) in constant.items()]
    return findings


def _still_collapsed(symptom: dict, a: Side, b: Side, held: float, *, factor: float,
                     min_distinct: float) -> bool:
    """Whether a cardinality collapse of b still stands when b reads the same `held` rows at
    every step (full-batch training): its sampled values repeat those rows, so the distinct
    values expected of it are those of `held` draws from a's value shares, not of every
    sampled value."""
    ev = symptom["evidence"]
    if symptom["kind"] != "cardinality" or "sampled_distinct_after" not in ev:
        return True
    draws = int(min(len(b.samples), held))
    if draws >= len(b.samples):
        return True
    expected = expected_distinct(a.samples, draws)
    seen = ev["sampled_distinct_after"]
    if expected < min_distinct or seen > expected / factor:
        return False
    old = (f"({seen} distinct among {len(b.samples)} sampled values, "
           f"~{fmt(ev['sampled_distinct_expected'])} expected)")
    symptom["text"] = symptom["text"].replace(old, (
        f"({seen} distinct among {len(b.samples)} sampled values of the same {draws} rows, "
        f"~{fmt(expected)} expected)"))
    ev.update(sampled_distinct_expected=expected, rows_read_again=draws)
    return True


def _window_refuted(symptom: dict, b: Side) -> bool:
    """Whether b's recorded facts refute a symptom read off its counted window. A tensor
    feature's n_unique and int_frac are counted on every k-th value of the batch
    (schema.unique_stride), and a stride that is a multiple of an image's width reads one
    column only: a blank border, 100% whole numbers and one distinct value. The batch's exact
    range (min < max where the window saw one value) and the values sampled at random positions
    (one with a fractional part) describe the whole batch: a window they contradict says
    nothing about fractional parts or distinct values."""
    if symptom["kind"] not in ("int_frac", "cardinality"):
        return False
    if symptom["kind"] == "int_frac":
        values = b.samples
        if values is not None:
            values = np.asarray(values, dtype=float)
            values = values[np.isfinite(values)]
            if len(values):  # sampled over the whole batch: they decide
                return bool(np.any(values != np.round(values)))
    rows = b.rows
    try:
        return bool(len(rows["count"])) and bool(np.all(
            (np.asarray(rows["n_unique"], dtype=float) <= 1)
            & (np.asarray(rows["max"], dtype=float) > np.asarray(rows["min"], dtype=float))))
    except (KeyError, TypeError, ValueError):
        return False


def _moved(every: list, split: str, *, min_w: float) -> set[str]:
    return reordered_between(every, TRAIN, split, min_w=min_w, gain=4.0)


def _finding(feature: str, where: str, ref: str, rows: Batches, symptoms: list[dict]):
    kinds = [s["kind"] for s in symptoms]
    # A lost time of day is unambiguous; fewer distinct values can also mean a split that
    # covers less by design (a validation month), so it stays a warning.
    severe = "resolution" in kinds
    evidence = {"where": where, "compared_with": ref}
    for s in symptoms:
        evidence.update(s["evidence"])
    return input_collapse.finding(
        ERROR if severe else WARNING, feature, (int(rows["step"].min()), int(rows["step"].max())),
        f"Feature '{feature}' collapsed in {where}, compared with {ref}: "
        + "; ".join(s["text"] for s in symptoms) + ".",
        evidence, _FIX[kinds[0]].format(where=where))


def _one_value(constant: dict[str, tuple[list, float]]) -> float | None:
    """The one value every recorded feature holds in every batch of every split (a noise
    buffer allocated and never filled, a blank image), or None: a single feature, or
    features holding different values (a fixed noise input, as Deep Image Prior feeds its
    generator at every step, or positions), are not one value everywhere."""
    values = {value for _, value in constant.values()}
    if len(constant) < 2 or len(values) != 1:
        return None
    value = values.pop()
    return value if value == value else None


def _whole_input(features: list[str], constant: dict[str, tuple[list, float]],
                 value: float) -> Finding:
    steps = np.concatenate([g["step"] for groups, _ in constant.values() for g in groups])
    shown = ", ".join(features[:3]) + (f" and {len(features) - 3} more" if len(features) > 3
                                       else "")
    return input_collapse.finding(
        ERROR, "inputs", (int(steps.min()), int(steps.max())),
        f"Every one of the {len(features)} input features ({shown}) is {fmt(value)} in every "
        "row of every recorded batch of every split: the model is fed one and the same input "
        "at every step, so its output cannot depend on its input (a generator fed it "
        "produces one sample, a classifier one prediction).",
        {"value": value, "features": len(features), "whole_input": True,
         "batches": int(len(np.unique(steps)))},
        "Check where the input is filled: a noise buffer allocated but never drawn "
        "(torch.zeros(...) or torch.empty(...) without .normal_()), a tensor overwritten by "
        "its fill value, or a loader returning a placeholder.")


def _constant(feature: str, groups: list[Batches], value: float) -> Finding:
    steps = np.concatenate([g["step"] for g in groups])
    # A column the user named and computed (a bucketing, a derived field) that never varies
    # lost what it was built for; 0 is an indicator of a category never seen (a one-hot or
    # dummy_na column), and a tensor's numbered columns (border pixels) are not built one by
    # one: those are information.
    built = value == value and value != 0 and not _NUMBERED.fullmatch(feature)
    shown = f" ({fmt(value)})" if value == value else ""
    if built:
        return input_collapse.finding(
            WARNING, feature, (int(steps.min()), int(steps.max())),
            f"Feature '{feature}' is constant{shown} in every recorded batch of every split: "
            "the column was computed to vary and carries no information.",
            {"value": value, "batches": len(steps)},
            f"Check how '{feature}' is computed: bucket boundaries outside the values' range "
            "(years written 1970-1982 against boundaries 73/76/79), a fill value, a failed "
            "join or a truncated timestamp leave one value everywhere.")
    return input_collapse.finding(
        INFO, feature, (int(steps.min()), int(steps.max())),
        f"Feature '{feature}' is constant{shown} in every "
        "recorded batch of every split: it carries no information.",
        {"value": value, "batches": len(steps)},
        "Drop the feature, or check how it is computed if it should vary (a fill value, a failed "
        "join, a truncated timestamp).")
