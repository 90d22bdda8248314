"""loss-below-bound: the training loss went below the least value its function can take.

What it detects
    Cross-entropy, NLL on log-probabilities, BCE, MSE, L1, Huber, KL divergence, margin and
    triplet losses are never below 0 while their inputs keep their contract. With
    `Recorder(loss_fn=...)` naming one of them, the rule fires when the recorded train loss
    sits below 0 over the last half of the run: on at least `min_share` of its steps, with a
    median below 0 by more than `tolerance` of the loss's largest magnitude. Without
    `loss_fn` nothing is assumed of the loss (a Gaussian or flow log-likelihood is negative
    by nature): the rule fires only on a loss that falls without bound, negative in the last
    quarter of the run and either still falling there as fast as in the first quarter (and
    at least as far below 0 as it started from 0), or gone more than `orders` orders of
    magnitude below the scale of its first steps. In a game (two or more players, each on its
    own loss) only the second holds: see False positives.
    A two-player game (two or more optimizers) whose recorded loss is a binary cross-entropy
    and that logs exactly one other train loss (a GAN's generator loss beside its `d_loss`):
    two opponents scored on the same outputs p of the discriminator on the fakes cannot both
    be near 0, one pays -log p and the other at least half of -log(1 - p), so their sum is at
    least min_p [-log p - log(1 - p) / 2] = ln(3/2) + ln(3)/2 ≈ 0.955. The rule fires when the
    sum sits below that bound on `min_share` of the last half's steps, its median below half
    of it: the players cooperate, one loss's sign or labels are flipped.

Why it matters
    A loss below its minimum is being maximized, not minimized: a sign flipped
    (`loss = -criterion(out, y)`, a reward used as a loss), or inputs outside the loss's
    domain (logits given to NLLLoss, targets of -1 given to BCE). The optimizer then drives
    the weights without limit; the run ends in exploding weights, saturated outputs or NaN,
    while the falling loss curve looks like progress.

Example
    The CrossEntropyLoss loss was below 0 on 60 of the last 60 steps (median -41.2, lowest
    -88.0): it cannot be below 0, so the optimizer is maximizing it.

How to fix
    Minimize the loss itself: remove the minus sign (to maximize a reward r, minimize -r,
    once), and give the loss the inputs it expects (NLLLoss: log_softmax outputs).

False positives
    A regularized loss that subtracts a small bonus (an entropy bonus) can dip just below 0,
    and a recorded loss that adds a term of another kind to the named one (a policy-gradient
    term beside a value loss) swings around 0: the rule asks for nearly every step of the
    run's last half to be below 0, by more than `tolerance` of the loss's largest magnitude
    in the median. Losses that may be negative (Gaussian NLL,
    Poisson NLL, a critic's Wasserstein estimate, a log-likelihood) are not in the bounded set
    and, without `loss_fn`, only a loss falling without bound fires. Without `loss_fn` in a
    game (two or more players: a GAN, an actor and a critic), the recorded loss is one
    player's, often linear in outputs its opponent moves (a WGAN's critic score averaged over
    the batch, negative by design; a policy-gradient surrogate): it has no floor by design and
    falls as the opponent moves, so only a fall by more than `orders` orders of magnitude fires.
"""
from __future__ import annotations

import numpy as np

from tracelab.analyzers._dynamics import edge_len, finite, fmt
from tracelab.analyzers._learning_rate import several_players
from tracelab.analyzers._loss_contracts import BCE, BCE_LOGITS, NONNEGATIVE, loss_type
from tracelab.core.causes import cause_is_stated, explained_by, explains
from tracelab.core.findings import ERROR, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import Needs

FIX = ("Minimize the loss itself: remove the minus sign in front of it (to maximize a reward, "
       "minimize its negative once), and give the loss the inputs and targets it expects "
       "(NLLLoss: log_softmax outputs; BCE: targets in [0, 1]).")


@rule(name="loss-below-bound", code="TL612", requires=(Needs.LOSS,), plot=Plot.LOSS,
      links=(explains("exploding-gradients", "nonfinite-values", "saturated-activations",
                      "collapsed-outputs", "dead-units", "update-ratio", "loss-collapse",
                      "loss-oscillation", "loss-spike",
                      why="a loss that is maximized drives the weights without limit",
                      timing="overlap"),
             explained_by("target-problems",
                          why="targets outside the loss's domain (BCE targets of -1) make a "
                              "loss that has no minimum", timing="overlap",
                          when=cause_is_stated)))
