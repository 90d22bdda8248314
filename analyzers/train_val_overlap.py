"""train-val-overlap: validation rows identical to training rows, beyond what chance gives.

What it detects
    The recorder hashes each row of the profiled input batches, and each item where a row
    holds several of one kind (the tensors of a tuple or dict sharing shape and dtype, as a
    siamese pair; the slices along dim 1 of a 4-D+ tensor), keeping a consistent bounded
    sample per split and unit (the hashes below the split's threshold). For each split other
    than train (and other than training data evaluated again: a split named with "train"), it
    counts the fingerprinted rows (or items) whose hash is also among the training ones, below
    the lower of the two thresholds, and fires when they are at least `min_matches`, at least
    `min_overlap` of the split, and more than chance allows: Chernoff's bound on drawing that
    many matches, each with `over_chance` times the chance of one, is below `alpha`. The chance
    that a random row equals one of the training rows is the larger of two estimates. One is
    measured on the rows: the rate q at which two training rows of the first epoch (the
    fingerprinted batches before any row can come back) are identical, within a batch or
    against earlier batches, gives 1 - exp(-q * training rows seen); where the split's own
    first batch repeats at a rate that contradicts q (a two-sided Poisson test at `alpha`:
    training rows drawn with replacement repeat by their sampling), q is that batch's. It is
    not taken where a feature's values repeat no more than the rows (a measurement that
    identifies its row: the rows that repeat were drawn again) nor for items (one image in many
    pairs). The other comes from the number of distinct values each input feature takes (the
    profiles' n_unique), the values of it that one row holds and the training rows seen, as if
    uniform and independent. A few validation rows all found among the training rows are
    judged: 3 of 3 sequences of 49 float values cannot match by chance.

Why it matters
    A validation row that is also a training row measures memory, not generalization. Leaked
    rows (duplicates in the source data, a split made after augmentation or oversampling, the
    same file in both folders, test pairs drawn from the training images) make validation
    metrics too good, so model selection and early stopping pick the wrong model and the
    deployed model disappoints.

Example
    120 of the 256 distinct 'val' rows fingerprinted (47%) are identical to training rows,
    where chance in this feature space gives 0.0%.

How to fix
    Split before any augmentation, oversampling or duplication; deduplicate rows across the
    splits (by id or by content); split grouped data (one user, patient or time span per
    split) with a group-aware splitter; draw evaluation pairs from the evaluation images.

False positives
    Inputs made of a few binary or categorical features repeat by nature: 4 binary features
    take 16 values, and one-hot, binned or skewed categories take far fewer likely rows than
    their columns' values multiply to, so many validation rows equal some training row; the
    training rows repeat each other as often, which the measured chance covers, and the rule
    stays quiet. Natural duplicates (a blank image, an all-zero row,
    a constant channel) are one or two matches, below `min_matches`, and a few per cent of a
    large split, below `min_overlap`. A split whose name holds "train" (training data
    evaluated again) is not judged. The measured chance needs repeats among the training rows:
    a tiny discrete training sample (one small batch, no repeat yet) leaves the profiles'
    estimate, which assumes the values uniform and independent.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import TRAIN, Needs

_FULL = 1 << 52  # the recorder's hash range (recorders/fingerprints.py)
_ITEMS = "items:"  # an item unit's input name (recorders/fingerprints.py)


def _threshold(hashes: np.ndarray) -> int:
    """The split's sampling threshold: the power of two above its largest hash."""
    top = int(hashes.max()) if len(hashes) else 0
    return min(_FULL, 1 << max(top, 1).bit_length())


