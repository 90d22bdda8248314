"""What a run's logged metrics say of its objective: which way each one is better, by its name,
and whether one kept improving. Read by the rules that judge a loss against what it optimizes."""
from __future__ import annotations

import re

import numpy as np
from scipy.stats import mannwhitneyu

from tracelab.core.run import Run
from tracelab.core.schema import LOSS_NAME

_WORD = r"(?:^|[^a-z])({})s?(?:$|[^a-z])"
# What a reinforcement learner collects from its environment: a reward, a return (`ret`, as
# spinningup's `ep_ret` and `EpRet`; baselines' glued `eprewmean`).
_RETURNS = "reward|rew|return|ret|eprew|epret|eprewmean|epretmean"
_HIGHER = re.compile(_WORD.format(_RETURNS + "|score|acc|accuracy|f1|auc|precision|recall"
                                  "|iou|miou|meaniou|bleu|rouge|dice"))
_RETURN = re.compile(_WORD.format(_RETURNS))
_LOWER = re.compile(_WORD.format("error|err|perplexity|ppl|mae|mse|rmse|wer|cer"))
# A name holding one of these says no direction of its own (a loss, a spread, a distance).
_UNDIRECTED = re.compile(r"loss|cost|penalty|regret|std|var|spread|dist|fid|energy|nll|grad"
                         r"|(?:^|[^a-z])rms(?:$|[^a-z])")
# One side of a preference pair (TRL's DPO: `rewards/chosen`, `rewards/rejected`): the rejected
# answers' reward falls by design and the chosen one's may too, as long as the margin grows; a
# name qualified so says no direction unless it is the pair's margin or accuracy, which does.
_SIDE = re.compile(_WORD.format("chosen|rejected"))
_PAIRED = re.compile(_WORD.format("margin|accuracy|accuracies|acc"))
# camelCase word boundaries (spinningup's `AverageEpRet`): a capital after a small letter or a
# digit, or a capital followed by a small letter after capitals (`TestEpRet`, `MAEScore`).
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _words(name: str) -> str:
    """The name lower-cased, its camelCase words cut apart by '_'."""
    return _CAMEL.sub("_", str(name)).lower()


def _says(pattern: re.Pattern, name: str) -> bool:
    """Whether `pattern` holds a word of the name, lower-cased as it is (`IoU`, `mIoU`) or cut
    at its camelCase words (`AverageEpRet`): the cut alone splits an acronym with a small
    letter inside (`IoU` -> `io_u`)."""
    return bool(pattern.search(str(name).lower()) or pattern.search(_words(name)))


def is_return(name: str) -> bool:
    """Whether the metric's name says it is a reward or a return (`direction` +1): what an
    environment pays a policy, which no player of a game scores for another. A preference
    pair's margin or accuracy (`rewards/margins`) is a reward model's, not an environment's."""
    return direction(name) > 0 and _says(_RETURN, name) and not _says(_PAIRED, name)


def direction(name: str) -> int:
    """+1 when the metric's name says higher is better, -1 lower, 0 when it says neither or
    both, or names one side of a preference pair (`rewards/chosen`, `rewards/rejected`)."""
    if _says(_UNDIRECTED, name) or (_says(_SIDE, name) and not _says(_PAIRED, name)):
        return 0
    up, down = _says(_HIGHER, name), _says(_LOWER, name)
    return 0 if up == down else (1 if up else -1)


# A name that says the metric is a function of the loss: a perplexity is exp of a cross-entropy
# (2 ** one in bits), lower as the loss is. The name alone does not say which cross-entropy: a
# VQ-VAE's `perplexity` is its codebook usage, exp of the entropy of its code assignments,
# which rises as more codes are used (higher is better) and has no tie to its loss.
_OF_LOSS = re.compile(_WORD.format("perplexity|ppl"))
_INVERSES = (np.log, np.log2)


def follows_loss(run: Run, split, name, blocks: int = 8, tolerance: float = 2.0) -> bool:
    """Whether the metric behaves as exp (or 2 **) of the split's recorded loss, or of its
    negation (a sign flipped is what the rule looks for): at the steps both were recorded, cut
    into `blocks` equal runs of steps, the log (natural or base 2) of every block's median lies
    within a factor `tolerance` of the loss's absolute median there (room for a loss that
    holds more than the cross-entropy: label smoothing, an auxiliary term, a token-weighted
    mean). A perplexity is 1 or more; a metric below 1 anywhere, a loss of 0, or fewer than
    2 steps per block say no."""
    try:
        loss = run.loss(split).groupby(level=0).last()
        metric = run.scalar(str(name), split).groupby(level=0).last()
        steps = metric.index.intersection(loss.index).sort_values()
        m = metric.loc[steps].to_numpy(dtype=float, na_value=np.nan)
        l = loss.loc[steps].to_numpy(dtype=float, na_value=np.nan)
        keep = np.isfinite(m) & np.isfinite(l)
        m, l = m[keep], l[keep]
        if len(m) < 2 * blocks or (m < 1).any():
            return False
        cut = np.array_split(np.arange(len(m)), blocks)
        lm = np.array([abs(float(np.median(l[b]))) for b in cut])
        mm = np.array([float(np.median(m[b])) for b in cut])
        if not (lm > 0).all():
            return False
        for inverse in _INVERSES:
            ratio = inverse(mm) / lm
            if ((ratio >= 1 / tolerance) & (ratio <= tolerance)).all():
                return True
        return False
    except (KeyError, ValueError, TypeError):
        return False