def loss_below_bound(run: Run, *, tolerance: float = 0.01, min_share: float = 0.9,
                     orders: float = 3.0, min_steps: int = 8) -> list[Finding]:
    loss = finite(run.loss())
    values = loss.to_numpy(dtype=float)
    if len(values) < min_steps:
        return []
    kind = loss_type(run)
    if kind in BCE | BCE_LOGITS and several_players(run):
        game = _cooperating_players(run, loss, min_share=min_share)
        if game:
            return game
    if kind in NONNEGATIVE:
        half = loss.iloc[len(loss) // 2:]
        median = float(half.median())
        below = half[half < 0]
        if (median >= -tolerance * float(np.abs(values).max())
                or len(below) < min_share * len(half)):
            return []
        return [loss_below_bound.finding(
            ERROR, "loss", (int(loss.index[values < 0][0]), int(loss.index[-1])),
            f"The {kind} loss was below 0 on {len(below)} of the last {len(half)} steps "
            f"(median {fmt(median)}, lowest {fmt(float(values.min()))}): it cannot be below 0, "
            "so the optimizer is maximizing it or its inputs break its contract.",
            {"loss_fn": kind, "bound": 0.0, "median_last_half": median,
             "lowest": float(values.min()), "steps_below": len(below),
             "steps_judged": len(half)}, FIX)]
    if kind is not None:
        return []
    game = several_players(run)
    quarters = [float(np.mean(q)) for q in np.array_split(values, 4)]
    drops = np.diff(quarters) * -1
    start = quarters[0]
    # one player's loss in a game (a WGAN critic's or generator's mean score, an actor's
    # surrogate) is linear in outputs that an opponent moves: it has no floor by design, and a
    # steady fall says only that the opponent moved; only an explosion tells there
    steady = (not game and (drops > 0).all() and drops[-1] >= drops[0] / 2
              and quarters[-1] <= -abs(start))
    scale = float(np.abs(values[:edge_len(len(values))]).max())
    lowest = float(values.min())
    exploded = lowest <= -(10 ** orders) * scale
    if not (quarters[-1] < 0 and (steady or exploded)):
        return []
    how = (f"as fast in the last quarter of the run ({fmt(-drops[-1])} per quarter) as in the "
           "first, with no floor in sight" if steady else
           f"its lowest, {fmt(lowest)}, lies over {orders:g} orders of magnitude below the scale "
           f"it started at ({fmt(scale)})")
    return [loss_below_bound.finding(
        WARNING, "loss", (int(loss.index[0]), int(loss.index[-1])),
        f"The loss fell without bound: from {fmt(values[0])} to {fmt(values[-1])}, {how}. A "
        "loss that has a minimum slows down as it nears it; this one is being maximized, or "
        "its inputs or targets lie outside its domain.",
        {"loss_fn": None, "quarter_means": quarters, "first": float(values[0]),
         "last": float(values[-1])}, FIX)]


# min over p of -log p - log(1 - p) / 2 (at p = 2/3): the least sum of a generator's BCE and a
# discriminator's that averages its real and fake terms (summing them, the bound is ln 4).
GAME_BOUND = float(np.log(1.5) + np.log(3.0) / 2)


def _cooperating_players(run: Run, loss, *, min_share: float) -> list[Finding]:
    """loss-below-bound's game contract: the recorded BCE loss and the one other train loss
    logged beside it, opponents on the discriminator's score of the fakes, summed below
    `GAME_BOUND` over the last half of the run."""
    sc = run.scalars
    if not {"split", "name", "step", "value"} <= set(sc.columns):
        return []
    train = sc[sc["split"].astype(str) == "train"]
    others = [n for n in train["name"].astype(str).unique()
              if "loss" in n.lower() and n != "loss" and "/" not in n]
    if len(others) != 1:
        return []
    other = finite(run.scalar(others[0]))
    both = np.array([(loss[s], other[s]) for s in loss.index.intersection(other.index)],
                    dtype=float).reshape(-1, 2)
    if len(both) < 8 or (both < 0).any():
        return []
    total = both.sum(axis=1)[len(both) // 2:]
    median = float(np.median(total))
    below = int((total < GAME_BOUND).sum())
    if median >= GAME_BOUND / 2 or below < min_share * len(total):
        return []
    return [loss_below_bound.finding(
        ERROR, "loss", (int(loss.index[0]), int(loss.index[-1])),
        f"The loss and '{others[0]}', two players' binary cross-entropies, summed to a median "
        f"of {fmt(median)} over the last {len(total)} steps ({below} below {fmt(GAME_BOUND)}): "
        "opponents scored on the same outputs cannot both be near 0 (one pays -log p, the "
        f"other at least half of -log(1 - p), at least {fmt(GAME_BOUND)} together), so the "
        "players cooperate: one loss's sign or its labels are flipped (a generator trained "
        "towards the 'fake' label).",
        {"loss_fn": loss_type(run), "partner": others[0], "bound": GAME_BOUND,
         "median_last_half": median, "steps_below": below, "steps_judged": len(total)},
        "Give the generator the labels of real samples (loss = bce(D(G(z)), ones)) and the "
        "discriminator real=1, fake=0; remove any minus sign in front of either loss.")]