@rule(name="train-val-overlap", code="TL606", requires=(Needs.FINGERPRINTS,), plot=Plot.NONE)
def train_val_overlap(run: Run, *, min_overlap: float = 0.05, over_chance: float = 3.0,
                      min_matches: int = 3, alpha: float = 1e-3) -> list[Finding]:
    fp = run.fingerprints
    if not len(fp) or not {"step", "split", "input", "hash"} <= set(fp.columns):
        return []
    fp = fp.assign(hash=pd.to_numeric(fp["hash"], errors="coerce"))
    fp = fp[fp["hash"].notna() & fp["split"].notna() & fp["input"].notna()]
    fp = fp.assign(input=fp["input"].astype(str), split=fp["split"].astype(str),
                   step=pd.to_numeric(fp["step"], errors="coerce").fillna(0))
    units = {key: np.unique(g["hash"].to_numpy(dtype=np.int64))
             for key, g in fp.groupby(["split", "input"])}
    findings = []
    for split in sorted({s for s, _ in units}):
        if TRAIN in str(split).lower():  # train itself, or training data evaluated again
            continue
        best = None
        for (s, unit), rows in units.items():
            train = units.get((TRAIN, unit))
            if s != split or train is None:
                continue
            limit = min(_threshold(train), _threshold(rows))
            mine, theirs = rows[rows < limit], train[train < limit]
            matches = int(np.isin(mine, theirs).sum())
            if not len(mine) or matches < min_matches or matches < min_overlap * len(mine):
                continue
            seen = len(theirs) * _FULL / limit
            try:
                chance = _chance(run, fp, unit, seen)
            except (TypeError, ValueError, KeyError):  # malformed profiles: no estimate
                chance = 1.0
            if not unit.startswith(_ITEMS):  # items repeat by design: one image, many pairs
                chance = max(chance, _repeat_chance(run, fp, split, unit, seen, alpha))
            bound = _tail_bound(matches, len(mine), min(1.0, over_chance * chance))
            if bound <= alpha and (best is None or matches / len(mine) > best[0]):
                best = (matches / len(mine), unit, matches, len(mine), len(theirs), chance, bound)
        if best is None:
            continue
        share, unit, matches, n, train_n, chance, bound = best
        what = (f"items ({unit[len(_ITEMS):]}, each on its own)" if unit.startswith(_ITEMS)
                else "rows")
        steps = fp.loc[fp["split"] == split, "step"]
        findings.append(train_val_overlap.finding(
            WARNING, split, (int(steps.min()), int(steps.max())),
            f"{matches} of the {n} distinct '{split}' {what} fingerprinted ({share:.0%}) are "
            f"identical to training {what.split()[0]}, where chance in this feature space "
            f"gives {chance:.1%}: its metrics partly measure memory of the training data.",
            {"overlap_share": share, "matches": matches, "rows": n, "train_rows": train_n,
             "chance": chance, "p_bound": bound, "input": unit},
            "Split before any augmentation or oversampling, deduplicate rows across the "
            "splits (by id or content), and split grouped data with a group-aware splitter."))
    return findings


def _tail_bound(matches: int, n: int, p: float) -> float:
    """Chernoff's bound on P(at least `matches` of `n` rows match by chance p each):
    exp(-n KL(matches/n || p)), 1 when the share is no more than p."""
    share = matches / n
    if share <= p:
        return 1.0
    p = min(max(p, 1e-300), 1.0 - 1e-12)
    kl = share * math.log(share / p)
    if share < 1.0:
        kl += (1.0 - share) * math.log((1.0 - share) / (1.0 - p))
    return math.exp(-n * kl)


def _repeat_chance(run: Run, fp, split: str, unit: str, train_rows: float,
                   alpha: float) -> float:
    """The chance that a random row (or item) of `unit` equals one of `train_rows` distinct
    training ones, measured on the rows themselves: q, the rate at which two rows drawn apart
    are identical, gives 1 - exp(-q train_rows) at most (skewed values give less), whatever the
    values' profiles say (one-hot, binned or skewed categories collide far more often than
    their distinct values suggest). q is the training split's (its first epoch's rows, see
    `_train_repeats`) unless `split`'s own first batch, rows drawn in turn from the same
    population, repeats at a rate that contradicts it (two-sided Poisson test at `alpha`):
    training rows sampled with replacement, or duplicated before training, repeat by their
    sampling, not by chance; then q is `split`'s. 0 when nothing was measured."""
    if _identifying_feature(run, fp, unit):
        return 0.0
    matches, pairs = _train_repeats(fp, unit)
    q = matches / pairs if pairs > 0 else 0.0
    own, own_pairs = _first_batch_repeats(run, fp, split, unit)
    if own_pairs > 0:
        expected = q * own_pairs
        if pairs <= 0 or min(_poisson_cdf(own, expected),
                             1.0 - _poisson_cdf(own - 1, expected)) < alpha / 2:
            q = own / own_pairs
    return 1.0 - math.exp(-train_rows * q) if q > 0 else 0.0


