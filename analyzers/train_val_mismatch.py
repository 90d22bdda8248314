"""train-val-mismatch: a split's inputs are distributed differently from the training inputs.

What it detects
    For every feature, the values of each non-training split (val, test, serve, ...) are compared
    with the training values: a two-sample Kolmogorov-Smirnov statistic D (largest gap between
    the two cumulative distributions) and the Wasserstein distance divided by the training
    standard deviation (W/σ: how far, in training stds, values must move to match). A feature
    differs when both effect sizes pass their floor and the gap is beyond sampling noise. A split
    is reported when at least half of its features differ, or when one differs strongly beyond
    the noise of all the features compared (Bonferroni: `alpha` over their number). With
    ``--baseline``, each split is also compared with the same split of the baseline run.

Why it matters
    A model evaluated on inputs prepared differently from its training inputs gives validation
    numbers that mean nothing, and no error is ever raised. The classic case is a scaler fitted
    separately per split: training data min-max scaled to [0, 1], validation data z-scored.

Example
    ``val inputs differ from train in 30 of 30 features: train in [0, 1] (min-max scaled?), val
    mean≈0 std≈1 (z-scored?)``, followed by the worst features with their D, W/σ and ranges.
    Named columns (a DataFrame's) that a split records in another order than training, the
    same names in every batch of each (the inputs table keeps each batch's column order), fire
    too, whatever their values: a model that reads a table by position (`frame.to_numpy()`)
    gets another column in each moved slot.

How to fix
    Fit one preprocessor on the training split and apply that same fitted object to every
    split (``scaler.fit(X_train)``, then ``scaler.transform(X_val)``); never fit per split.

False positives
    Effect sizes, not p-values alone, decide: large samples make tiny, harmless differences
    "significant". A small set read at every evaluation (3 test sequences evaluated 3 times)
    counts its distinct rows once, and its means are tested with Student's t on the variance
    both sides share under the premise: a few rows cluster by chance. A split that reads the
    same rows at every step (full-batch training, a fixed set evaluated whole: the same batch
    profiles at every step) counts those rows in KS's noise, not the values sampled over the
    steps: 9 training rows against 2 validation rows establish nothing. Ordinary augmentation (noise, flips, crops, jitter) moves a feature by far
    less than `strong_wasserstein` and stays quiet. Datetime and text features are skipped: a
    time-based split differs in time by design. A genuine covariate shift between splits is
    reported too; it is worth knowing, but not a pipeline bug. The one feature a
    chronological split was made by (a year whose validation values continue the training
    range past its end) is no finding alone, and a split whose inputs change between its first
    and last evaluation beyond sampling noise (a GAN's generated samples logged as validation
    inputs) is not a fixed set and is not compared.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np

from tracelab.analyzers._input_table import ks_wasserstein_rows
from tracelab.analyzers._inputs import (Profile, feature_profiles, fmt, range_label,
                                        rescaled, samples_of, stats_text)
from tracelab.analyzers._reorder import reordered
from tracelab.analyzers._splits import drifting, repeated_rows, split_key
from tracelab.analyzers._tokens import columns_of, token_ids
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import TRAIN, Needs


@rule(name="train-val-mismatch", code="TL301", requires=(Needs.INPUTS,),
      plot=Plot.SPLIT_DISTRIBUTIONS,
      links=(explains("overfitting", "metric-stagnation",
                      why="validation inputs unlike training ones make validation loss and "
                          "accuracy diverge",
                      timing="overlap", place="split"),))
def train_val_mismatch(run: Run, *, min_ks: float = 0.15, min_wasserstein: float = 0.3,
                       strong_ks: float = 0.4, strong_wasserstein: float = 1.0,
                       alpha: float = 1e-4, share: float = 0.5, min_samples: int = 20,
                       max_listed: int = 5, max_in_message: int = 2, span_ratio: float = 10.0,
                       reorder_gain: float = 4.0,
                       baseline: Run | None = None) -> list[Finding]:
    limits = dict(min_ks=min_ks, min_w=min_wasserstein, strong_ks=strong_ks,
                  strong_w=strong_wasserstein, alpha=alpha)
    (mine, mine_n), mine_s = _profiles(run), samples_of(run)
    if token_ids(run.inputs, run.meta):
        ids = columns_of(mine)
        mine = {f: by for f, by in mine.items() if f not in ids}
    pairs = [(TRAIN, mine, mine_s, mine_n, s, "train", s, run) for s in _splits(mine)
             if s != TRAIN]
    if baseline is not None:
        (base, base_n), base_s = _profiles(baseline), samples_of(baseline)
        pairs += [(s, base, base_s, base_n, s, f"the baseline's {s}", f"{s} (vs baseline)",
                   baseline)
                  for s in _splits(mine) if s in _splits(base)]
    findings = _reordered_columns(run)
    for ref_split, ref, ref_s, ref_n, split, ref_name, subject, ref_run in pairs:
        if any(f.evidence.get("split") == split for f in findings) and ref_split != split:
            continue
        compared, rows = [], []
        for feature, by_split in mine.items():
            a, b = ref.get(feature, {}).get(ref_split), by_split.get(split)
            if a is None or b is None or a.kind in "MO" or b.kind in "MO":
                continue
            compared.append((feature, a, b, ref_s.get((ref_split, feature)),
                             mine_s.get((split, feature))))
            rows.append((ref_n.get((ref_split, feature), a.count),
                         mine_n.get((split, feature), b.count)))
        # A split that reads the same rows at every step (full-batch training, a fixed set
        # evaluated whole) samples those rows again and again: its values are that many.
        held = (repeated_rows(ref_run.inputs, ref_split), repeated_rows(run.inputs, split))
        results = [{"feature": feature, **r, "ref": a, "other": b}
                   for (feature, a, b, _, _), r in zip(
                       compared, _distances(compared, rows, min_samples=min_samples,
                                            held=held))
                   if r is not None]
        _judge(results, **limits)
        differ = [r for r in results if r["differs"]]
        strong = [r for r in differ if r["strong"]]
        # The feature a chronological split was made by differs by design: alone, it is no
        # finding; among many differing features it still counts. One feature alone must
        # pass `alpha` among all the features compared (Bonferroni): of 50 features that
        # agree, one in 50 / alpha reaches alpha by chance.
        alone = [r for r in strong if not split_key(r["ref"], r["other"])
                 and r["p"] * len(results) < alpha]
        if not results or not (alone or len(differ) >= share * len(results)):
            continue
        if ref_split != split and drifting(run.inputs, split, min_w=min_wasserstein,
                                           min_z=_z(alpha), share=share):
            continue  # not a fixed set of rows: generated samples, judged by nothing here
        differ.sort(key=lambda r: (-r["w"], -(r["ks"] or 0)))
        sev = ERROR if len(strong) >= share * len(results) else WARNING
        times, scale = _rescaled(differ, ref_name, split, share=share, ratio=span_ratio)
        moved = reordered(differ, {f: (sa, sb) for f, _, _, sa, sb in compared},
                          min_w=min_wasserstein, min_ks=min_ks, gain=reorder_gain)
        if moved:
            sev, scale = ERROR, _moved_text(moved, ref_name, split, len(differ), max_listed)
        steps = (min(r["other"].first_step for r in results),
                 max(r["other"].last_step for r in results))
        worst = differ[:max_listed]
        # The message names the few worst; the evidence lists up to max_listed.
        listed = "; ".join(
            f"'{r['feature']}' {_effect(r)}: {ref_name} {stats_text(r['ref'])}, "
            f"{split} {stats_text(r['other'])}" for r in worst[:max_in_message])
        findings.append(train_val_mismatch.finding(
            sev, subject, steps,
            f"{split} inputs differ from {ref_name} in {len(differ)} of {len(results)} features "
            f"({len(strong)} strongly): {scale or ''}{_headline(differ, ref_name, split)}. "
            f"Worst (KS statistic, Wasserstein distance W in {ref_name} stds σ): {listed}.",
            {"split": split, "reference": ref_name, "features_compared": len(results),
             "features_differing": len(differ), "features_strong": len(strong),
             "worst": [{"feature": r["feature"], "ks": r["ks"], "w_over_std": r["w"],
                        "p_value": r["p"], "method": r["method"]} for r in worst],
             **({"span_ratio": times} if times else {}),
             **({"reordered": moved} if moved else {})},
            f"Diff this run's data pipeline and source against the baseline run's: the same "
            f"features now arrive with different values in {split}." if ref_split == split else
            f"Select the columns by name in one fixed order before building tensors "
            f"(X = frame[train_columns].to_numpy(), or frame.reindex(columns=train_columns)) for "
            f"every split; never rely on a table's column order." if moved else
            f"Scale every split the same way: the step that rescales one split (x / 255, "
            f"ToTensor, a fitted scaler) is missing from the other; assert each split's range "
            f"where batches are built." if times else
            f"Apply the exact preprocessing fitted on {ref_name} to {split}: fit scalers and "
            f"encoders once (scaler.fit(X_train)) and call .transform() on every split; then "
            f"compare how {split} is loaded with how {ref_name} is."))
    return findings


def _column_orders(inputs) -> dict[str, tuple[str, ...]]:
    """Each split's order of named columns (not a tensor's `feature[i]`), where every batch of
    the split recorded the same order."""
    orders: dict[str, set[tuple[str, ...]]] = {}
    try:
        for (_, split), batch in inputs.groupby(["step", "split"], sort=False):
            names = tuple(map(str, batch["feature"]))
            if names and not columns_of(names):
                orders.setdefault(str(split), set()).add(names)
    except (KeyError, TypeError, ValueError):
        return {}
    return {split: next(iter(seen)) for split, seen in orders.items() if len(seen) == 1}


def _reordered_columns(run: Run) -> list[Finding]:
    """A split whose named columns are training's, in another order."""
    orders = _column_orders(run.inputs)
    ref = orders.get(TRAIN)
    findings = []
    for split, names in orders.items():
        if split == TRAIN or ref is None or names == ref or sorted(names) != sorted(ref) \
                or len(set(ref)) != len(ref):
            continue
        moved = [(i, a, b) for i, (a, b) in enumerate(zip(ref, names)) if a != b]
        pairs = ", ".join(f"slot {i}: {TRAIN} '{a}', {split} '{b}'" for i, a, b in moved[:5])
        more = f" and {len(moved) - 5} more" if len(moved) > 5 else ""
        rows = run.inputs[run.inputs["split"].astype(str) == split]["step"]
        findings.append(train_val_mismatch.finding(
            ERROR, split, (int(rows.min()), int(rows.max())),
            f"{split}'s columns arrive in another order than {TRAIN}'s: the same {len(ref)} "
            f"named columns, {len(moved)} of them in another position ({pairs}{more}). A model "
            f"that reads the table by position (frame.to_numpy()) gets another feature in each "
            f"moved slot of {split}.",
            {"split": split, "reference": TRAIN, "train_order": list(ref),
             "order": list(names), "moved": len(moved)},
            f"Select the columns by name in one fixed order before building tensors "
            f"(X = frame[train_columns].to_numpy(), or frame.reindex(columns=train_columns)) for "
            f"every split; never rely on a table's column order."))
    return findings


