"""train-val-overlap: validation rows identical to training rows, beyond what chance gives.

What it detects
    The recorder hashes each row of the profiled input batches (a consistent bounded sample per
    split: the rows whose hash falls below the split's threshold). For each split other than
    train, the share of its fingerprinted rows whose hash is also among the training rows',
    measured below the lower of the two thresholds. It fires when that share is at least
    `min_overlap` and at least `over_chance` times what chance gives in that feature space:
    the chance that a random row equals one of the training rows, from the number of distinct
    values each input feature takes (the profiles' n_unique) and the training rows seen.

Why it matters
    A validation row that is also a training row measures memory, not generalization. Leaked
    rows (duplicates in the source data, a split made after augmentation or oversampling, the
    same file in both folders) make validation metrics too good, so model selection and early
    stopping pick the wrong model and the deployed model disappoints.

Example
    47% of the 256 distinct 'val' rows fingerprinted are identical to training rows, where
    chance in this feature space gives 0.0%.

How to fix
    Split before any augmentation, oversampling or duplication; deduplicate rows across the
    splits (by id or by content); split grouped data (one user, patient or time span per
    split) with a group-aware splitter.

False positives
    Inputs made of a few binary or categorical features repeat by nature: 4 binary features
    take 16 values, so most validation rows equal some training row; the chance estimate
    covers this, and the rule stays quiet. Deliberately repeated evaluation on training data
    (a "train" metric logged as its own split) is reported. Fewer than `min_rows` distinct
    fingerprinted rows in a split are not judged.
"""
from __future__ import annotations

import math

import numpy as np

from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import TRAIN, Needs

_FULL = 1 << 52  # the recorder's hash range (recorders/fingerprints.py)


def _threshold(hashes: np.ndarray) -> int:
    """The split's sampling threshold: the power of two above its largest hash."""
    top = int(hashes.max()) if len(hashes) else 0
    return min(_FULL, 1 << max(top, 1).bit_length())


@rule(name="train-val-overlap", code="TL606", requires=(Needs.FINGERPRINTS,), plot=Plot.NONE)
def train_val_overlap(run: Run, *, min_overlap: float = 0.05, over_chance: float = 3.0,
                      min_rows: int = 50) -> list[Finding]:
    fp = run.fingerprints
    hashes = {s: np.unique(g["hash"].to_numpy(dtype=np.int64)) for s, g in fp.groupby("split")}
    train = hashes.get(TRAIN)
    if train is None:
        return []
    findings = []
    for split, rows in sorted(hashes.items()):
        if split == TRAIN:
            continue
        limit = min(_threshold(train), _threshold(rows))
        mine, theirs = rows[rows < limit], train[train < limit]
        if len(mine) < min_rows:
            continue
        share = float(np.isin(mine, theirs).mean())
        chance = _chance(run, len(theirs) * _FULL / limit)
        if share < min_overlap or share < over_chance * chance:
            continue
        findings.append(train_val_overlap.finding(
            WARNING, split, (int(fp.loc[fp["split"] == split, "step"].min()),
                             int(fp.loc[fp["split"] == split, "step"].max())),
            f"{share:.0%} of the {len(mine)} distinct '{split}' rows fingerprinted are "
            f"identical to training rows, where chance in this feature space gives "
            f"{chance:.1%}: its metrics partly measure memory of the training data.",
            {"overlap_share": share, "rows": len(mine), "train_rows": len(theirs),
             "chance": chance},
            "Split before any augmentation or oversampling, deduplicate rows across the "
            "splits (by id or content), and split grouped data with a group-aware splitter."))
    return findings


def _chance(run: Run, train_rows: float) -> float:
    """The chance that a random row equals one of `train_rows` distinct training rows, when
    each feature takes as many values as its profiles saw at most (rows uniform over them)."""
    inp = run.inputs
    profiled = inp[inp["split"] == TRAIN]
    if not len(profiled):
        return 0.0
    distinct = profiled.groupby("feature")["n_unique"].max().astype(float).clip(lower=1)
    log_space = float(np.log(distinct).sum())
    if log_space > 700:
        return 0.0
    return 1.0 - math.exp(-train_rows / math.exp(log_space))