def _identifying_feature(run: Run, fp, unit: str) -> bool:
    """Whether a profiled feature of the training split's first fingerprinted batch repeats
    no more than its rows do (its distinct values' share of its values at least the distinct
    rows' share of the rows): its values repeat only where a whole row does, so the rows that
    repeat are the same rows drawn again (sampled with replacement, duplicated), not values
    that collide by chance, which would repeat a feature more often than the rows it belongs
    to (a one-hot column, a binned or skewed category)."""
    hashes, steps, _ = _sample(fp, TRAIN, unit)
    if not len(hashes):
        return False
    first = hashes[steps == steps.min()]
    share = len(np.unique(first)) / len(first)
    try:
        inp = run.inputs
        at = inp[(inp["split"] == TRAIN) & (pd.to_numeric(inp["step"], errors="coerce")
                                             == steps.min())].groupby("feature").first()
        distinct = (pd.to_numeric(at["n_unique"], errors="coerce")
                    / pd.to_numeric(at["count"], errors="coerce"))
    except (AttributeError, KeyError, TypeError, ValueError):
        return False
    return bool(len(first) >= 2 and (distinct >= share).any())


def _sample(fp, split: str, unit: str):
    """(hashes, steps, scale) of a split's unit below its sampling threshold, in written order;
    each row kept stands for `scale` rows."""
    rows = fp[(fp["split"] == split) & (fp["input"] == unit)]
    hashes = rows["hash"].to_numpy(dtype=np.int64)
    steps = rows["step"].to_numpy(dtype=float)
    if not len(hashes):
        return hashes, steps, 1.0
    limit = _threshold(hashes)
    below = hashes < limit
    return hashes[below], steps[below], _FULL / limit


def _train_repeats(fp, unit: str) -> tuple[float, float]:
    """(repeats, pairs compared) among the training rows of the first epoch's fingerprinted
    batches: the steps while the rows processed (a batch a step, the first batch's rows) are no
    more than the distinct training rows, so that no row has come back yet; each row is
    compared with the rows before it in its batch and with the distinct rows of the earlier
    fingerprinted batches. The first batch is written whole (repeats included), later batches
    only their rows not seen before: a batch's repeats are its rows less its new ones."""
    hashes, steps, scale = _sample(fp, TRAIN, unit)
    order = np.unique(steps)
    if not len(order):
        return 0.0, 0.0
    admitted = float((steps == order[0]).sum())
    batch = admitted * scale
    distinct = len(np.unique(hashes)) * scale
    matches = pairs = before = 0.0
    for step in order:
        if step > order[0] and (step - order[0] + 1) * batch > distinct:
            break  # rows may come back from here on: no longer chance alone
        new = float(len(np.unique(hashes[steps == step])))
        matches += max(0.0, admitted - new)
        pairs += admitted * (before + (batch - 1) / 2)
        before += new * scale
    return matches, pairs


def _first_batch_repeats(run: Run, fp, split: str, unit: str) -> tuple[float, float]:
    """(repeats, pairs) within `split`'s first fingerprinted batch, written whole: its rows at
    its first step less their distinct ones (later batches of that step write only new rows),
    among the pairs of the first batch's rows (the rows of the step's first input profile,
    where the profiles tell; the rows written otherwise)."""
    hashes, steps, scale = _sample(fp, split, unit)
    if not len(hashes):
        return 0.0, 0.0
    first = hashes[steps == steps.min()]
    written = float(len(first))
    repeats = written - len(np.unique(first))
    rows = written
    try:
        inp = run.inputs
        at = inp[(inp["split"] == split) & (pd.to_numeric(inp["step"], errors="coerce")
                                             == steps.min())]
        counts = pd.to_numeric(at.groupby("feature")["count"].first(), errors="coerce")
        counts = counts[np.isfinite(counts) & (counts > 0)]
        if len(counts) and not unit.startswith(_ITEMS):
            rows = min(rows, max(float(counts.min()) / scale, repeats + 1.0))
    except (AttributeError, KeyError, TypeError, ValueError):
        pass
    return repeats, rows * (rows * scale - 1) / 2


