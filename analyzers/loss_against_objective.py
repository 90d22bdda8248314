"""loss-against-objective: the objective the user logs got worse while the loss did not.

What it detects
    A metric logged beside the loss whose name says which way is better (reward, return,
    score, accuracy, F1, AUC, precision, recall, IoU, BLEU, ROUGE, Dice: higher; error,
    perplexity, MAE, MSE, RMSE, WER, CER: lower) that moves the wrong way over the run, while
    the same split's loss, the quantity the optimizer minimizes, does not get worse. Only a
    split's loss is set against the same split's metric, at the steps both were recorded
    (at least `min_points`), cut into `blocks` equal runs of steps. The rule fires when
    the metric's median in no later block is better than in the first block and in the last
    block is worse (training left it worse than the model it started from, and it never came
    back; a median may tie the start: an episode's length, whole steps, held a block before
    it fell), its last half is
    worse than its first block by a one-sided Mann-Whitney test at `alpha`, it falls as a
    trend (Spearman rank correlation with the step at `alpha_trend`), and the loss's last
    half is not higher than its first block (the same test, at `alpha_loss`). A reward or a
    return (`ret`, `EpRet`, `eprewmean` too; names are matched lower-cased as they are, `mIoU`,
    and cut at their camelCase words, `AverageEpRet`) is also
    judged against its first `start_points` values, the policy the run started from: a flipped
    sign under large steps (Adam at 1e-2) drives the policy to its worst within a few
    updates, inside the first block, so that block's median is already the collapsed level
    and the fall is a step, not a trend. There no block's median may lie above the first
    values' median, the last one below it, and the last half below them by the exact
    one-sided Mann-Whitney test at `alpha` (3 values against 20 or more can reach it); no
    rank trend is asked. On either path, "never came back" is literal: the metric must not
    climb back from its worst, so the rule stays quiet when its last block lies above the
    least earlier block (one-sided Mann-Whitney at `alpha`) or its last half rises as a rank
    trend with the step (at `alpha_trend`). A flipped sign keeps pushing the metric down, to
    its floor or further.
    A bonus added instead of subtracted is read from the loss itself where no metric fell:
    in a run that logs a return, a split's loss logged beside its terms as an exact linear
    combination of them (each step's residual within 1e-5 of its largest term: float32 sums
    agree to 1e-7, no loose relation among 24 steps or more does) gives each term's
    coefficient, and a term named as the policy's entropy itself (`dist_entropy`, CleanRL's
    `losses/entropy`; not `entropy_loss`, already signed) entering with a coefficient above 0
    is minimized: A2C's `value_loss * 0.5 + action_loss + dist_entropy * 0.01`.
    A deterministic actor's loss written as +Q is read from the critic's values where no metric
    fell: with several players and a return logged, the actor's loss (`actor_loss`,
    `policy_loss`, `LossPi`) is `-Q(s, pi(s))` averaged (DDPG, TD3, SAC), the opposite sign of
    the critic's targets `r + gamma * Q'` recorded with `step(targets=...)` and about their size.
    Over the last half of the run, at the profiled steps where the targets' batch mean has a
    settled sign (a single float feature, beyond its standard error), an actor loss with the
    targets' own sign (a one-sided sign test at `alpha`) at a median ratio to them within a
    factor 2 of +1, while the return ends below its first value (its last-half median and its
    last value), is the actor descending the values: TD3's `critic.Q1(s, actor(s)).mean()`
    without its minus.

Why it matters
    The optimizer minimizes the loss. When the loss falls or holds while the objective it
    stands for gets steadily worse, the loss optimizes the opposite of the objective: a sign
    flipped (`log_prob * R` written for `-log_prob * R`, a reward or an accuracy used as a
    loss, a loss maximized). A policy-gradient loss has no lower bound and its value is no
    measure of progress, so nothing else shows it: the run trains, quietly, towards the worst
    policy it can find.

Example
    train episode_reward got worse while the train loss did not: its median went from 12 over
    steps 0-14 to 10 over the last half of the run (higher is better; Mann-Whitney p =
    3.09e-05, rank correlation with the step -0.262), the loss's from -2.09 to -1.25 (no
    significant rise).

How to fix
    Check the sign of every term of the loss: the optimizer minimizes it, so a quantity to
    maximize (a return, a log-likelihood, an accuracy) enters with a minus sign, once
    (REINFORCE: `-log_prob * R`; PPO: `-advantage * ratio`).

False positives
    Overfitting is the training loss falling while the validation metric falls: the rule
    never sets one split's loss against another split's metric. A metric that worsens while
    the loss rises too (a diverging run) agrees with its loss and stays quiet; so does a
    metric that rises and falls back (a reinforcement learner forgetting, PPO's noisy
    returns), which ends no worse than it started, and a return that dips after the first
    updates and climbs back (a lander that crashes before it learns to land), though it may
    end below where it started. Names that say no direction (a length, `d_fake`, anything
    holding "loss", a spread like `return_std`, one side of a preference pair such as DPO's
    `rewards/rejected`, which falls by design, and `rewards/chosen`) are never judged, nor is a
    metric logged at fewer than `min_points` of the loss's steps. Where several players move
    the parameters, each on its own loss (two or more optimizers, with two or more backward
    passes between steps where those are recorded: a GAN's players, an actor and a critic),
    only a reward or a return is judged: a discriminator's falling loss pushes its score of
    the fakes down, while an environment pays the return to the policy and no player scores
    it for another; several optimizers stepping on one loss (Muon with AdamW, an encoder's and
    a decoder's) are one player, and every named metric is judged. A
    curriculum that makes the task harder as it goes, with a loss that does not show it, can
    look the same.
    A perplexity is read as lower-is-better only where it behaves as exp (or 2 **) of the
    split's recorded loss, or of its negation: the log of its median in every one of the
    `blocks` runs of steps within a factor 2 of the loss's absolute median there. A VQ-VAE's
    `perplexity` is its codebook usage (exp of the entropy of its code assignments), which
    rises as more codes are used while the loss falls: no function of the loss, its direction
    is unknown and it is not judged.
    An entropy minimized on purpose (semi-supervised entropy minimization, test-time
    adaptation) is no policy's bonus: without a return logged, its sign is not judged; nor is
    a loss that is no exact sum of its logged terms (a coefficient that changes, SAC's learned
    temperature), nor a term the fit can do without.
    A loss with no recorded `loss_fn` that is below 0 on every judged step is a negated
    surrogate (log-prob x return, summed over an episode): its size follows the returns the
    policy collects, not how well the optimizer did, so its rise towards 0 as the returns
    shrink is no disagreement with the metric and does not veto the finding. Set against a
    reward or a return, a loss without a recorded `loss_fn` that is below 0 at a quarter of
    the judged steps or more is such a surrogate too (normalized advantages centre it on 0,
    below 0 about half the time): a distance to a target never goes below 0, and a policy's
    surrogate is computed on the data the policy itself collects, so its level says nothing
    of progress. A loss below 0 at a few steps only (a value loss less an entropy bonus, where
    the fit is near exact) keeps its veto.
    A stochastic policy's loss (`-log_prob * advantage`, PPO's clipped surrogate, A2C's
    `action_loss`) is a hundredth of the critic's values or less, of either sign: its ratio to
    them is never near +1, and it is not read as +Q. SAC's actor loss adds `alpha * log_prob`
    to -Q; where that term outweighs small values of the same sign the ratio can near +1,
    which is why a return that fell is asked too. Without recorded targets (a single float
    feature), an actor's loss logged by name, or a return, nothing is said.
"""
from __future__ import annotations

