"""loss-oscillation: the loss keeps swinging up and down without a downward trend.

What it detects
    A training loss whose last third swings widely (its 10th-90th percentile spread is at least
    `min_swing` of its median) while the run is not getting anywhere: that median is no more
    than `max_progress` below the loss at the start, or it bounced back to `rebound` times the
    best level the run had reached (the lowest rolling median over a tenth of the run), by at
    least `min_bounce` of the starting loss (a best reached inside a last third that still falls
    is that third's descent, not a bounce).

Why it matters
    A learning rate that is too high makes every step overshoot: the loss jumps between high and
    low values and never settles, or it falls at first and is then thrown back up. The run
    burns its budget without converging.

Example
    SGD with lr=1.0 on a small tanh MLP: the loss starts at 1.39 and swings between 6.1 and 15
    over the last 100 steps.

How to fix
    Lower the learning rate (3-10x is a common first step), add warm-up and a decay schedule,
    and clip gradients (`clip_grad_norm_`, max_norm about 1).

False positives
    The ordinary minibatch noise of a converging run stays quiet: its level is well below the
    start and near its best. When updates are recorded and no weight matrix moves by
    `min_update_ratio` of its norm per step any more, the swing is sampling noise around a
    model that stopped learning (dead or frozen), not oscillation, and the rule stays quiet.
    A task the model cannot learn from its inputs, with very noisy per-batch losses (noisy
    regression targets, tiny batches), can look like oscillation; raise `min_swing` there.
    Where two or more optimizers hold the model's parameters (a GAN's generator and
    discriminator, an actor and a critic), the one recorded loss is one player's or their sum,
    and it swings by design as each moves against the other: it is judged only when it
    diverges (turns non-finite, or ends above everything its first tenth held and at its
    highest level: a generator's loss rises from ln 2 as its discriminator learns, then swings
    back). A run that steps several times on each batch (PPO's epochs over one rollout, an
    inner loop: consecutive steps with the same inputs and targets) and whose loss falls on
    most of those steps (`descends_per_batch`) descends: its loss swings where the batch
    changes (a new rollout, its returns normalized anew), and the rule stays quiet. Other
    reinforcement-learning objectives are not meant to decrease steadily either: where a
    logged metric whose name gives its direction (a reward, a score, an accuracy) kept
    improving over the run (objective_improved at `alpha`), the swings do not keep the run
    from its goal and the rule stays quiet.
    More generally, where the objective moves with the model (`loss_level_uninformative`: a
    game's players, or recorded targets that move with it, such as a DQN's bootstrapped TD
    targets, which rise with its Q-values), the swings and rise are the objective's, and the
    rule stays quiet unless the optimization shows an overshoot (NaN/Inf, updates 100x the usual
    size, a learning rate raised tenfold mid-run). So it does where the recorded real-valued
    targets' scale moved twice over or more between the run's first and last quarter
    (`targets_drift`: bootstrapped targets whose spread grows with their level as the Q-values
    diverge, which a fixed data set sampled at random never shows).
    So it does where a copy of the model that follows it without gradients computes part of
    the loss (`moving_copy`: requires_grad=False weights of a trained weight's shape that moved
    by the close, such as MoCo's momentum key encoder and the queue of negatives it fills, a
    BYOL target network): its first loss against a queue of random keys lies far below the
    level real keys set. With normalized optimizers (Adam, RMSprop) the update size is read
    against the kind's usual step (`kind_overshoot`: each weight moves by about lr, so a head
    initialized at 1e-3 scale shows huge update ratios by design): an overshoot there is a
    learning rate a tenth of the layer's usual weight size or more.
    A stalled loss below its start whose last third still falls (Kendall's tau over its
    steps, one-sided, at `trend_alpha`: judged against the swings of those very steps) is a
    slow descent, not a loss without a downward trend: a hard task that leaves its chance
    level late, its minibatch noise widening as the model grows confident, stays quiet. A
    loss above its start or bounced back far above its best still fires while it falls.
    A loss summed over batches whose size varies (`sums_over_batch`: an actor-critic's loss
    summed over an episode, longer as its policy learns) swings with the batch's size: it is
    judged per sample (the loss over the batch's size at the profiled steps), and not where
    fewer than `min_steps` batches were profiled.
    A loss that sums terms (a VQ-VAE's reconstruction error plus its codebook and commitment
    terms, whose scale moves as the codes get used; a VAE's reconstruction plus an annealed KL)
    swings where any term does: where a logged train metric is its main term (0 or more, never
    above the loss, half of it or more at the start: `main_term`) and that term, judged by the
    same test, does not swing without a downward trend, the fit descends and the swings are
    the other terms', and the rule stays quiet. A learning rate too high throws the fit's
    own term too, and still fires.
    Losses that can be negative are not judged.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.analyzers._batches import batch_sizes, sums_over_batch, targets_drift
from tracelab.analyzers._dynamics import OUTCOME, finite, fmt, initial, update_ratios
from tracelab.analyzers._learning_rate import (adversarial_game, descends_per_batch,
                                               loss_level_uninformative, lr_fix,
                                               overshoot_facts)
from tracelab.analyzers._loss_terms import main_term
from tracelab.analyzers._moving_copy import (copy_level_uninformative,
                                             targets_level_uninformative)
from tracelab.analyzers._objectives import objective_improved
from tracelab.core.causes import explains
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import Needs


@rule(name="loss-oscillation", code="TL101", requires=(Needs.LOSS,), plot=Plot.LOSS_SWINGS,
      links=(explains(*OUTCOME, why="a loss that keeps swinging never settles lower",
                      timing="overlap"),))
def loss_oscillation(run: Run, *, min_steps: int = 50, min_swing: float = 0.25,
                     max_progress: float = 0.1, rebound: float = 1.75,
                     min_bounce: float = 0.15, min_update_ratio: float = 1e-6,
                     alpha: float = 1e-3, trend_alpha: float = 0.01) -> list[Finding]:
    loss = finite(run.loss())
    n = len(loss)
    shape = swinging(loss.to_numpy(dtype=float), min_steps=min_steps, min_swing=min_swing,
                     max_progress=max_progress, rebound=rebound, min_bounce=min_bounce,
                     trend_alpha=trend_alpha)
    if shape is None:
        return []
    recent, level, low, high, swing, start, best, best_i, width, progress, stalled = shape
    # A loss that sums terms (a VQ-VAE's reconstruction error and its codebook terms, a VAE's
    # reconstruction and KL) swings where any term does: where the logged term that carries
    # the loss shows no such swing by the same test, the fit descends and the swings are the
    # other terms' (a codebook's scale moving as its codes get used), not an overshoot.
    term = main_term(run, loss, min_points=min_steps)
    if term is not None and swinging(
            term.values.to_numpy(dtype=float), min_steps=min_steps, min_swing=min_swing,
            max_progress=max_progress, rebound=rebound, min_bounce=min_bounce,
            trend_alpha=trend_alpha) is None:
        return []
    # A loss summed over batches whose size varies (an actor-critic's loss summed over an
    # episode that lasts longer as its policy learns) swings with the batch's size: it is
    # judged per sample, at the steps whose batch was profiled, and not where too few were.
    if sums_over_batch(run) is not None:
        size = batch_sizes(run)
        both = size.index.intersection(loss.index)
        per = (loss.reindex(both).to_numpy(dtype=float)
               / size.reindex(both).to_numpy(dtype=float, na_value=np.nan))
        per = per[np.isfinite(per)]
        if swinging(per, min_steps=min_steps, min_swing=min_swing, max_progress=max_progress,
                    rebound=rebound, min_bounce=min_bounce, trend_alpha=trend_alpha) is None:
            return []
    # Several optimizers playing against one recorded loss swing it by design: only a loss
    # that grows out of its range is a fault there.
    if adversarial_game(run):
        return []
    # A loss whose objective moves with the model (a game's opponent, bootstrapped TD targets
    # that grow with the Q-values) rises and swings by design: without an optimization fact
    # (NaN/Inf, updates 100x the usual size) its swings tell no overshoot.
    # So does a regression whose recorded targets' scale moved twice over or more
    # (`targets_drift`: a DQN's bootstrapped targets r + gamma * max Q(s'), whose spread grows
    # with their level as the Q-values diverge), where no optimization fact shows an overshoot.
    # So does a loss partly computed by a copy of the model that follows it without gradients
    # (`copy_level_uninformative`: MoCo's momentum key encoder and the queue of negatives it
    # fills, a BYOL target network), where no optimization fact shows an overshoot.
    # Update ratios are read against the optimizer kind's usual step (RMSprop moves an
    # actor's 1e-3-scaled head by 10 lr per weight at first: `targets_level_uninformative`).
    if loss_level_uninformative(run) or copy_level_uninformative(run) or \
            targets_level_uninformative(run) or (
            targets_drift(run) is not None and not overshoot_facts(run)):
        return []
    # Several steps on each batch (PPO's epochs over one rollout) that lower its loss: the
    # swings come where the batch changes, not from the steps.
    if descends_per_batch(run):
        return []
    # Weights that no longer move cannot make the loss swing: that is batch-to-batch sampling
    # noise around a model that stopped learning (dead or frozen; other rules say which).
    moving = update_ratios(run, 1 / 3)
    if len(moving) and moving.max() < min_update_ratio:
        return []
    # A logged objective (a reward, an accuracy) that kept improving says the run gets
    # somewhere: the loss swings, but not against its progress (a policy gradient's loss grows
    # with the returns it weighs).
    if objective_improved(run, alpha):
        return []
    first = int(loss.index[n - len(recent)])
    trend = (f"{fmt(start)} at the start" if stalled else
             f"{fmt(best)} at its best near step {int(loss.index[best_i + width // 2])}")
    return [loss_oscillation.finding(
        WARNING, "loss", (first, int(loss.index[-1])),
        f"Train loss keeps swinging between {fmt(low)} and {fmt(high)} (10th-90th percentile "
        f"over the last {len(recent)} steps, {fmt(100 * swing)}% of its median {fmt(level)}) "
        f"without a downward trend (against {trend}).",
        {"median": level, "p10": float(low), "p90": float(high), "swing": float(swing),
         "start_loss": start, "best_level": best, "progress": float(progress)},
        lr_fix(run, "Lower the learning rate (3-10x), add warm-up and a decay schedule, and "
               "clip gradients (clip_grad_norm_ with max_norm about 1)."))]


def swinging(values: np.ndarray, *, min_steps: int, min_swing: float, max_progress: float,
             rebound: float, min_bounce: float, trend_alpha: float) -> tuple | None:
    """The shape test on a loss's values over consecutive steps: where its last third swings
    by `min_swing` of its median or more and it is stalled (less than `max_progress` below its
    start) or bounced back from its best (see the rule), not a slow descent, the tuple (last
    third, its median, p10, p90, swing, start, best, best's index, rolling width, progress,
    stalled); None otherwise, and where it cannot be judged (fewer than `min_steps` values, a
    negative value, a median or start of 0)."""
    n = len(values)
    if n < min_steps or np.any(values < 0):
        return None
    start = initial(values)
    recent = values[n - max(n // 3, 10):]
    level = float(np.median(recent))
    if level <= 0 or start <= 0:
        return None
    low, high = np.quantile(recent, [0.1, 0.9])
    swing = (high - low) / level
    width = max(10, n // 10)
    rolling = pd.Series(values).rolling(width).median().to_numpy()[width - 1:]
    best_i = int(np.argmin(rolling))
    best = float(rolling[best_i])
    progress = (start - level) / start
    # A bounce must be large against the run's own scale, not only against a low best. A best
    # centred inside the last third while that third still falls (beyond the swings of its own
    # steps) is where the descent got to, not a level the loss was thrown back from: a batch
    # of one's skewed noise keeps the third's median far above its final rolling median.
    stalled = progress < max_progress
    bounced = level >= rebound * best and level - best >= min_bounce * start
    if (bounced and best_i + width // 2 >= n - len(recent)
            and still_falling(recent, trend_alpha)):
        bounced = False
    if swing < min_swing or not (stalled or bounced):
        return None
    # A stalled loss below its start whose last third still falls, beyond the swings of its
    # own steps, is a slow descent (a hard task leaving its chance level late), not a loss
    # without a downward trend. A loss above its start, or bounced back far above its best,
    # is no better for falling a little.
    if stalled and not bounced and level < start and still_falling(recent, trend_alpha):
        return None
    return (recent, level, float(low), float(high), float(swing), start, best, best_i, width,
            float(progress), stalled)


def still_falling(values: np.ndarray, alpha: float) -> bool:
    """Whether `values` (a loss over consecutive steps) fall with the step beyond their own
    scatter: Kendall's tau below 0 with a one-sided p-value under `alpha`."""
    if len(values) < 10:
        return False
    from scipy.stats import kendalltau

    try:
        tau, p = kendalltau(np.arange(len(values)), values, alternative="less")
    except (ValueError, TypeError):
        return False
    return bool(np.isfinite(p) and tau < 0 and p < alpha)