def _poisson_cdf(k: float, mean: float) -> float:
    """P(X <= k) for X Poisson(mean)."""
    if k < 0:
        return 0.0
    if mean <= 0:
        return 1.0
    term = total = math.exp(-mean) if mean < 700 else 0.0
    if term == 0.0:  # a mean too large for the series: the normal approximation
        return 0.5 * math.erfc((mean - k - 0.5) / math.sqrt(2 * mean))
    for i in range(1, int(k) + 1):
        term *= mean / i
        total += term
    return min(1.0, total)


def _chance(run: Run, fp, unit: str, train_rows: float) -> float:
    """The chance that a random row (or item) of `unit` equals one of `train_rows` distinct
    training ones, when each value of a profiled feature is uniform over as many values as
    the feature's training profiles saw at most: a row holds count / batch values of a
    feature (a column one, an image channel its pixels), the batch being the rows the
    training split fingerprinted at its first batch. 1 when the profiles cannot say."""
    inp = run.inputs
    if not len(inp) or not {"split", "feature", "n_unique", "count", "step"} <= set(inp.columns):
        return 1.0
    profiled = inp[inp["split"] == TRAIN]
    train = fp[fp["split"] == TRAIN]
    members = unit[len(_ITEMS):] if unit.startswith(_ITEMS) else unit
    rows_unit = [u for u in train["input"].unique() if not u.startswith(_ITEMS)
                 and set(members.split(",")) <= set(u.split(","))]
    if not len(profiled) or not rows_unit:
        return 1.0
    kept = train[train["input"] == rows_unit[0]]
    first = kept[kept["step"] == kept["step"].min()]
    # the first batch's rows below the unit's final threshold, a consistent sample of them
    limit = _threshold(kept["hash"].to_numpy(dtype=np.int64))
    batch = int((first["hash"].to_numpy(dtype=np.int64) < limit).sum()) * _FULL / limit
    at = profiled[profiled["step"] == first["step"].iloc[0]]
    if not len(at) or batch <= 0:
        return 1.0
    distinct = profiled.groupby("feature")["n_unique"].max().astype(float)
    count = at.groupby("feature")["count"].max().astype(float)
    known = [f for f, c in count.items()
             if np.isfinite(c) and c > 0 and np.isfinite(distinct.get(f, np.nan))]
    levels = {f: math.log(max(distinct[f], 1.0)) for f in known}
    one = _log_space(unit, members, levels)
    # A row holding one value of each feature (a table) allows as many rows as the product of
    # the features' values; where clearly more distinct training rows were seen (twice as
    # many: the rows seen are estimated from the sample), a row holds several
    # values of a feature (an image's pixels): count / batch of them.
    if one is None or one >= math.log(max(train_rows, 1.0) / 2):
        log_space = one
    else:
        log_space = _log_space(unit, members, {f: max(1.0, count[f] / batch) * levels[f]
                                               for f in known})
    if log_space is None:
        return 1.0
    if log_space > 700:
        return 0.0
    return 1.0 - math.exp(-train_rows / math.exp(log_space))


def _log_space(unit: str, members: str, bits: dict[str, float]) -> float | None:
    """The log of the number of values a row (or an item) of `unit` can take, from the log of
    each feature's; None when no profiled feature belongs to an item's tensor."""
    if not unit.startswith(_ITEMS):
        return sum(bits.values())
    names = members.split(",")
    spaces = []
    for name in names:
        mine = [b for f, b in bits.items() if f == name or str(f).startswith(name + "[")]
        if not mine and len(names) == 1:
            mine = list(bits.values())
        if not mine:
            return None
        # an item is a tuple's whole tensor (one feature) or one channel of a stacked one
        spaces.append(min(mine))
    return min(spaces)