def run_direction(run: Run, split, name) -> int:
    """`direction`, where the recorded loss agrees: a metric named as a function of the loss
    (a perplexity) is lower-is-better only where it follows the split's loss (`follows_loss`);
    elsewhere (a VQ-VAE's codebook perplexity) its direction is unknown, 0."""
    sign = direction(str(name))
    if sign < 0 and _says(_OF_LOSS, str(name)) and not follows_loss(run, split, name):
        return 0
    return sign


def directed_metrics(run: Run, min_points: int = 24):
    """(split, name, values) of each logged metric whose name gives its direction
    (`run_direction`), at `min_points` finite values or more, its values signed so that
    larger is better."""
    sc = run.scalars
    if not {"split", "name"} <= set(sc.columns):
        return
    for split, name in sc[["split", "name"]].drop_duplicates().itertuples(index=False):
        sign = run_direction(run, str(split), str(name))
        if not sign:
            continue
        values = run.scalar(str(name), str(split)).to_numpy(dtype=float, na_value=np.nan)
        values = sign * values[np.isfinite(values)]
        if len(values) >= min_points:
            yield str(split), str(name), values


def objective_improved(run: Run, alpha: float, min_points: int = 24) -> bool:
    """Whether a logged metric whose name gives its direction (`direction`: a reward, an
    accuracy, an error), at `min_points` values or more, kept improving over the run: its
    last quarter better than its first and its second (one-sided Mann-Whitney p < `alpha`),
    the best of its four quarters (no late divergence gave the gain back), with at least half
    of its gain made in the second half (not a transient of the start that settled)."""
    for _, _, values in directed_metrics(run, min_points):
        quarters = np.array_split(values, 4)
        medians = [float(np.median(q)) for q in quarters]
        if medians[-1] < max(medians) or medians[-1] <= medians[0] or \
                medians[-1] - medians[1] < 0.5 * (medians[-1] - min(medians)):
            continue
        try:
            p = max(float(mannwhitneyu(quarters[-1], q, alternative="greater").pvalue)
                    for q in quarters[:2])
        except ValueError:
            continue
        if p < alpha:
            return True
    return False