def _profiles(run: Run) -> tuple[dict[str, dict[str, Profile]], dict[tuple[str, str], float]]:
    """Each feature's pooled profile by split, and the rows behind each (split, feature)."""
    pooled, rows = {}, {}
    for f, by_split, by in feature_profiles(run.inputs):
        pooled[f] = by
        for split, batches in by_split.items():
            rows[(split, f)] = _distinct_rows(batches)
    return pooled, rows


def _distinct_rows(batches) -> float:
    """The values behind a split's pooled statistics: the counts of its distinct batches. A
    batch recorded again with the same count, mean, std and range (a fixed validation set
    evaluated at every epoch, a full-batch training set read at every step) is the same rows
    read again and adds no information to a test on the means."""
    try:
        stats = np.column_stack([np.asarray(batches[k], dtype=float)
                                 for k in ("count", "mean", "std", "min", "max")])
    except (KeyError, TypeError, ValueError):
        return float("nan")
    stats = stats[np.isfinite(stats[:, 0]) & (stats[:, 0] > 0)]
    if not len(stats):
        return float("nan")
    return float(np.unique(np.nan_to_num(stats, nan=np.inf), axis=0)[:, 0].sum())


def _splits(profiles: dict[str, dict[str, Profile]]) -> list[str]:
    return list(dict.fromkeys(s for by in profiles.values() for s in by))


