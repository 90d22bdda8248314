"""loss-spike: the training loss jumps suddenly, and what else happened at that step.

What it detects
    A step whose training loss stands far above the rolling median of the `window` steps before
    it (robust z-score >= `z` against their median absolute deviation), or a sudden level shift
    (the median of the next `shift` steps at z >= `z_shift`). The jump must also be large
    relative to the recent level (`min_jump`, `min_shift`: 1.0 is a doubling) and to the run's
    initial loss (`min_jump_of_start`). A positive loss's per-batch noise is multiplicative,
    so a single step (no level shift) must also reach `z` on the log scale, against the
    log-values' own spread over the window; one that does not counts only where a recorded
    fact outside the noise explains it (a bad batch, an LR rise). For each spike it looks at
    what else was recorded around that step and names the likely cause, in this order: an
    input batch holding NaN/Inf
    or outlier values (`input_ratio` times the feature's usual largest magnitude; on any step,
    from the per-batch sentinel of inputs and targets, and by feature where the step's batch
    was profiled), a learning
    rate raised `lr_increase`-fold within the 10 steps before, or a gradient-norm spike
    (`grad_ratio` times its recent median) in a named parameter. When the step's input batch
    was not profiled, it says so rather than blame a gradient spike that may follow from it.
    A spike is a warning when it did something to the run or recurs; the run's only spike,
    a few steps high and back under its midpoint at the next step, its losses finite and
    the gradients recorded at its onset within `grad_ratio` of their recent median, with no
    bad batch or LR rise behind it, is a note (info): one hard batch the run passed.

Why it matters
    A good run that suddenly jumps (by +0.3 at epoch 83, say) usually has one of two causes: the
    data pipeline let a bad batch through, or the learning-rate schedule changed at that step.
    The loss curve alone cannot tell them apart; the other recorded signals can.

Example
    Train loss 2.4 at step 830 against a rolling median of 0.31, while the input batch of step
    830 holds a feature whose largest value is 40x its usual maximum.

How to fix
    For a bad batch: validate or clean the data (drop NaN rows, clip or filter outliers). For an
    LR increase: check the schedule (restarts, warm-up applied twice, a wrong step unit). For a
    gradient spike: clip gradients (`clip_grad_norm_`, max_norm about 1) or lower the LR.

False positives
    Runs with heavy-tailed per-batch losses (rare hard examples near convergence, a
    regression on targets of size 100 whose batch MSE swings several times over, an epoch's
    short last batch) look spiky on a linear scale: on the log scale they are noise, and
    stay quiet unless a bad batch or an LR rise explains them. So do batches of a few rows
    (4 samples: one hard sample is a quarter of a large loss), where a stretch that happens
    to draw a few more hard samples lifts the median of the next `shift` losses several
    times over the rolling median: a level shift counts only where, were those losses drawn
    from the `window` losses before, as many would reach their median with probability under
    `alpha` divided by the run's number of `shift`-step stretches. The jump must also exceed
    `min_jump_of_start` of the starting loss, which keeps
    small absolute jumps near zero loss quiet, and a bump must last `shift` steps to count as
    a level shift. An objective whose per-batch values are themselves spiky (mixup's
    blended batches, whose soft targets hold the loss above ln 2 several times its median;
    label smoothing; a bimodal batch mix) makes such excursions all through the run: an
    episode counts only where it rises more than `noise_factor` times above the
    `noise_quantile` of the excess (log loss over its rolling median, and the next `shift`
    steps' median over it) that the run shows elsewhere, unless a bad batch or an LR rise
    explains it; spikes that recur rarely leave that quantile at the noise and still count.
    Inputs are profiled every few steps (the Recorder's `input_every`); the
    per-batch sentinel covers the other steps (a run recorded before it existed only sees an
    input cause when that step's batch was profiled). A heavy-tailed input (a polynomial's
    x ** 4 feature, and the target built from it) swings its batch maximum several times over
    its median on its own: a sentinel tensor's batch is an outlier only above twice the 95th
    percentile of the ratios its batches make to their rolling median all through the run. Where two or more optimizers hold the
    model's parameters (a GAN's players, an actor and a critic), the one recorded loss jumps by
    design as each moves against the other: there a spike counts only when a recorded fact
    outside the game explains it (a bad input batch, a learning rate that rose), or when the
    loss turns non-finite: a generator's loss that jumps to a new level as its discriminator
    catches up, and holds it, is the game's (a loss that grows is judged by the rules on
    growth, not as a spike). So it is where the run steps several times on each batch and its
    loss falls on most of those steps (`descends_per_batch`: PPO's epochs over one rollout),
    which jumps where the batch changes, where the recorded real-valued targets drift (`targets_drift`: the scale of the profiled
    batches' targets moved twice over or more between the first and the last quarter of the
    run): a regression on targets that move, a DQN's bootstrapped targets recomputed by a
    target network synced every few hundred steps and growing as its policy improves, jumps
    each time they move, a schedule of the algorithm rather than a fault; and where the loss is
    summed over batches whose size varies (`sums_over_batch`: the profiled batches' sizes vary
    twice over or more and log(loss) grows with log(size) at a slope of one half or more), as
    an actor-critic's loss summed over an episode grows with the episode's length as its
    policy learns: the jump follows the batch's size, recorded on profiled steps only. A loss
    that sums terms (a VQ-VAE's reconstruction error plus its codebook terms, a VAE's
    reconstruction plus a KL whose weight is switched on or annealed) jumps where any term
    does: where a logged train metric is its main term (`main_term`: 0 or more, never above
    the loss, half of it or more at the start) and that term stayed within its own noise over
    the episode (robust z under `z_shift` against the `window` steps before), the jump is the
    other terms', and it counts only where a bad batch or an LR rise explains it. At most
    `max_reported` spikes are reported, the largest first.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import binom

from tracelab.analyzers._batches import (INPUT_BATCH, nonfinite_batch, outlier_batch,
                                         sums_over_batch, targets_drift)
from tracelab.analyzers._dynamics import (MAD_TO_STD, OUTCOME, finite, fmt, initial,
                                          rolling_previous)
from tracelab.analyzers._learning_rate import descends_per_batch, several_players
from tracelab.analyzers._loss_terms import main_term
from tracelab.core import causes
from tracelab.core.causes import explains
from tracelab.core.findings import INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import GRAD, LR_PREFIX, TRAIN, Needs


# Causes outside an adversarial game: a spike with one of them is a fault in a GAN too.
OUTSIDE_THE_GAME = frozenset({"input_nonfinite", "input_outlier", "lr_increase"})
PASSED = "; the loss came back at once and the gradients stayed ordinary"


def _spike_explains(cause: Finding, effect: Finding) -> bool:
    # A spike blamed on its batch, the LR or a batch nobody profiled comes before the gradient
    # burst it causes; a spike blamed on a gradient burst is the burst's effect instead.
    if causes.input_borne(effect):
        return False
    return effect.rule != "exploding-gradients" or causes.stated_cause(cause) != "grad_spike"


@rule(name="loss-spike", code="TL102", requires=(Needs.LOSS,), plot=Plot.LOSS_JUMP,
      unseen=INPUT_BATCH,
      links=(explains("dead-units", "exploding-gradients", "nonfinite-values", "collapsed-outputs",
                      "frozen-parameters", *OUTCOME,
                      why="a spike's large gradients kill units and can overflow",
                      when=_spike_explains),))
def loss_spike(run: Run, *, window: int = 50, z: float = 10.0, min_jump: float = 1.0,
               shift: int = 10, z_shift: float = 3.0, min_shift: float = 0.5,
               min_jump_of_start: float = 0.1, max_reported: int = 3, lr_increase: float = 1.5,
               input_ratio: float = 4.0, grad_ratio: float = 5.0, noise_quantile: float = 0.95,
               noise_factor: float = 2.0, alpha: float = 0.05) -> list[Finding]:
    loss = finite(run.loss())
    if len(loss) <= window + shift:
        return []
    values = loss.to_numpy(dtype=float)
    steps = loss.index.to_numpy()
    med, mad = rolling_previous(values, window)
    start = initial(values)
    # A level shift: the median of the next `shift` steps jumps, e.g. when the LR rises.
    ahead = np.full(len(values), np.nan)
    ahead[:len(values) - shift + 1] = np.median(
        np.lib.stride_tricks.sliding_window_view(values, shift), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sigma = MAD_TO_STD * mad + 1e-12 * np.abs(med)

        def jumped(level: np.ndarray, threshold: float, relative: float) -> np.ndarray:
            rise = level - med
            return ((rise / sigma >= threshold) & (rise >= relative * np.abs(med))
                    & (rise >= min_jump_of_start * abs(start)))
        single = jumped(values, z, min_jump)
        sustained = jumped(ahead, z_shift, min_shift)
        onset_ok = jumped(values, z_shift, min_shift)
        # A positive loss's per-batch noise is multiplicative: a mean over a batch of squared
        # errors on targets of size 100 swings by several times its median from batch to
        # batch, a skew the linear MAD misses. The same z on the log scale, against the
        # log-values' own spread, says whether one step stands out of that noise (NaN where
        # the window holds a loss <= 0: no such scale, the linear test alone).
        logs = np.log(np.where(values > 0, values, np.nan))
        log_med, log_mad = rolling_previous(logs, window)
        log_z = (logs - log_med) / (MAD_TO_STD * log_mad + 1e-12)
    # A level shift is the median of the next `shift` batch losses: with a few rows per batch
    # the batch loss is heavy-tailed (one hard sample of 4 is a quarter of a large loss), and
    # a stretch where a few more batches than usual drew one lifts that median several times
    # over the rolling one. A shift counts only where the run's own batch-to-batch
    # distribution (the `window` losses before it) makes it improbable in every stretch of
    # the run the scan looked at (`_chance_shift`).
    chance = np.zeros(len(values), dtype=bool)
    for j in np.flatnonzero(sustained):
        chance[j] = _chance_shift(values, j, window, shift, alpha)
    sustained &= ~chance
    # A step that only the linear test finds, within the loss's multiplicative noise on the
    # log scale (no level shift), or a shift within the batch-to-batch noise, counts only
    # where a recorded fact outside that noise (a bad batch, an LR rise) explains it.
    noisy = (single | chance) & ~sustained & ~(single & ~(log_z < z))
    for j in np.flatnonzero(noisy):
        kind = _cause(run, int(steps[j]), int(steps[max(j - window, 0)]), int(steps[j]),
                      lr_increase=lr_increase, input_ratio=input_ratio,
                      grad_ratio=grad_ratio)[1]
        noisy[j] = kind not in OUTSIDE_THE_GAME
    idx = np.flatnonzero((single | sustained | chance) & ~noisy)
    if not len(idx):
        return []
    # Spiking steps close together are one episode, reported at its first high step.
    episodes = np.split(idx, np.flatnonzero(np.diff(idx) > window) + 1)
    found = []
    for ep in episodes:
        later = np.flatnonzero(onset_ok[ep[0]:ep[-1] + shift])
        i = int(ep[0] + later[0]) if len(later) else int(ep[0])
        end = min(int(ep[-1]) + shift, len(values))
        found.append((i, i + int(np.argmax(values[i:end]))))
    # An episode counts only where it stands out of the excursions the objective makes on its
    # own elsewhere in the run (mixup's blended batches, a loss whose per-batch values are
    # bimodal): against the rolling median that most steps sit near, one step in ten of such
    # a loss may stand several times higher, and a run of them lifts the median of the next
    # `shift` steps too.
    with np.errstate(invalid="ignore", divide="ignore"):
        excess = logs - log_med
        excess_ahead = np.log(np.where(ahead > 0, ahead, np.nan)) - log_med
    # A bad batch or an LR rise behind an episode is a fact outside that noise: it counts.
    found = [f for f in found
             if _beyond_noise(f, values, excess, excess_ahead, window, shift, noise_quantile,
                              noise_factor)
             or _cause(run, int(steps[f[0]]), int(steps[max(f[0] - window, 0)]),
                       int(steps[f[1]]), lr_increase=lr_increase, input_ratio=input_ratio,
                       grad_ratio=grad_ratio)[1] in OUTSIDE_THE_GAME]
    # A loss that sums terms (a VQ-VAE's reconstruction error and its codebook terms, a VAE's
    # reconstruction and KL) jumps where any term does: where the logged term that carries the
    # loss stayed within its own noise over the episode, the jump is the other terms' (a
    # codebook's scale moving as its codes get used), not a bad batch or an overshoot, which
    # raise the fit's own term too; a fact outside that noise still counts.
    term = main_term(run, loss, min_points=window + shift)
    if term is not None:
        found = [f for f in found
                 if term_rose(term.values, int(steps[f[0]]), int(steps[f[1]]), window, shift,
                              z_shift)
                 or _cause(run, int(steps[f[0]]), int(steps[max(f[0] - window, 0)]),
                           int(steps[f[1]]), lr_increase=lr_increase, input_ratio=input_ratio,
                           grad_ratio=grad_ratio)[1] in OUTSIDE_THE_GAME]
    if not found:
        return []
    found.sort(key=lambda f: -values[f[1]] / abs(med[f[0]]))
    # Several optimizers playing against one recorded loss make it jump by design (unless it
    # turned non-finite), and so do a regression whose targets drift (bootstrapped targets,
    # recomputed by a copy of the model synced now and then), a loss stepped on again per
    # batch, and a loss summed over batches whose size varies: there only a jump that a fact
    # outside the game explains counts.
    game = (several_players(run) and bool(np.isfinite(run.loss().to_numpy(
        dtype=float, na_value=np.nan)).all())) or targets_drift(run) is not None or \
        descends_per_batch(run) or sums_over_batch(run) is not None
    named = [(i, peak, _cause(run, int(steps[i]), int(steps[max(i - window, 0)]),
                              int(steps[peak]), lr_increase=lr_increase,
                              input_ratio=input_ratio, grad_ratio=grad_ratio))
             for i, peak in (found if game else found[:max_reported])]
    if game:
        named = [spike for spike in named if spike[2][1] in OUTSIDE_THE_GAME]
    total = len(named) if game else len(found)
    findings = []
    for i, peak, (cause, kind, evidence) in named[:max_reported]:
        step = int(steps[i])
        score = (values[i] - med[i]) / sigma[i]
        evidence.update(cause=kind, step=step, loss=values[i], rolling_median=med[i],
                        peak_loss=values[peak], z_score=score, spikes_total=total)
        # One excursion the run came back from at once, its gradients ordinary, did nothing
        # to the run: a note. A bad batch or an LR rise, recurring spikes, a level shift, a
        # non-finite loss or a gradient burst stay warnings.
        passing = kind not in OUTSIDE_THE_GAME and total == 1 and _passed(
            run, values, steps, i, peak, sustained, med, shift, window, grad_ratio)
        findings.append(loss_spike.finding(
            INFO if passing else WARNING, "loss", (step, int(steps[peak])),
            f"Train loss jumped to {fmt(values[i])} at step {step} (peak {fmt(values[peak])}), "
            f"{_against(values[i], med[i])} its rolling median {fmt(med[i])} "
            f"(z = {fmt(score)}); {cause}"
            f"{PASSED if passing else ''}.", evidence, _FIX[kind]))
    return findings


def _chance_shift(values: np.ndarray, onset: int, window: int, shift: int,
                  alpha: float) -> bool:
    """Whether the level shift at `onset` (the median of the next `shift` losses) is within the
    run's own batch-to-batch noise: were those losses drawn from the distribution of the
    `window` losses before (the share at or above that median, one pseudo-count each way),
    as many of them would reach it with probability at least `alpha` divided by the number
    of `shift`-step stretches in the run (the scan looks at every one of them). False where
    it cannot be judged (fewer than `window` losses before, or `shift` after)."""
    before, ahead = values[max(onset - window, 0):onset], values[onset:onset + shift]
    if len(before) < window or len(ahead) < shift:
        return False
    level = float(np.median(ahead))
    share = (float(np.sum(before >= level)) + 1) / (len(before) + 2)
    reached = int(np.sum(ahead >= level))
    stretches = max(1, len(values) // shift)
    return bool(binom.sf(reached - 1, shift, share) >= alpha / stretches)


def _passed(run: Run, values: np.ndarray, steps: np.ndarray, onset: int, peak: int,
            sustained: np.ndarray, med: np.ndarray, shift: int, window: int,
            grad_ratio: float) -> bool:
    """Whether a spike did nothing to the run: a few steps high (fewer than `shift` from its
    onset to its peak, no level shift among them), the next step back under the jump's
    midpoint, every recorded loss from the onset to `shift` steps after the peak finite, and
    the gradients recorded at the onset within `grad_ratio` of their recent median. False
    where the gradients were not recorded there."""
    after = peak + 1
    if after >= len(values) or peak - onset >= shift or sustained[onset:after].any():
        return False
    if not values[after] < (values[peak] + med[onset]) / 2:
        return False
    raw = run.loss()
    last = steps[min(after + shift, len(steps) - 1)]
    near = raw[(raw.index >= steps[onset]) & (raw.index <= last)]
    if not np.isfinite(pd.to_numeric(near, errors="coerce").to_numpy(
            dtype=float, na_value=np.nan)).all():
        return False
    grad = _grad_spike(run, int(steps[onset]), int(steps[max(onset - window, 0)]))
    return grad is not None and grad[1] < grad_ratio


def term_rose(term: pd.Series, onset: int, peak: int, window: int, shift: int,
              z: float) -> bool:
    """Whether the loss's main term (`term`: indexed by step) rose out of its own noise over a
    spike episode: at a step from `shift` steps before `onset` to `peak`, its robust z-score
    (over its median and MAD of the `window` values before) reaches `z`. True where that cannot
    be judged (fewer than `window` values before the episode)."""
    values = term.to_numpy(dtype=float)
    steps = term.index.to_numpy()
    med, mad = rolling_previous(values, window)
    near = (steps >= onset - shift) & (steps <= peak) & np.isfinite(med)
    if not near.any():
        return True
    with np.errstate(invalid="ignore", divide="ignore"):
        score = (values[near] - med[near]) / (MAD_TO_STD * mad[near] + 1e-12 * np.abs(med[near]))
    return bool((score >= z).any())


def _beyond_noise(episode: tuple[int, int], values: np.ndarray, excess: np.ndarray,
                  excess_ahead: np.ndarray, window: int, shift: int, quantile: float,
                  factor: float) -> bool:
    """Whether a spike episode (onset, peak) rises above the loss's own excursions: its highest
    step's excess over the rolling median on the log scale (`excess`), or its onset's level
    shift (`excess_ahead`: the next `shift` steps' median), is more than `factor` times the
    `quantile` of the same excess over the rest of the run (outside the episode and the
    `window` steps after it, where the median catches up). True where that cannot be judged:
    a loss that is not positive, fewer than `window` other steps."""
    onset, peak = episode
    end = min(peak + shift, len(values))
    outside = np.ones(len(values), dtype=bool)
    outside[max(onset - shift, 0):min(end + window, len(values))] = False
    for series, here in ((excess, excess[onset:end]),
                         (excess_ahead, excess_ahead[onset:onset + 1])):
        rest = series[outside]
        rest = rest[np.isfinite(rest)]
        here = here[np.isfinite(here)]
        if len(rest) < window or not len(here):
            return True
        if float(here.max()) > factor * max(float(np.quantile(rest, quantile)), 0.0):
            return True
    return False


def _against(value: float, median: float) -> str:
    """How far `value` is above `median`: a multiple where the median is positive, else the
    difference (a loss that can go negative, such as a negative log-likelihood)."""
    if median > 0:
        return f"{fmt(value / median)}x"
    return f"{fmt(value - median)} above"


_FIX = {
    "input_nonfinite": "Validate the data pipeline: drop or impute NaN/Inf rows before batching.",
    "input_outlier": "Filter or clip outlier samples, or normalize the feature robustly.",
    "lr_increase": "Check the learning-rate schedule at that step (restarts, double warm-up).",
    "grad_spike": "Clip gradients (clip_grad_norm_ with max_norm about 1) or lower the LR.",
    "unprofiled": "Record every batch's inputs (Recorder(input_every=1)) to see whether a bad "
                  "batch caused it; validate the data pipeline.",
    "unknown": "Inspect the batch and the optimizer state at that step; consider gradient "
               "clipping.",
}


def _cause(run: Run, step: int, since: int, peak: int, *, lr_increase: float,
           input_ratio: float, grad_ratio: float) -> tuple[str, str, dict]:
    """The likely cause of a spike at `step` (highest at `peak`), judged against the steps
    since `since`."""
    inp = run.inputs
    batch = inp[(inp["step"] == step) & (inp["split"] == TRAIN)]
    bad = batch[(batch["nan_count"].fillna(0) + batch["inf_count"].fillna(0)) > 0]
    if len(bad):
        row = bad.iloc[0]
        n = int(row["nan_count"] or 0) + int(row["inf_count"] or 0)
        return (f"likely cause: the input batch of that step holds {n} NaN/Inf values in "
                f"'{row['feature']}'"), "input_nonfinite", {"nonfinite_inputs": n}
    bad = nonfinite_batch(run, step)  # the sentinel: every step's batch
    if bad:
        n = int(bad.value)
        return (f"likely cause: the {bad.role} batch of that step holds {n} NaN/Inf values "
                f"in '{bad.name}'"), "input_nonfinite", {"nonfinite_inputs": n}
    outlier = _input_outlier(inp, batch, step, since, input_ratio)
    if outlier:
        feature, ratio = outlier
        return (f"likely cause: an outlier input batch, '{feature}' reaching {fmt(ratio)}x its "
                f"usual largest magnitude"), "input_outlier", {"input_ratio": ratio}
    extreme = outlier_batch(run, step, since, input_ratio)
    if extreme:
        return (f"likely cause: an outlier {extreme.role} batch, '{extreme.name}' reaching "
                f"{fmt(extreme.value)}x its usual largest magnitude"
                ), "input_outlier", {"input_ratio": extreme.value}
    lr = _lr_change(run, step, peak)
    if lr and lr >= lr_increase:
        return (f"likely cause: the learning rate rose {fmt(lr)}x just before"
                ), "lr_increase", {"lr_ratio": lr}
    grad = _grad_spike(run, step, since)
    burst = grad is not None and grad[1] >= grad_ratio
    if not len(batch):
        # Without the batch, a gradient burst is as likely the bad batch's effect as a cause.
        seen = (f"; the gradient-norm spike in '{grad[0]}' ({fmt(grad[1])}x) follows from the "
                "loss" if burst else "")
        return (f"the input batch of step {step} was not profiled, so a bad batch cannot be "
                f"ruled out{seen}"), "unprofiled", {"grad_ratio": grad[1]} if burst else {}
    if burst:
        name, ratio = grad
        return (f"likely cause: a gradient-norm spike in '{name}', {fmt(ratio)}x its recent "
                f"median"), "grad_spike", {"grad_ratio": ratio}
    if grad is None and _grads_unrecorded_at(run, step):
        return ("no input anomaly or LR change was recorded at that step, and its gradients "
                "were not recorded (the grad statistics skip steps: Recorder(every=...))"
                ), "unknown", {}
    return ("no input anomaly, LR change or gradient spike was recorded at that step"
            ), "unknown", {}


def _grads_unrecorded_at(run: Run, step: int) -> bool:
    """Whether the run recorded grads, but not at `step` or the one before it."""
    norms = run.stat(GRAD, "norm")
    return not norms.empty and not ((norms.index >= step - 1) & (norms.index <= step)).any()


def _input_outlier(inp: pd.DataFrame, batch: pd.DataFrame, step: int, since: int,
                   ratio: float) -> tuple[str, float] | None:
    if not len(batch):
        return None
    before = inp[(inp["step"] >= since) & (inp["step"] < step) & (inp["split"] == TRAIN)]
    best = None
    for _, row in batch.iterrows():
        prior = before[before["feature"] == row["feature"]]
        if len(prior) < 3:
            continue
        usual = np.maximum(prior["max"].abs(), prior["min"].abs()).astype(float).median()
        now = max(abs(float(row["max"])), abs(float(row["min"])))
        if usual > 0 and now / usual >= ratio and (best is None or now / usual > best[1]):
            best = (str(row["feature"]), now / usual)
    return best


def _lr_change(run: Run, step: int, peak: int, lookback: int = 10) -> float | None:
    """The largest LR increase factor between consecutive recorded steps from `lookback`
    before `step` to the `peak`: the onset of a level shift can show a few steps early."""
    sc = run.scalars
    names = [n for n in sc.loc[sc["split"] == TRAIN, "name"].unique()
             if str(n).startswith(LR_PREFIX)]
    best = None
    for name in names:
        lr = run.scalar(name)
        near = lr[(lr.index >= step - lookback - 1) & (lr.index <= max(step, peak))]
        prev, cur = near.to_numpy()[:-1], near.to_numpy()[1:]
        with np.errstate(invalid="ignore", divide="ignore"):
            ratios = cur[prev > 0] / prev[prev > 0]
        if len(ratios) and np.isfinite(ratios).any():
            r = float(np.nanmax(ratios))
            best = r if best is None else max(best, r)
    return best


def _grad_spike(run: Run, step: int, since: int) -> tuple[str, float] | None:
    norms = run.stat(GRAD, "norm")
    if norms.empty:
        return None
    near = norms.loc[(norms.index >= step - 1) & (norms.index <= step)]
    before = norms.loc[(norms.index >= since) & (norms.index < step - 1)]
    if near.empty or len(before) < 3:
        return None
    ratio = (near.max() / before.median()).replace([np.inf], np.nan).dropna()
    if ratio.empty:
        return None
    return str(ratio.idxmax()), float(ratio.max())