import numpy as np
from scipy.stats import binomtest, mannwhitneyu, spearmanr

from tracelab.analyzers._dynamics import fmt
from tracelab.analyzers._learning_rate import several_players
from tracelab.analyzers._loss_contracts import loss_type
from tracelab.analyzers._objectives import (direction, is_actor_loss, is_bonus, is_return,
                                            loss_terms, q_values, run_direction)
from tracelab.core.causes import explained_by, explains
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import LOSS_NAME, Needs

FIX = ("Check the sign of every term of the loss: the optimizer minimizes it, so a quantity to "
       "maximize (a return, a log-likelihood, an accuracy) enters with a minus sign, once "
       "(REINFORCE: -log_prob * R, not log_prob * R).")


@rule(name="loss-against-objective", code="TL614", requires=(Needs.LOSS,), plot=Plot.SCALAR,
      links=(explains("metric-stagnation", "overfitting", "collapsed-outputs",
                      why="a loss that optimizes the opposite of the objective drives the "
                          "model to its worst", timing="overlap"),
             explained_by("loss-below-bound", why="a loss maximized below its bound is the "
                                                  "same flipped sign, seen on the loss",
                          timing="overlap")))
def loss_against_objective(run: Run, *, blocks: int = 8, min_points: int = 24,
                           alpha: float = 1e-3, alpha_trend: float = 0.01,
                           alpha_loss: float = 0.05, start_points: int = 3) -> list[Finding]:
    sc = run.scalars
    if not {"split", "name"} <= set(sc.columns):
        return []
    # Several players (a GAN): one's loss falls as the other's score does. Only a reward or a
    # return is judged then: the environment pays it to the policy (an actor beside its critic),
    # no player scores it for another. Several optimizers stepping on one loss (Muon with
    # AdamW, an encoder's and a decoder's) are one player (`several_players`).
    game = several_players(run)
    judged_name = is_return if game else direction
    findings = []
    pairs = sc[["split", "name"]].drop_duplicates()
    surrogate_ok = loss_type(run) is None
    for split in dict.fromkeys(pairs["split"]):
        loss = run.loss(split)
        if len(loss) < min_points:
            continue
        judged = [_judge(run, split, name, loss, blocks, min_points, alpha, alpha_trend,
                         alpha_loss, surrogate_ok, start_points)
                  for name in pairs[pairs["split"] == split]["name"] if judged_name(name)]
        judged = sorted((j for j in judged if j), key=lambda j: j["p_worse"])
        if judged:
            findings.append(_finding(split, judged))
        elif any(is_return(n) for n in pairs["name"]):
            findings += _bonus_minimized(run, split, blocks)
            if game:
                try:
                    findings += _actor_descends_q(run, split, alpha)
                except (KeyError, ValueError, TypeError, IndexError):
                    pass  # a malformed record says nothing of the actor
    return findings