def _distances(compared: list[tuple], rows: list[tuple[float, float]], *,
               min_samples: int,
               held: tuple[float | None, float | None] = (None, None)) -> list[dict | None]:
    """`_distance` of every (feature, a, b, samples of a, samples of b), with the distinct rows
    behind each side's profile (`rows`): the features with enough samples on both sides go
    through KS and Wasserstein together, a batch per pair of sample sizes (a reservoir holds
    as many values of every feature); `held`: each side's rows where it reads the same rows
    at every step (`repeated_rows`), which bound what its samples can tell."""
    tests: dict[tuple[int, int], list[int]] = {}
    for i, (_, _, _, sa, sb) in enumerate(compared):
        if sa is not None and sb is not None and min(len(sa), len(sb)) >= min_samples:
            tests.setdefault((len(sa), len(sb)), []).append(i)
    measured: dict[int, tuple] = {}
    for (size_a, size_b), at in tests.items():
        ks, w, da, db = ks_wasserstein_rows(np.stack([compared[i][3] for i in at]),
                                            np.stack([compared[i][4] for i in at]))
        for i, *r in zip(at, ks.tolist(), w.tolist(), da.tolist(), db.tolist()):
            measured[i] = (r[0], r[1], (size_a, r[2]), (size_b, r[3]))
    return [_distance(a, b, measured.get(i), n, held)
            for i, ((_, a, b, _, _), n) in enumerate(zip(compared, rows))]