def objective_gained(run: Run, alpha: float, min_points: int = 24,
                     returns_only: bool = False) -> bool:
    """Whether a logged metric whose name gives its direction, at `min_points` values or
    more, ended better than it started: its last quarter above its first eighth (one-sided
    Mann-Whitney p < `alpha`). Unlike `objective_improved`, a gain made early and held counts
    (a bandit's policy converged on its best arm in a few dozen steps). `returns_only`: only a
    return an environment pays (`is_return`) counts, as in a game, where one player's own
    error or accuracy moves as the other player learns."""
    for _, name, values in directed_metrics(run, min_points):
        if returns_only and not is_return(name):
            continue
        last, start = np.array_split(values, 4)[-1], values[:max(len(values) // 8, 3)]
        if np.median(last) <= np.median(start):
            continue
        try:
            if float(mannwhitneyu(last, start, alternative="greater").pvalue) < alpha:
                return True
        except ValueError:
            continue
    return False


# A bonus: a quantity a policy's loss rewards (enters with a minus sign), the policy's entropy
# (A2C, PPO, IMPALA, SAC: `dist_entropy`, `entropy`, `losses/entropy`). Judged by the last
# part of the name (`losses/entropy` is CleanRL's entropy itself); a part that says the term is
# already signed (`entropy_loss`, Stable-Baselines3's -entropy; `neg_entropy`) is no bonus.
_BONUS = re.compile(_WORD.format("entropy|ent"))
_SIGNED = re.compile(r"loss|cost|penalty|neg|minus|reg|kl|cross|xent|target|coef|alpha|temp")


def is_bonus(name: str) -> bool:
    """Whether the metric's name says it is a policy's entropy itself, a bonus its loss
    subtracts, not a term already signed (`entropy_loss`, `neg_entropy`)."""
    leaf = str(name).rsplit("/", 1)[-1]
    return _says(_BONUS, leaf) and not _SIGNED.search(_words(leaf))


def loss_terms(run: Run, split: str, exact: float = 1e-5,
               min_points: int = 24) -> tuple[dict[str, float], float] | None:
    """The split's recorded loss as a linear combination of the split's other logged metrics
    (and a constant), where it is one exactly: {metric: coefficient} with the fit's largest
    residual relative to its step's largest term, or None when no exact fit exists (the
    residual above `exact`), there are too few steps (fewer than `min_points`, or than 4 per unknown) or the
    data are missing. A loss logged beside its terms (A2C's `value_loss * 0.5 + action_loss -
    dist_entropy * 0.01`) gives each term's coefficient, its sign included, as a recorded fact:
    float32 sums agree to about 1e-7, and no loose relation among hundreds of steps reaches
    1e-5. A coefficient is only returned for a term the fit cannot do without: without it, the
    residual grows 100-fold over the exact fit's (or over float32's 1e-7, if larger); a small
    bonus (0.01 x an entropy) still leaves 1e-4 of the largest term unexplained."""
    try:
        sc = run.scalars
        if not {"split", "name"} <= set(sc.columns):
            return None
        loss = run.loss(split)
        loss = loss[np.isfinite(loss.to_numpy(dtype=float, na_value=np.nan))]
        if len(loss) < min_points:
            return None
        names = [str(n) for n in dict.fromkeys(sc.loc[sc["split"] == split, "name"])
                 if str(n) != LOSS_NAME and not str(n).startswith("lr")]
        cols = {}
        for n in names:
            v = run.scalar(n, split).groupby(level=0).last().reindex(loss.index)
            v = v.to_numpy(dtype=float, na_value=np.nan)
            if np.isfinite(v).mean() >= 0.95 and np.ptp(v[np.isfinite(v)]) > 0:
                cols[n] = v
        if not cols:
            return None
        x = np.column_stack(list(cols.values()) + [np.ones(len(loss))])
        y = loss.to_numpy(dtype=float)
        keep = np.isfinite(x).all(axis=1)
        x, y = x[keep], y[keep]
        if len(y) < max(min_points, 4 * x.shape[1]):
            return None

        def fit(a):
            c = np.linalg.lstsq(a, y, rcond=None)[0]
            # Each step against its own largest term: float32 rounds each step's sum to its
            # own size, and a run's first losses can be 1000 times its last.
            scale = np.maximum(np.maximum(np.abs(y), np.abs(a * c).max(axis=1)), 1e-12)
            return c, float((np.abs(y - a @ c) / scale).max())

        coef, resid = fit(x)
        if not resid <= exact:
            return None
        terms = {}
        for i, n in enumerate(cols):
            if fit(np.delete(x, i, axis=1))[1] > 100 * max(resid, 1e-7):
                terms[n] = float(coef[i])
        return terms, resid
    except (KeyError, ValueError, TypeError, np.linalg.LinAlgError):
        return None


# A player's loss named as the policy's, beside a critic: SB3's and CleanRL's `actor_loss`,
# `policy_loss`, spinningup's `LossPi`, A2C's `action_loss`. A name that also says it is the
# critic's (`actor_critic_loss`, `q_loss`, `value_loss`) is no actor's alone.
_ACTOR = re.compile(_WORD.format("actor|policy|pi|action"))
_CRITIC = re.compile(_WORD.format("critic|q|qf|q1|q2|value|vf|v|td"))


def is_actor_loss(name: str) -> bool:
    """Whether the metric's name says it is a policy's (an actor's) own loss: `loss` in it, a
    word naming the actor, none naming the critic, and not the recorded loss itself."""
    return (str(name) != LOSS_NAME and "loss" in _words(name) and _says(_ACTOR, name)
            and not _says(_CRITIC, name))


def q_values(run: Run, split: str = "train") -> "pd.Series":
    """The mean of the recorded targets per profiled step where they are a critic's values: one
    feature (a scalar per row: `r + gamma * Q'(s', a')`), not whole numbers (a class, a GAN's
    real/fake label), and a batch mean whose sign the batch settles (its magnitude above the
    standard error, std / sqrt(count)). Empty when the targets were not recorded or are none
    of these."""
    import pandas as pd
    empty = pd.Series(dtype=float)
    try:
        t = run.targets
        if not len(t) or not {"step", "split", "feature", "mean", "std", "count",
                              "int_frac"} <= set(t.columns):
            return empty
        t = t[t["split"] == split]
        if t["feature"].nunique() != 1:
            return empty
        ints = pd.to_numeric(t["int_frac"], errors="coerce").to_numpy(dtype=float,
                                                                       na_value=np.nan)
        if not len(t) or not float(np.nanmedian(ints)) < 0.5:
            return empty
        mean = pd.to_numeric(t["mean"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        se = (pd.to_numeric(t["std"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
              / np.sqrt(pd.to_numeric(t["count"], errors="coerce").to_numpy(
                  dtype=float, na_value=np.nan).clip(min=1)))
        keep = np.isfinite(mean) & np.isfinite(se) & (np.abs(mean) > se)
        return pd.Series(mean[keep], index=t["step"].to_numpy()[keep]).groupby(level=0).last()
    except (KeyError, ValueError, TypeError):
        return empty