def _actor_descends_q(run: Run, split, alpha: float) -> list[Finding]:
    """A deterministic actor's loss written as +Q: the actor beside its critic (several
    players) minimizes `-Q(s, pi(s))` averaged over the batch (DDPG, TD3; SAC adds its
    entropy term), so over the last half of the run, once the critic has learned, its loss
    has the opposite sign of the critic's values, the recorded targets `r + gamma * Q'`
    (`q_values`), and about their size (a ratio near -1). A loss named as the actor's
    (`is_actor_loss`), at the profiled steps of that half where the targets' sign is settled,
    that has the targets' own sign (a one-sided sign test at `alpha`) and a median ratio to them
    within a factor 2 of +1 is `+Q`: the actor descends the values it should ascend. A
    stochastic policy's loss (`-log_prob * advantage`, PPO's clipped surrogate) is a hundredth
    of the values or less and never reads as either. The return the environment pays must say
    the same: its last half below its first quarter (the policy the run started from) by a
    one-sided Mann-Whitney test, in every logged return long enough to be judged
    (`_fallen_return`)."""
    q = q_values(run, split)
    if len(q) < 2:
        return []
    q = q.iloc[len(q) // 2:]
    ret = _fallen_return(run)
    if ret is None:
        return []
    out = []
    for name in dict.fromkeys(run.scalars.loc[run.scalars["split"] == split, "name"]):
        if not is_actor_loss(str(name)):
            continue
        a = run.scalar(str(name), split)
        a = a[np.isfinite(a.to_numpy(dtype=float, na_value=np.nan))]
        if len(a) < 2:
            continue
        # The actor's value at the recorded step nearest each profiled one, within the
        # actor's own spacing (TD3's delayed actor steps every other step).
        steps = a.index.to_numpy(dtype=float)
        gap = float(np.median(np.diff(steps)))
        qs = q.index.to_numpy(dtype=float)
        at = np.clip(np.searchsorted(steps, qs), 1, len(steps) - 1)
        near = np.where(np.abs(steps[at - 1] - qs) <= np.abs(steps[at] - qs), at - 1, at)
        keep = np.abs(steps[near] - qs) <= gap
        if keep.sum() < 2:
            continue
        av, qv = a.to_numpy(dtype=float)[near[keep]], q.to_numpy(dtype=float)[keep]
        ratio = av / qv
        same = int((ratio > 0).sum())
        p = float(binomtest(same, len(ratio), 0.5, alternative="greater").pvalue)
        mid = float(np.median(ratio))
        if not (p < alpha and 0.5 <= mid <= 2.0):
            continue
        rname, first, last_half, last = ret
        out.append(loss_against_objective.finding(
            WARNING, f"{split}/{name}", (int(q.index.min()), int(q.index.max())),
            f"The actor's loss {name} has the sign of the critic's values, not the opposite: "
            f"over the last half of the run it has the sign of the mean {split} target "
            f"(r + gamma * Q') at {same} of {len(ratio)} profiled steps (sign test p = "
            f"{fmt(p)}), at a median {fmt(mid)} times its value. A deterministic actor "
            f"minimizes -Q(s, pi(s)), the opposite of the values; this one minimizes +Q, "
            f"the values themselves, and descends to the worst actions the critic knows. "
            f"The return says so: {rname} went from a median {fmt(first)} over its first "
            f"quarter to a median "
            f"{fmt(last_half)} over its last half, {fmt(last)} at the end.",
            {"split": split, "metric": str(name), "same_sign": same, "points": len(ratio),
             "p_sign": p, "ratio": mid, "return": rname, "return_first": first,
             "return_last_half": last_half, "return_last": last, "actor_q": True},
            "Negate the critic's value in the actor's loss: actor_loss = "
            "-critic(state, actor(state)).mean() (the optimizer minimizes the loss, so the "
            "value to maximize enters with a minus sign)."))
    return out


def _fallen_return(run: Run, alpha: float = 0.05) -> tuple[str, float, float, float] | None:
    """The logged returns (`is_return`, in any split, at 3 recorded steps or more) that fell:
    with 8 values or more (a first quarter of two at least), their last half below their first
    quarter by a one-sided Mann-Whitney test at `alpha` (and, as ever, their last half's median
    and last value below the first); with fewer (an evaluation every few
    thousand steps), every later value below the first (the policy the run started from).
    (name, first-quarter median, last-half median, last) of the first, or None where none is
    judged or any judged return did not fall. One first value against a last half's median is
    a coin flip on a run that does not learn; a return the run logs twice (train's and an
    evaluation's) that rose in one is not said to have fallen."""
    sc = run.scalars
    fallen = None
    for split, name in sc[["split", "name"]].drop_duplicates().itertuples(index=False):
        if not is_return(str(name)):
            continue
        v = run.scalar(str(name), str(split)).to_numpy(dtype=float, na_value=np.nan)
        v = v[np.isfinite(v)]
        if len(v) < 3:
            continue
        first, half = v[:max(1, len(v) // 4)], v[len(v) // 2:]
        if len(v) < 8:
            if not (v[1:] < v[0]).all():
                return None
        elif float(mannwhitneyu(half, first, alternative="less").pvalue) >= alpha or \
                not (np.median(half) < v[0] and v[-1] < v[0]):
            return None
        fallen = fallen or (str(name), float(np.median(first)), float(np.median(half)),
                            float(v[-1]))
    return fallen


def _bonus_minimized(run: Run, split, blocks: int) -> list[Finding]:
    """A policy's entropy that its loss adds instead of subtracting: the split's loss logged as
    an exact linear combination of its logged terms (`loss_terms`), a term named as the
    entropy itself (`is_bonus`) entering with a coefficient above 0, in a run that logs a return
    (a policy, whose entropy is the exploration bonus its loss subtracts). The sign is the
    fact: how far the entropy falls depends on the coefficient and on how hard the policy
    gradient pulls, and is reported, not asked (a one-sided Mann-Whitney p of its last half
    below its first block)."""
    fit = loss_terms(run, split)
    if not fit:
        return []
    terms, resid = fit
    out = []
    for name, coef in terms.items():
        if not (is_bonus(name) and coef > 0):
            continue
        e = run.scalar(name, split).to_numpy(dtype=float, na_value=np.nan)
        e = e[np.isfinite(e)]
        if len(e) < 2 * blocks:
            continue
        cut = np.array_split(e, blocks)
        first, half = cut[0], np.concatenate(cut[blocks // 2:])
        p = float(mannwhitneyu(first, half, alternative="greater").pvalue)
        shown = " + ".join(f"{fmt(c)} x {n}" for n, c in terms.items())
        out.append(loss_against_objective.finding(
            WARNING, f"{split}/{name}", (int(run.loss(split).index.min()),
                                         int(run.loss(split).index.max())),
            f"The {split} loss adds the policy's {name} instead of subtracting it: the logged "
            f"loss is {shown} (plus a constant) at every step, to {fmt(resid)} of its largest "
            f"term, so the optimizer minimizes the entropy, the exploration bonus a policy's "
            f"loss rewards: the policy is pushed to collapse onto one action before it has "
            f"explored. Its median went from {fmt(float(np.median(first)))} over the first "
            f"{len(first)} steps to {fmt(float(np.median(half)))} over the last half "
            f"(Mann-Whitney p = {fmt(p)} for a fall).",
            {"split": split, "metric": str(name), "coefficient": coef, "terms": terms,
             "residual": resid, "metric_first": float(np.median(first)),
             "metric_last_half": float(np.median(half)), "p_worse": p, "bonus": True},
            "Subtract the entropy bonus: loss = value_loss * value_coef + action_loss - "
            "entropy * entropy_coef (the optimizer minimizes the loss, so a quantity to "
            "maximize enters with a minus sign)."))
    return out


def _judge(run: Run, split, name, loss, blocks: int, min_points: int, alpha: float,
           alpha_trend: float, alpha_loss: float, surrogate_ok: bool = False,
           start_points: int = 3) -> dict | None:
    metric = run.scalar(name, split)
    steps = metric.index.intersection(loss.index).sort_values()
    m = metric.loc[steps].to_numpy(dtype=float)
    l = loss.loc[steps].to_numpy(dtype=float)
    keep = np.isfinite(m) & np.isfinite(l)
    m, l, steps = m[keep], l[keep], np.asarray(steps)[keep]
    if len(m) < max(min_points, 2 * blocks):
        return None
    sign = run_direction(run, split, name)
    if not sign:
        return None
    good = sign * m  # higher is better
    cut = np.array_split(np.arange(len(m)), blocks)
    half = np.concatenate(cut[blocks // 2:])
    medians = [float(np.median(good[b])) for b in cut]
    if _came_back(good, steps, cut, medians, alpha, alpha_trend):
        return None
    # The model it started from: the first block; for a return, also its first values, where
    # a flipped sign under large steps drove the policy to its worst within the first block.
    starts = [(cut[0], medians[1:], True)]
    if is_return(name) and start_points < len(cut[0]):
        starts.append((np.arange(start_points), medians, False))
    for first, later, trend in starts:
        found = _against(good, m, l, steps, name, sign, first, half, later, trend, alpha,
                         alpha_trend, alpha_loss, surrogate_ok)
        if found:
            return found
    return None


def _came_back(good, steps, cut, medians: list[float], alpha: float,
               alpha_trend: float) -> bool:
    """Whether the metric climbs back from its worst: its last block above the least of the
    earlier blocks by a one-sided Mann-Whitney test at `alpha`, or its last half rising as a
    rank trend with the step at `alpha_trend`. A flipped sign keeps the optimizer pushing the
    metric down, so it stays at its worst or sinks further; a run that dips after the first
    updates (a policy that crashes before it learns to land) and then learns climbs back."""
    low = int(np.argmin(medians[:-1]))
    if medians[-1] > medians[low] and float(mannwhitneyu(
            good[cut[-1]], good[cut[low]], alternative="greater").pvalue) < alpha:
        return True
    half = np.concatenate(cut[len(cut) // 2:])
    if np.ptp(good[half]) == 0:
        return False
    rho, p_two = spearmanr(steps[half], good[half])
    return bool(rho > 0 and float(p_two) / 2 < alpha_trend)


def _against(good, m, l, steps, name, sign: int, first, half, later: list[float], trend: bool,
             alpha: float, alpha_trend: float, alpha_loss: float,
             surrogate_ok: bool) -> dict | None:
    """The metric's values at `first` (the start) set against its `later` block medians and its
    last `half`, and the loss's there (`_judge`); `trend`: a falling rank trend is required.
    No later block's median above the start and the last one below it: a return counted in
    whole steps (an episode's length) ties its start at a block's median where the policy
    held a while before its fall; how far it fell is the Mann-Whitney test's, against the
    spread of the values themselves."""
    start = float(np.median(good[first]))
    if not (all(x <= start for x in later) and later[-1] < start):
        return None
    if np.ptp(good[first]) == 0 and np.ptp(good[half]) == 0 and later[-1] == start:
        return None
    # A few first values: the exact null distribution (the normal one, taken under ties, is
    # far off for 3 values).
    p_worse = float(mannwhitneyu(good[first], good[half], alternative="greater",
                                 method="auto" if trend else "exact").pvalue)
    rho, p_two = spearmanr(steps, good)
    p_trend = (float(p_two) / 2 if rho < 0 else 1.0) if trend else 0.0
    p_loss_up = float(mannwhitneyu(l[half], l[first], alternative="greater").pvalue)
    # Marked only where it matters: the loss rose, and the rise is let through. A loss below 0
    # is no distance to a target (those are >= 0): set against a return, it is a policy's
    # surrogate, computed on the data the policy itself collects, whose level follows those
    # data (normalized advantages centre it on 0), not how well the optimizer did. Centred on
    # 0, it is below 0 at a quarter of the steps or more (about half); a distance with a small
    # bonus taken off (PPO's value loss less its entropy bonus) dips below 0 only at the few
    # steps where the distance vanishes, and its rise still says the fit got worse.
    below = (l < 0).all() or (is_return(name) and float(np.quantile(l, 0.25)) < 0)
    surrogate = bool(surrogate_ok and below and p_loss_up < alpha_loss)
    if surrogate:
        p_loss_up = 1.0  # a negated surrogate's rise to 0 is its returns shrinking
    if not (p_worse < alpha and p_trend < alpha_trend and p_loss_up >= alpha_loss):
        return None
    p_loss_down = float(mannwhitneyu(l[half], l[first], alternative="less").pvalue)
    return {"metric": str(name), "direction": "higher" if sign > 0 else "lower",
            "first_steps": (int(steps[first[0]]), int(steps[first[-1]])),
            "steps": (int(steps[0]), int(steps[-1])), "points": len(m),
            "metric_first": float(np.median(m[first])),
            "metric_last_half": float(np.median(m[half])),
            "loss_first": float(np.median(l[first])), "loss_last_half": float(np.median(l[half])),
            "p_worse": p_worse, "rank_correlation": float(rho), "p_loss_up": p_loss_up,
            "loss_fell": bool(p_loss_down < alpha), "surrogate": surrogate,
            "from_first_values": not trend}


def _finding(split: str, judged: list[dict]) -> Finding:
    j = judged[0]
    others = [o["metric"] for o in judged[1:]]
    also = f" So did {', '.join(others)}." if others else ""
    a, b = j["first_steps"]
    rho = j["rank_correlation"] * (1 if j["direction"] == "higher" else -1)
    trend = ("a fall at the first updates that never came back" if j.get("from_first_values")
             else f"rank correlation with the step {fmt(rho)}")
    loss_move = ("below 0 throughout: a negated surrogate whose size follows the returns"
                 if j.get("surrogate") and j["loss_first"] < 0 and j["loss_last_half"] < 0 else
                 "below 0 at some steps: a policy's surrogate, whose level follows the data "
                 "the policy collects" if j.get("surrogate") else
                 "a significant fall" if j["loss_fell"] else "no significant rise")
    return loss_against_objective.finding(
        WARNING, f"{split}/{j['metric']}", j["steps"],
        f"{split} {j['metric']} got worse while the {split} loss did not: its median went from "
        f"{fmt(j['metric_first'])} over steps {a}-{b} to {fmt(j['metric_last_half'])} over the "
        f"last half of the run ({j['direction']} is better; Mann-Whitney p = "
        f"{fmt(j['p_worse'])}, {trend}), the loss's from "
        f"{fmt(j['loss_first'])} to {fmt(j['loss_last_half'])} ({loss_move}).{also} The "
        "optimizer minimizes the loss; this loss leads away from the objective: a sign "
        "flipped, or a quantity to maximize minimized.",
        {"split": split, **{k: v for k, v in j.items() if k not in ("first_steps", "steps")},
         "first_block": list(j["first_steps"]), "also": others}, FIX)