def _distance(a: Profile, b: Profile, measured: tuple | None,
              rows: tuple[float, float] = (math.nan, math.nan),
              held: tuple[float | None, float | None] = (None, None)) -> dict | None:
    """Effect sizes of one feature, and the statistic its p-value comes from (`_judge`).

    `measured`: KS, Wasserstein and each side's (size, distinct values) from the samples, or
    None where the samples are too few; `rows`: each side's values behind its profile (its
    distinct batches' counts), which the test on the means counts instead of every read;
    `held`: each side's rows where every step reads the same ones (None elsewhere): sampled
    values beyond them repeat them, and KS's noise counts the rows."""
    scale = a.std if a.std > 0 else b.std
    if measured is not None:
        ks, w, (size_a, distinct_a), (size_b, distinct_b) = measured
        na, nb = (min(_n_eff(size, distinct), h) if h else _n_eff(size, distinct)
                  for size, distinct, h in ((size_a, distinct_a, held[0]),
                                            (size_b, distinct_b, held[1])))
        r = {"ks": ks, "method": "samples", "z": ks * np.sqrt(na * nb / (na + nb))}
    elif np.isfinite([a.mean, b.mean]).all() and a.count > 1 and b.count > 1:
        # Summary statistics only: the W distance of two normals is at least the larger of
        # |Δmean| and 0.8·|Δstd|; Student's t-test on the means stands in for KS's noise
        # check: under its premise (both sides drawn from one distribution) the two share one
        # variance, pooled from both; it counts the distinct rows behind each mean (a
        # validation set of 3 rows read at 3 evaluations is 3 values, not 9) and has the t
        # distribution's tails, the variance being estimated from those rows.
        na, nb = (n if math.isfinite(n) and 1 < n <= c else c
                  for n, c in zip(rows, (a.count, b.count)))
        w = max(abs(a.mean - b.mean), 0.8 * abs(np.nan_to_num(a.std) - np.nan_to_num(b.std)))
        pooled = ((na - 1) * np.nan_to_num(a.std) ** 2
                  + (nb - 1) * np.nan_to_num(b.std) ** 2) / (na + nb - 2)
        se = np.sqrt(pooled * (1 / na + 1 / nb))
        r = {"ks": None, "method": "batch stats", "df": na + nb - 2,
             "z": abs(a.mean - b.mean) / se if se > 0 else None, "p": float(w == 0)}
    else:
        return None
    if not scale > 0:
        w = 0.0 if w == 0 else float("inf")
    else:
        w /= scale
    return {**r, "w": w}


