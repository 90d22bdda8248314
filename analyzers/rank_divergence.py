"""rank-divergence: one rank of a distributed run drifts away from the others.

What it detects
    In a run recorded by several ranks (torch.distributed), a rank whose train loss sits
    consistently above or below the other ranks' (a data-skewed rank), or whose gradient norm
    differs from theirs (desynchronized replicas). The loss is compared step by step with the
    median of the other ranks, over the whole run and over its second half (each at least
    `min_steps` steps): a warning when the mean gap is at least `loss_gap` of the loss level and
    the rank sits on that side on at least `consistency` of the steps. The gradient norm (the
    total over the parameters every rank recorded) is an error when its median relative
    difference exceeds `grad_rtol`. With two ranks the one with the higher loss is named.
    Each rank's input profiles are compared too: a rank whose train inputs have, on at least
    half of the features (`input_share`), a median mean more than `input_z` of the others'
    std away from theirs, or a median std `input_ratio` times theirs (or less), reads data
    prepared differently; with two ranks the one farther from zero mean and unit std is named.

Why it matters
    Data-parallel ranks train one model on shards of the same data: their losses differ only by
    sampling noise, and after DDP's all-reduce their gradients are identical. A rank whose loss is
    persistently off reads different data (an unshuffled or wrong shard, a preprocessing step that
    runs on one rank only, such as normalization); gradients that differ mean the replicas are
    not averaged at all, so each rank trains its own model and the checkpoint of rank 0 is not
    the model of the run.

Example
    Rank 1's train loss sits 48% above the other ranks' on 97% of 60 steps; or rank 1's gradient
    norm differs from rank 0's by a median 31% when the model was never wrapped in
    ``DistributedDataParallel``; or rank 1's 3 input channels have mean 0.45 and std 0.29
    against about 0 and 1 on the other ranks: its loader skips normalization.

How to fix
    For inputs that differ, run the same preprocessing on every rank (look for rank-dependent
    code in the data pipeline). For a loss gap, check the sampler (``DistributedSampler`` with
    ``set_epoch`` each epoch) and that every rank runs the same preprocessing on the same kind
    of data. For a gradient gap, wrap the model in ``DistributedDataParallel`` (or all-reduce
    the gradients) and make sure ``no_sync`` is left before the optimizer step.

False positives
    Ranks that hold deliberately different data (one language per rank) differ in loss by design.
    In simulated healthy runs (2 to 8 ranks, 30 to 300 steps) sampling noise alone fired in at
    most 2% when each rank's loss carried 50% per-step noise, and never at 10%; a real skew
    keeps one side on nearly every step.
    Recording every micro-batch inside ``no_sync`` during gradient accumulation, or sharded data
    parallelism (FSDP, ZeRO) whose ranks hold different gradient shards, makes gradient norms differ
    legitimately: record only optimizer steps, or set ``grad_rtol = inf``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.core.findings import ERROR, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import GRAD, LOSS_NAME, TRAIN, Needs


def _by_rank(rows: pd.DataFrame, value: str) -> pd.DataFrame:
    """Step × rank, keeping the steps every rank recorded with finite values."""
    wide = rows.pivot_table(index="step", columns="rank", values=value, aggfunc="last")
    wide = wide.astype(float)
    return wide[np.isfinite(wide).all(axis=1)]


def _loss_gap(wide: pd.DataFrame, rank: int, floor: float) -> tuple[float, float]:
    """(mean gap to the other ranks' median relative to the loss level, share of steps on the
    side of that gap)."""
    diff = wide[rank] - wide.drop(columns=rank).median(axis=1)
    level = max(float(wide.median(axis=1).abs().median()), floor)
    gap = float(diff.mean()) / level
    return gap, float((np.sign(diff) == np.sign(gap)).mean())


@rule(name="rank-divergence", code="TL501", requires=(Needs.LOSS,), merge="rank", plot=Plot.RANKS)
def rank_divergence(run: Run, *, min_steps: int = 30, loss_gap: float = 0.1,
                    consistency: float = 0.8, grad_rtol: float = 0.01,
                    min_grad_steps: int = 3, input_z: float = 1.0, input_ratio: float = 2.0,
                    input_share: float = 0.5, min_input_batches: int = 3) -> list[Finding]:
    if len(run.ranks) < 2:
        return []
    return (_input_drift(run, input_z, input_ratio, input_share, min_input_batches)
            + _loss_drift(run, min_steps, loss_gap, consistency)
            + _grad_desync(run, grad_rtol, min_grad_steps))


def _input_drift(run: Run, z: float, ratio: float, share: float,
                 min_batches: int) -> list[Finding]:
    inp = run.inputs
    rows = inp[(inp["split"] == TRAIN) & inp["mean"].notna() & inp["std"].notna()]
    if "rank" not in rows or rows["rank"].nunique() < 2:
        return []
    batches = rows.groupby(["feature", "rank"])["step"].nunique()
    profile = rows.groupby(["feature", "rank"])[["mean", "std"]].median().astype(float)
    profile = profile[batches >= min_batches]
    means, stds = profile["mean"].unstack("rank"), profile["std"].unstack("rank")
    means, stds = means.dropna(), stds.dropna()
    if means.shape[1] < 2 or not len(means):
        return []
    candidates = []
    for rank in means.columns:
        other_mean = means.drop(columns=rank).median(axis=1)
        other_std = stds.drop(columns=rank).median(axis=1).clip(lower=1e-12)
        shifted = (means[rank] - other_mean).abs() > z * other_std
        scaled = (stds[rank] / other_std >= ratio) | (other_std / stds[rank].clip(lower=1e-12)
                                                      >= ratio)
        odd = shifted | scaled
        if odd.mean() >= share:
            oddness = float((means[rank].abs() + np.log(stds[rank].clip(lower=1e-12)).abs())
                            [odd].mean())
            candidates.append((oddness, rank, odd, other_mean, other_std))
    if not candidates:
        return []
    if means.shape[1] == 2:  # each differs from "the other": name the one farther from unit
        candidates = [max(candidates, key=lambda c: c[0])]
    findings = []
    for _, rank, odd, other_mean, other_std in candidates:
        feature = str(odd[odd].index[0])
        findings.append(rank_divergence.finding(
            WARNING, f"rank {rank}", (int(rows["step"].min()), int(rows["step"].max())),
            f"Rank {rank}'s input batches differ from the other ranks' on {int(odd.sum())} of "
            f"{len(odd)} features: '{feature}' has mean {means.at[feature, rank]:.3g} and std "
            f"{stds.at[feature, rank]:.3g} against {other_mean[feature]:.3g} and "
            f"{other_std[feature]:.3g}, so its data is prepared differently.",
            {"rank": rank, "features_differing": int(odd.sum()), "features": len(odd),
             "feature": feature, "rank_mean": float(means.at[feature, rank]),
             "rank_std": float(stds.at[feature, rank]),
             "others_mean": float(other_mean[feature]), "others_std": float(other_std[feature])},
            "Run the same preprocessing (normalization, transforms) on every rank: look for "
            "rank-dependent code in the data pipeline."))
    return findings


def _loss_drift(run: Run, min_steps: int, loss_gap: float, consistency: float) -> list[Finding]:
    sc = run.scalars
    loss = _by_rank(sc[(sc["split"] == TRAIN) & (sc["name"] == LOSS_NAME)], "value")
    if len(loss) < min_steps or loss.shape[1] < 2:
        return []
    # A gap that is tiny next to the starting loss is not worth a look, however steady.
    floor = 0.05 * float(loss.iloc[: max(len(loss) // 10, 1)].median(axis=1).abs().median())
    # The whole run, then its second half if long enough: a drift may start mid-run.
    half = loss.iloc[len(loss) // 2:]
    windows = (loss, half) if len(half) >= min_steps else (loss,)
    findings = []
    for rank in loss.columns:
        for window in windows:
            gap, share = _loss_gap(window, rank, floor)
            if abs(gap) >= loss_gap and share >= consistency:
                break
        else:
            continue
        if loss.shape[1] == 2 and gap < 0:
            continue  # with two ranks each differs from "the other": name the higher loss
        mine = float(window[rank].mean())
        others = float(window.drop(columns=rank).median(axis=1).mean())
        findings.append(rank_divergence.finding(
            WARNING, f"rank {rank}", (window.index[0], window.index[-1]),
            f"Rank {rank}'s train loss sits {abs(gap):.0%} {'above' if gap > 0 else 'below'} "
            f"the other ranks' on {share:.0%} of {len(window)} steps "
            f"(mean {mine:.3g} vs {others:.3g}).",
            {"rank": rank, "relative_gap": gap, "consistent_share": share,
             "rank_mean_loss": mine, "others_mean_loss": others, "steps": len(window)},
            "Check that every rank gets a shuffled shard of the same data (DistributedSampler, "
            "set_epoch each epoch) and runs the same preprocessing."))
    return findings


def _grad_desync(run: Run, grad_rtol: float, min_grad_steps: int) -> list[Finding]:
    tn = run.tensors
    grads = tn[(tn["kind"] == GRAD)]
    # Only parameters every rank recorded: pipeline or model parallel ranks hold other layers.
    ranks_per_name = grads.groupby("name")["rank"].nunique()
    common = ranks_per_name.index[ranks_per_name == grads["rank"].nunique()]
    grads = grads[grads["name"].isin(common)].assign(sq=lambda d: d["norm"].astype(float) ** 2)
    totals = grads.groupby(["step", "rank"])["sq"].sum(min_count=1) ** 0.5
    norms = _by_rank(totals.rename("norm").reset_index(), "norm")
    if len(norms) < min_grad_steps or norms.shape[1] < 2:
        return []
    findings = []
    for rank in norms.columns[1:] if norms.shape[1] == 2 else norms.columns:
        others = norms.drop(columns=rank).median(axis=1)
        rel = ((norms[rank] - others).abs() / others.abs().clip(lower=1e-12)).median()
        if rel > grad_rtol:
            findings.append(rank_divergence.finding(
                ERROR, f"rank {rank}", (norms.index[0], norms.index[-1]),
                f"Rank {rank}'s total gradient norm differs from the other ranks' by a median "
                f"{rel:.1%} over {len(norms)} steps; all-reduced gradients would be identical, "
                "so the replicas are training different models.",
                {"rank": rank, "median_relative_difference": rel, "steps": len(norms)},
                "Wrap the model in DistributedDataParallel (or all-reduce the gradients) and "
                "leave no_sync before each optimizer step."))
    return findings
