"""rank-divergence: one rank of a distributed run drifts away from the others.

What it detects
    In a run recorded by several ranks (torch.distributed), a replica whose weights differ from
    the other ranks' at any recorded step, a rank whose train loss sits consistently above or
    below the other ranks' (a data-skewed rank), or whose gradient norm differs from theirs
    (desynchronized replicas). Data-parallel replicas hold the same weights after every step:
    each weight's norm, mean, min and max are compared across the ranks at every step that
    recorded them, and the first step where a rank's differ by more than `weight_rtol` of the
    weight's norm (norm) or of its largest |value| (mean, min, max) is an error, whatever the
    other steps show. Identical replicas give identical statistics; `weight_rtol` (1e-5) is
    about a hundred float32 roundings, more than a reduction in another order on other
    hardware changes. The loss is compared step by step with the median of the other ranks,
    over the whole run and over its second half (each at least `min_steps` steps): a warning
    when the mean gap is at least `loss_gap` of the loss level and the rank sits on that side
    on at least `consistency` of the steps. The gradient norm (the total over the parameters
    every rank recorded) is an error when its median relative difference exceeds `grad_rtol`.
    With two ranks the one with the higher loss, and for weights and gradients rank 1, is
    named. Each rank's input profiles are compared too: a rank whose train inputs have, on at
    least half of the features (`input_share`), a median mean more than `input_z` of the
    others' std away from theirs, or a median std `input_ratio` times theirs (or less), reads
    data prepared differently; with two ranks the one farther from zero mean and unit std is
    named.

Why it matters
    Data-parallel ranks train one model on shards of the same data: their losses differ only by
    sampling noise, and after DDP's all-reduce their gradients are identical. A rank whose loss is
    persistently off reads different data (an unshuffled or wrong shard, a preprocessing step that
    runs on one rank only, such as normalization); gradients that differ mean the replicas are
    not averaged at all, so each rank trains its own model and the checkpoint of rank 0 is not
    the model of the run. Weights that differ while the gradients agree mean the ranks apply
    different updates to the same gradients, or started from different weights: a learning
    rate or schedule changed on one rank only, a checkpoint loaded on rank 0 after DDP
    broadcast the initial weights, a rank-dependent weight change; the replicas drift apart
    from that step on, however small the difference is at first.

Example
    Rank 1's weights differ from the other ranks' from step 30 on ('2.bias' norm 0.21054
    against 0.213898) though the gradients agree: its learning rate was lowered at step 30 on
    that rank only.
    Rank 1's train loss sits 48% above the other ranks' on 97% of 60 steps; or rank 1's gradient
    norm differs from rank 0's by a median 31% when the model was never wrapped in
    ``DistributedDataParallel``; or rank 1's 3 input channels have mean 0.45 and std 0.29
    against about 0 and 1 on the other ranks: its loader skips normalization.

How to fix
    For inputs that differ, run the same preprocessing on every rank (look for rank-dependent
    code in the data pipeline). For a loss gap, check the sampler (``DistributedSampler`` with
    ``set_epoch`` each epoch) and that every rank runs the same preprocessing on the same kind
    of data. For a gradient gap, wrap the model in ``DistributedDataParallel`` (or all-reduce
    the gradients) and make sure ``no_sync`` is left before the optimizer step. For weights
    that differ under agreeing gradients, make every change to the weights, the optimizer and
    its schedule on every rank (load checkpoints before wrapping the model, or on every rank).

False positives
    Ranks that hold deliberately different data (one language per rank) differ in loss by design.
    In simulated healthy runs (2 to 8 ranks, 30 to 300 steps) sampling noise alone fired in at
    most 2% when each rank's loss carried 50% per-step noise, and never at 10%; a real skew
    keeps one side on nearly every step.
    Recording every micro-batch inside ``no_sync`` during gradient accumulation makes gradient
    norms differ legitimately: record only optimizer steps, or set ``grad_rtol = inf``.
    Weights and gradients are compared only where the ranks hold replicas: FSDP2's sharded
    parameters (meta.json's `sharded_parameters`), FSDP1's flat parameters, empty weight
    placeholders (ZeRO-3) and parameters only some ranks hold (pipeline stages) are left out.
    Training that averages the replicas only now and then (local SGD), that syncs them during
    the next backward pass (``ZeroRedundancyOptimizer(overlap_with_ddp=True)``), tensor-parallel
    shards that are plain tensors, or ranks that train different models on purpose differ by
    design: set ``weight_rtol = inf``. Checked quiet on real DDP and FSDP2 jobs (gloo, two ranks).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.core.findings import ERROR, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import GRAD, LOSS_NAME, TRAIN, WEIGHT, Needs
from tracelab.core.shards import sharded_names

_COMPARED = ("norm", "mean", "min", "max")  # of each weight, across the replicas


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
                    input_share: float = 0.5, min_input_batches: int = 3,
                    weight_rtol: float = 1e-5) -> list[Finding]:
    if len(run.ranks) < 2:
        return []
    return (_input_drift(run, input_z, input_ratio, input_share, min_input_batches)
            + _loss_drift(run, min_steps, loss_gap, consistency)
            + _replicas(run, weight_rtol, grad_rtol, min_grad_steps))


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


def _grad_gaps(run: Run, min_grad_steps: int) -> tuple[dict, pd.Index]:
    """rank -> median relative difference of its total gradient norm from the other ranks'
    (with two ranks, rank 1's from rank 0's), and the steps compared."""
    tn = run.tensors
    if "rank" not in tn:
        return {}, pd.Index([])
    grads = tn[(tn["kind"] == GRAD)]
    grads = grads[grads["name"].isin(_replicated(run, grads))].assign(
        sq=lambda d: d["norm"].astype(float) ** 2)
    totals = grads.groupby(["step", "rank"])["sq"].sum(min_count=1) ** 0.5
    norms = _by_rank(totals.rename("norm").reset_index(), "norm")
    if len(norms) < min_grad_steps or norms.shape[1] < 2:
        return {}, pd.Index([])
    gaps = {}
    for rank in norms.columns[1:] if norms.shape[1] == 2 else norms.columns:
        others = norms.drop(columns=rank).median(axis=1)
        gaps[rank] = float(((norms[rank] - others).abs()
                            / others.abs().clip(lower=1e-12)).median())
    return gaps, norms.index


def _replicated(run: Run, rows: pd.DataFrame) -> set[str]:
    """The names of `rows` that every rank holds whole: not those of only some ranks (pipeline
    or model parallel ranks hold other layers), nor FSDP2's sharded parameters (meta.json's
    `sharded_parameters`) and FSDP1's flat parameters, each rank's own shard."""
    held = rows.groupby("name")["rank"].nunique()
    names = {str(n) for n in held.index[held == rows["rank"].nunique()]}
    names -= sharded_names(run.rank_meta.values())
    return {n for n in names if "flat_param" not in n}


def _weight_gaps(run: Run, rtol: float) -> dict:
    """rank -> where its weights first differ from the other replicas' beyond `rtol`: the
    step, the weight, its norm there and the others', the steps compared and those that
    differ. With two ranks rank 1 is compared with rank 0; with more, each with the median."""
    tn = run.tensors
    if "rank" not in tn or not np.isfinite(rtol):
        return {}
    w = tn[(tn["kind"] == WEIGHT) & (tn["numel"] > 0)]
    w = w[w["name"].isin(_replicated(run, w))]
    if w["rank"].nunique() < 2:
        return {}
    wide = w.pivot_table(index=["step", "name"], columns="rank", values=list(_COMPARED),
                         aggfunc="last").astype(float)
    wide = wide[np.isfinite(wide).all(axis=1)]  # non-finite weights: nonfinite-values'
    if not len(wide):
        return {}
    ranks = list(wide["norm"].columns)
    largest = np.maximum(wide["min"].abs(), wide["max"].abs()).max(axis=1)
    gap = pd.DataFrame(0.0, index=wide.index, columns=ranks)
    for stat in _COMPARED:
        values = wide[stat]
        ref = values[ranks[0]] if len(ranks) == 2 else values.median(axis=1)
        scale = values.abs().max(axis=1) if stat == "norm" else largest
        rel = values.sub(ref, axis=0).abs().div(scale.clip(lower=1e-30), axis=0)
        gap = np.maximum(gap, rel.fillna(0.0))
    steps = wide.index.get_level_values("step")
    found = {}
    for rank in ranks[1:] if len(ranks) == 2 else ranks:
        off = gap[rank] > rtol
        if not off.any():
            continue
        first = int(steps[off.to_numpy()].min())
        at = gap[rank][(steps == first) & off.to_numpy()]
        step, name = at.idxmax()
        norms = wide["norm"].loc[(step, name)]
        found[rank] = {"first_step": first, "last_step": int(steps.max()), "weight": str(name),
                       "rank_norm": float(norms[rank]),
                       "others_norm": float(norms.drop(rank).median()),
                       "relative_difference": float(at.max()),
                       "steps_compared": int(steps.nunique()),
                       "steps_differing": int(pd.Index(steps[off.to_numpy()]).nunique())}
    return found


def _replicas(run: Run, weight_rtol: float, grad_rtol: float,
              min_grad_steps: int) -> list[Finding]:
    """One error per rank whose replica differs from the others': by its weights at any step,
    or by its gradient norm over the run."""
    weights = _weight_gaps(run, weight_rtol)
    grads, grad_steps = _grad_gaps(run, min_grad_steps)
    n_grad = len(grad_steps)
    findings = []
    for rank in sorted(set(weights) | {r for r, g in grads.items() if g > grad_rtol}):
        rel = grads.get(rank)
        desync = rel is not None and rel > grad_rtol
        grad_text = (f"its total gradient norm differs from the other ranks' by a median "
                     f"{rel:.1%} over {n_grad} steps" if desync else "")
        evidence = {"rank": rank}
        if rel is not None:
            evidence.update(median_relative_difference=rel, steps=n_grad)
        ddp_fix = ("Wrap the model in DistributedDataParallel (or all-reduce the gradients) "
                   "and leave no_sync before each optimizer step.")
        if rank not in weights:
            findings.append(rank_divergence.finding(
                ERROR, f"rank {rank}", (grad_steps[0], grad_steps[-1]),
                f"Rank {rank}'s {grad_text}; all-reduced gradients would be identical, so the "
                "replicas are training different models.", evidence, ddp_fix))
            continue
        at = weights[rank]
        evidence.update(at)
        where = (f"Rank {rank}'s weights differ from the other ranks' from step "
                 f"{at['first_step']} on ('{at['weight']}' norm {at['rank_norm']:.6g} against "
                 f"{at['others_norm']:.6g}; {at['steps_differing']} of {at['steps_compared']} "
                 "recorded steps differ)")
        if desync:
            text, fix = f"{where} and {grad_text}: the replicas are not averaged.", ddp_fix
        else:
            agree = " though the gradients agree" if rel is not None else ""
            text = (f"{where}{agree}: the ranks apply different updates or started from "
                    "different weights, and the replicas drift apart from there.")
            fix = ("Make every change to the weights, the optimizer and its schedule on every "
                   f"rank (look for rank-dependent code at step {at['first_step']}: a learning "
                   "rate set on one rank, a checkpoint loaded on one rank after "
                   "DistributedDataParallel broadcast the weights); wrap the model in "
                   "DistributedDataParallel before training.")
        findings.append(rank_divergence.finding(
            ERROR, f"rank {rank}", (at["first_step"], at["last_step"]), text, evidence, fix))
    return findings