def _judge(results: list[dict], *, min_ks, min_w, strong_ks, strong_w, alpha) -> None:
    """Whether each feature differs: p-values for all features at once, from KS's limiting
    distribution (scipy's kstwobign.sf) or Student's t (two-sided, pooled variance)."""
    from scipy.special import kolmogorov, stdtr

    for method, sf in (("samples", lambda z, _: kolmogorov(z)),
                       ("batch stats", lambda t, df: stdtr(df, -t) * 2)):
        tested = [r for r in results if r["method"] == method and r["z"] is not None]
        if tested:
            z = np.array([r["z"] for r in tested], dtype=float)
            df = np.array([r.get("df") or np.inf for r in tested], dtype=float)
            for r, p in zip(tested, sf(z, df)):
                r["p"] = float(p)
    for r in results:
        del r["z"]
        r.pop("df", None)
        ks, w, significant = r["ks"], r["w"], r["p"] < alpha
        r["differs"] = significant and w >= min_w and (ks is None or ks >= min_ks)
        r["strong"] = significant and w >= strong_w and (ks is None or ks >= strong_ks)


def _z(alpha: float) -> float:
    """The two-sided normal quantile of `alpha`: the z a difference must pass."""
    from scipy.special import ndtri

    return float(-ndtri(alpha / 2))


def _n_eff(size: int, distinct: int) -> int:
    """Sampled values repeat rows seen in several epochs; distinct values bound the information."""
    return min(size, distinct) if distinct > 20 else size


def _effect(r: dict) -> str:
    ks = f"KS {r['ks']:.2f}, " if r["ks"] is not None else ""
    return f"({ks}W/σ {fmt(r['w'])})"


def _moved_text(moved: list[dict], ref_name: str, split: str, differing: int,
                listed: int) -> str:
    pairs = ", ".join(f"{split}'s '{m['feature']}' holds {ref_name}'s '{m['holds']}'"
                      for m in moved[:listed])
    more = f" and {len(moved) - listed} more" if len(moved) > listed else ""
    return (f"{split}'s columns arrive in another order ({len(moved)} of the {differing} "
            f"differing features match another {ref_name} feature, not their namesake: "
            f"{pairs}{more}); ")


def _rescaled(differ: list[dict], ref_name: str, split: str, *, share: float,
              ratio: float) -> tuple[float | None, str | None]:
    """The factor between the two sides' value ranges, and its sentence, when `share` of the
    differing features have ranges `ratio` or more times apart by one common factor (within
    2x of their median): one split scaled and the other not."""
    times = [rescaled(r["ref"], r["other"], ratio=ratio) for r in differ]
    up = [r["other"].max - r["other"].min > r["ref"].max - r["ref"].min for r in differ]
    found = [t if u else 1 / t for t, u in zip(times, up) if t]
    if len(found) < max(1, share * len(differ)):
        return None, None
    mid = float(np.median(found))
    if not all(0.5 <= f / mid <= 2 for f in found):
        return None, None
    wider, narrower, factor = (split, ref_name, mid) if mid > 1 else (ref_name, split, 1 / mid)
    hint = " (uint8 images never divided by 255?)" if 100 <= factor <= 300 else ""
    plural = "s" if len(found) > 1 else ""
    return factor, (f"{wider} values span ~{fmt(round(factor, 1))}x the range of {narrower}'s "
                    f"in {len(found)} feature{plural}: a scaling applied to {narrower} "
                    f"only{hint}; ")


def _headline(differ: list[dict], ref_name: str, split: str) -> str:
    """The preprocessing each side looks like, when most differing features agree on one."""
    sides = []
    for key in ("ref", "other"):
        labels = Counter(range_label(r[key]) for r in differ)
        (label, text), n = labels.most_common(1)[0]
        sides.append((label, text) if label and n >= len(differ) / 2 else (None, None))
    (la, ta), (lb, tb) = sides
    if la != lb and (la or lb):
        top = differ[0]
        return (f"{ref_name} {ta or stats_text(top['ref'])}, "
                f"{split} {tb or stats_text(top['other'])}")
    top = differ[0]
    a, b = top["ref"], top["other"]
    shift = (b.mean - a.mean) / a.std if a.std > 0 else float("nan")
    ratio = b.std / a.std if a.std > 0 else float("nan")
    return (f"e.g. '{top['feature']}' has its {split} mean {fmt(abs(shift))} {ref_name} stds "
            f"{'above' if shift > 0 else 'below'} the {ref_name} mean, and {fmt(ratio)}x its "
            f"spread")
