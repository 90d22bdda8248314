"""exploding-gradients: some layers' gradient norms grow huge.

What it detects
    For each weight matrix or kernel, its gradient norm smoothed over a few recorded steps
    (rolling median, so a single bad batch does not count). A layer is flagged when that
    sustained norm grows to `growth` times its level before (the lowest it held earlier, and
    at least its level at the start) while exceeding `min_norm`, or, for a loss recorded as a
    mean (`Recorder(loss_fn=...)` with reduction "mean"), when it reaches `max_norm`. For a
    squared error (MSELoss) that bound is per unit of the error: the gradient of a mean squared
    error is at most 2 * sqrt(loss) times the outputs' derivative, so the norm is divided by
    2 * sqrt(loss) at the same step where that exceeds 1. Both levels are per term of the
    loss: a loss summed over the batch (reduction "sum", with what enters it recorded:
    `step(outputs=...)`) has gradients as many times a mean's as it adds terms (rows for a
    cross-entropy, elements otherwise), and is judged on its norm divided by that count. The
    finding names the layers, with the peak's ratio to the median of the other layers at the
    same step.
    Non-finite gradients are left to nonfinite-values.

Why it matters
    Exploding gradients make each update overshoot: the loss jumps, weights blow up, and the
    run usually ends in NaN a few steps later. One layer far above the rest points to a bad
    initialization or an unbalanced architecture.

Example
    `0.weight`'s gradient norm grows from 0.13 to 2.1e+03 by step 40, 85x the median of the
    other layers, and the loss turns NaN at step 47.

How to fix
    Clip gradients (`clip_grad_norm_`, max_norm about 1), lower the learning rate, normalize
    the inputs, use a fitting initialization (Kaiming/Xavier), and add normalization layers or
    residual connections.

False positives
    Losses summed (not averaged) over large batches or sequences have proportionally larger
    gradients by design: the absolute `max_norm` applies only to a loss recorded as a mean, and
    a summed one only divided by its recorded count of terms, and every other run is judged
    by its gradients' growth alone. A gradient that grows from a tiny
    start (a zero-initialized layer) must still exceed `min_norm` to count; a norm largest in
    the first steps that then falls (a transient of the initialization) has not grown. A
    regression on large targets has large gradients while its error is large: judged per unit
    of the error, they are its scale, not an explosion. Gradients of a deep
    network often grow 100x from a tiny start as it learns: while the loss, finite throughout,
    ends the span at half its start or less -- the span up to the peak, or up to the last
    recorded gradient (growth that levelled off while the loss went on falling) --, the
    finding is information, not a warning. So it is where the loss fell less, towards a floor
    far above 0 (a VAE's BCE summed over grey pixels, whose gradients climb from a tiny start
    as its encoder wakes up), but did so without harm judged against its own early noise:
    finite and not negative, it never rose above where it began by more than three times its
    first steps' step-to-step change, and it ended below the lowest of its first steps.
    Gradients of a regression loss scale with its targets: where real-valued targets were
    recorded (`step(targets=...)`, not class indices) for a loss that is no classification's,
    growth is judged on the norm divided by the targets' root mean square relative to its
    start, where that grew (a DQN's bootstrapped targets, 1 -> 20 as its policy improves), so
    gradients that follow their targets are not an explosion.
    In a game of two or more players, each stepping on its own loss (a GAN's generator and
    discriminator, an actor and a critic: `adversarial_game`; not several optimizers stepping on
    one loss, such as Muon with AdamW), each player's gradients scale with the others' progress
    -- a generator's arrive through the discriminator's gradients with respect to its input,
    which grow as it learns to tell real from fake -- so growth from the start has no fixed
    reference: while no layer crosses the per-term bound (a loss recorded as a mean: the error
    per term of a cross-entropy or BCE is at most 1) and the loss, finite throughout, did not
    grow, or grew with no optimization fact of an overshoot (`overshoot_facts`: updates 100x
    the usual size, a learning rate raised tenfold mid-run; a player's loss climbs as the other
    wins), the finding is information, not a warning.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tracelab.analyzers._learning_rate import (adversarial_game, lower_lr_fix, overshoot_facts,
                                               several_players)
from tracelab.analyzers._loss_contracts import (BCE, BCE_LOGITS, CROSS_ENTROPY, NLL, SQUARED,
                                                loss_fn, loss_type, mean_reduced, output_facts)
from tracelab.analyzers._dynamics import (OUTCOME, edge_len, fmt, initial, matrix_params,
                                          name_list, subject_of)
from tracelab.core import causes
from tracelab.core.causes import explains
from tracelab.core.findings import INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import GRAD, OUTPUT_CLASSES, OUTPUT_NUMEL, Needs



def _gradient_first(cause: Finding, effect: Finding) -> bool:
    # A loss spike explained by a burst is one the spike rule blamed on a gradient spike.
    if effect.rule == "loss-spike":
        return causes.stated_cause(effect) == "grad_spike"
    return not causes.input_borne(effect)


@rule(name="exploding-gradients", code="TL202", requires=(Needs.GRADS,), plot=Plot.GRADIENT_LAYERS,
      links=(explains("nonfinite-values", "loss-spike", "loss-oscillation", "run-aborted",
                      "dead-units", "saturated-activations", *OUTCOME,
                      why="exploding gradients overflow into NaN/Inf and throw the loss about",
                      when=_gradient_first),))
def exploding_gradients(run: Run, *, max_norm: float = 100.0, growth: float = 100.0,
                        min_norm: float = 1.0, smooth: int = 5,
                        min_steps: int = 10) -> list[Finding]:
    norms = run.stat(GRAD, "norm")
    names = matrix_params(run, norms.columns)
    if len(norms) < min_steps or not names:
        return []
    norms = norms[names].where(np.isfinite(norms[names]))
    sustained = norms.rolling(smooth, min_periods=smooth).median()
    start = norms.iloc[:edge_len(len(norms), lo=smooth, hi=50)].median()
    peak = sustained.max()
    # Growth is a level reached from a lower one, at least the start's: a norm that is largest
    # in the first steps and then falls (a transient of the initialization) never grew. A
    # regression's gradients are judged per unit of its targets' scale, where that grew.
    targets = _target_growth(run, norms.index)
    scaled = norms if targets is None else norms.div(targets, axis=0)
    level_of = scaled.rolling(smooth, min_periods=smooth).median()
    first_level = scaled.iloc[:edge_len(len(norms), lo=smooth, hi=50)].median()
    lowest = level_of.cummin().shift(1)
    before = lowest.clip(lower=first_level, axis=1).where(lowest.notna())
    rise_of = level_of / before
    grew = rise_of.max()
    # An absolute norm means something only per term of the loss: a mean's, or a sum's divided
    # by the batch, the sequence or the pixels it adds up (the user's choice of scale); for a
    # squared error, per unit of the error it scales with.
    terms = 1.0 if mean_reduced(run) else _summed_terms(run)
    floor = min_norm * (terms or 1.0)
    judged = _per_unit(run, norms, terms)
    level = judged.rolling(smooth, min_periods=smooth).median() if terms else None
    top = level.max() if level is not None else pd.Series(np.nan, index=names)
    grown = ((rise_of >= growth) & (sustained >= floor)).any()
    hot = [n for n in names if top[n] >= max_norm or grown[n]]
    if not hot:
        return []
    worst = max(hot, key=lambda n: peak[n])
    at = sustained[worst].idxmax()
    others = sustained.loc[at, [n for n in names if n != worst]].median()
    ratio = float(peak[worst] / others) if others > 0 else float("nan")
    first = min(_onset(sustained[n], level[n] if level is not None else None, max_norm,
                       max(floor, growth * start[n])) for n in hot)
    rise = f", {fmt(grew[worst])}x its start ({fmt(start[worst])})" if grew[worst] > 0 else ""
    if rise and targets is not None and float(targets.max()) > 1:
        rise += f" per unit of its targets' scale (which grew {fmt(float(targets.max()))}x)"
    rel = f", {fmt(ratio)}x the median of the other layers" if ratio == ratio else ""
    # Did the growth harm the loss? Judged at the peak, and again at the run's end: growth
    # that stopped at the peak while the loss went on falling did no harm either.
    learning = _loss_fell(run, first, int(at)) or _loss_fell(run, first, int(norms.index[-1]))
    told = "; the loss kept falling meanwhile (grads that grow from a small start as a deep " \
        "network learns)" if learning else ""
    if not learning and _loss_unharmed(run, smooth):
        learning = True
        told = ("; the loss never rose above where it began (beyond its early noise) and "
                "ended below its first steps (grads that climb from a tiny initialization as "
                "the network starts to learn, on a loss whose floor lies far above 0)")
    # A game (a GAN's generator and discriminator): one player's gradients scale with the
    # other's progress, growth from the start has no fixed reference; judged per term of the
    # loss (the absolute bound) and by a loss that stayed finite and did not grow.
    game = not learning and _calm_game(run, [n for n in hot if top[n] >= max_norm])
    if game:
        told = ("; two or more players play a game (a GAN's generator and discriminator), "
                "whose players' gradients grow as the others learn, and none crossed the "
                "per-term bound nor did the loss grow")
    return [exploding_gradients.finding(
        INFO if learning or game else WARNING, subject_of(hot), (first, int(at)),
        f"Gradients explode in {len(hot)} of {len(names)} layers ({name_list(hot)}): "
        f"'{worst}' reaches a sustained norm of {fmt(peak[worst])} at step {int(at)}"
        f"{rise}{rel}{told}.",
        {"layers": len(hot), "of_layers": len(names), "peak_norm": float(peak[worst]),
         "start_norm": float(start[worst]), "growth": float(grew[worst]),
         "ratio_to_other_layers": ratio, "peak_step": int(at)},
        lower_lr_fix(run, "Clip gradients (clip_grad_norm_ with max_norm about 1), lower the "
                     "learning rate and normalize the inputs; check the named layers' "
                     "initialization."))]


def _calm_game(run: Run, bounded: list[str]) -> bool:
    """Whether the growth is a game's by design: two or more players move the parameters
    against each other, each on its own loss, and the loss did not grow (`adversarial_game`),
    the loss stayed finite, and no layer crossed the absolute per-term bound (`bounded`: those
    that did). A generator's gradients arrive through the discriminator's gradients with
    respect to its input, which grow as it learns to tell real from fake."""
    if bounded:
        return False
    loss = run.loss().to_numpy(dtype=float)
    return bool(len(loss)) and bool(np.isfinite(loss).all()) and (
        adversarial_game(run) or (several_players(run) and not overshoot_facts(run)))


def _target_growth(run: Run, index: pd.Index) -> pd.Series | None:
    """The training targets' root mean square (sqrt(mean^2 + std^2), the median over their
    features) at each step of `index` (the last profile at or before it), relative to the
    first profiled steps' and at least 1; None where the loss is a classification's, the
    targets are integers (class indices) or fewer than two profiles were recorded."""
    if loss_type(run) in CROSS_ENTROPY | NLL | BCE | BCE_LOGITS:
        return None
    try:
        t = run.targets
        t = t[(t["split"] == "train") & t["mean"].notna() & t["std"].notna()]
        if not len(t) or not (t["int_frac"].fillna(1.0) < 1).any():
            return None
        rms = np.sqrt(t["mean"].astype(float) ** 2 + t["std"].astype(float) ** 2)
        scale = rms.groupby(t["step"].astype(int)).median().sort_index()
    except (KeyError, TypeError, ValueError):
        return None
    scale = scale[np.isfinite(scale) & (scale > 0)]
    if len(scale) < 2:
        return None
    first = float(scale.iloc[:edge_len(len(scale), lo=1, hi=10)].median())
    at = scale.reindex(scale.index.union(index)).ffill().reindex(index)
    return (at / first).clip(lower=1.0).fillna(1.0)


def _loss_fell(run: Run, first: int, last: int) -> bool:
    """Whether the training loss, finite throughout, ended the span of growing gradients at
    most half of where it began the run (the lower of its first value and its first steps'
    median): growth that did the loss no harm. A loss that goes
    negative has no such ratio (False)."""
    loss = run.loss()
    if not len(loss) or not np.isfinite(loss.to_numpy(dtype=float)).all():
        return False
    # Where it began: its first steps' median, or its first value where lower (taken before
    # any update acted: a loss thrown up by the first steps' explosion is no start).
    start = min(float(loss.iloc[0]), float(loss.iloc[:edge_len(len(loss), lo=5, hi=50)].median()))
    span = loss[(loss.index >= first) & (loss.index <= last)]
    if not len(span) or start <= 0 or float(span.min()) < 0:
        return False
    return float(span.iloc[-edge_len(len(span), lo=1, hi=20):].median()) <= 0.5 * start


def _loss_unharmed(run: Run, smooth: int) -> bool:
    """Whether the growth did the loss no harm, judged against the run's own early noise: the
    training loss, finite and not negative throughout, never rose (its rolling median over
    `smooth` steps) above where it began (`initial`) by more than three times its first steps'
    noise (the median change from one step to the next), and its last steps' median ended below the
    lowest of its first steps. Exploding gradients make updates overshoot, which throws the
    loss up; a loss with a high floor (a reconstruction summed over the pixels of images that
    are not binary) may fall far less than half while its gradients climb from their
    initialization."""
    loss = run.loss()
    loss = loss[~loss.index.duplicated(keep="last")]
    values = loss.to_numpy(dtype=float)
    if len(values) < 2 * smooth or not np.isfinite(values).all() or float(values.min()) < 0:
        return False
    head = values[:edge_len(len(values), lo=smooth, hi=50)]
    noise = float(np.median(np.abs(np.diff(head))))  # a trend or one jump leaves it be
    level = pd.Series(values).rolling(smooth, min_periods=smooth).median().dropna()
    tail = float(np.median(values[-edge_len(len(values), lo=smooth, hi=50):]))
    return bool(len(level)) and float(level.max()) <= initial(values) + 3 * noise and (
        tail < float(head.min()))


def _summed_terms(run: Run) -> float | None:
    """How many terms a loss recorded as a sum adds up, from what entered it (the median over
    the profiled steps): rows for a cross-entropy or NLL (the output's elements over its
    classes), elements for an elementwise loss. None where the reduction is not "sum" or the
    outputs were not recorded."""
    if loss_fn(run).get("reduction") != "sum":
        return None
    facts = output_facts(run)
    numel = facts[OUTPUT_NUMEL].dropna() if OUTPUT_NUMEL in facts else ()
    if not len(numel):
        return None
    terms = float(numel.median())
    if loss_type(run) in CROSS_ENTROPY | NLL and OUTPUT_CLASSES in facts:
        classes = facts[OUTPUT_CLASSES].dropna()
        terms = terms / float(classes.median()) if len(classes) and classes.median() > 0 else 0
    return terms if math.isfinite(terms) and terms >= 1 else None


def _onset(series: pd.Series, judged: pd.Series | None, max_norm: float, grown: float) -> int:
    """First step at which a layer's sustained norm crossed either threshold: `max_norm` on
    its `judged` level (per term of the loss), or `grown` on the norm."""
    crossed = np.zeros(len(series), dtype=bool)
    if grown == grown:
        crossed |= (series >= grown).to_numpy()
    if judged is not None:
        crossed |= (judged >= max_norm).to_numpy()
    hits = series.index[crossed]
    return int(hits[0]) if len(hits) else int(series.idxmax())


def _per_unit(run: Run, norms: pd.DataFrame, terms: float | None) -> pd.DataFrame:
    """The gradient norms per term of the loss (divided by `terms`) and, for a squared error,
    per unit of its error above one: a mean squared error's gradient is 2 * mean(error *
    d output), at most 2 * sqrt(loss) times the outputs' typical derivative (Cauchy-Schwarz
    over the batch), so a regression on targets of size 100 has gradients 100 times one on
    targets of size 1, falling as its error falls. The absolute bound presumes an error
    factor of about 1 at most (a cross-entropy's p - y): a larger one, 2 * sqrt(the loss per
    term) at the same step, is divided out; a smaller one is kept, as a cross-entropy's near
    convergence. Steps without a finite positive loss are left out (NaN)."""
    if not terms:
        return norms
    per_term = norms / terms
    if loss_type(run) not in SQUARED:
        return per_term
    loss = run.loss()
    loss = loss[~loss.index.duplicated(keep="last")].astype(float)
    loss = loss.where(np.isfinite(loss) & (loss > 0)).reindex(norms.index) / terms
    return per_term.div(np.maximum(2 * np.sqrt(loss), 1.0), axis=0)
