"""learning-rate-too-high: a too-high learning rate, named from its symptoms when they agree.

What it detects
    No rule sees the learning rate directly: it shows as a loss that keeps swinging, loss spikes
    (right after the LR rose, or again and again), updates far above 1e-3 of the weights
    (`far_above` times it or more, over the run or its first `early` steps), exploding
    gradients, NaN/Inf, units that die, and a loss that stays flat as its units die or its
    weight matrices lose every gradient. Units that die stop updating, so a median over the
    run (or its first steps) hides the step that killed them: the step the layer before dead
    units took up to the onset of their death (dead-units' `update_ratio_before_onset`), when
    `far_above` times the usual 1e-3 or more and the death costs the model (a warning or an
    error), is the update-size vote too: the order in time (the step, then the death) says
    which is the cause. It reads those rules' findings, and the loss itself:
    one whose first updates left it `jump` (100) times or more above its first value (the
    model's before any update; the median of the first tenth's finite values, up to the first
    NaN/Inf, two at least) overshot, as a gradient descent whose step is too large diverges
    geometrically until it turns NaN/Inf (a summed loss fed a learning rate tuned for a mean,
    Adam at lr 1). A rise of `worse` (2) times or more (that median, or each of the first two
    updates' losses: an overshoot Adam's second moment damps within a few steps) says the
    first updates left the model worse than untrained (where the loss is not known to be a
    mean, by `worse` times the spread of its rows per step or more, `_rows_spread`: a sum grows
    with the rows it sums; Adam at lr 0.1 throws an LSTM's cross-entropy from 2.3 to 14 in one
    step): a signal too, but not about the optimization alone (gradients that explode through
    an unclipped recurrence do it as well). Two facts of a run that learned little count too:
    a train loss that settled at the level of the best prediction that ignores the input
    (target-problems' constant-prediction finding: first steps that rewrite the weights --
    Adam moves each weight by about lr per step, 5 times the 0.02 scale of a GPT's weights at
    lr 0.1 -- throw the model to the class shares, and the weights grow until each step is a
    small part of them, so the update ratio over the run looks moderate), and an evaluation
    split's logged score whose name gives its direction (an accuracy, a reward, an error) that
    fell over the second half of the run 1.2 times or more below every value of its first
    quarter (the median of the last half, and worse than that quarter by a one-sided
    Mann-Whitney test, `_objective_lost`: the steps threw the model away from what its first
    steps found, as SimSiam's kNN accuracy falls at a learning rate 100x its own). When at
    least two of these signals agree, and one of them is about the optimization itself
    (swings, spikes, update size, a 100-fold rise), it says so, with the numbers, and explains
    those findings (the constant-prediction finding only where it voted). A learning rate
    too high must also show in the loss: one that ends finite and `fell` (4) times or more
    below its start (the lower of its first value and the loss of the best prediction that
    ignores the input) did not fail to fall, rise, blow up or swing far above its best, and
    the rule stays quiet whatever the other signals say. So it does when a logged metric whose
    name gives its direction (a reward, an accuracy, an error: loss-against-objective's
    `direction`) improved significantly over the run and still did over its second half (its
    last quarter better than its first and than its second, one-sided Mann-Whitney p <
    `alpha`, the best of the four, with at least half the gain in the second half): a step
    too large keeps the objective from improving, whatever the loss does (a DQN's regression
    targets grow as its policy improves, and its loss and gradients with them). A score that
    climbs from its initialization to chance and settles there made its gain early: it does
    not count.

Why it matters
    Each symptom alone has several causes, and its own fix (clip the gradients, switch to
    LeakyReLU) treats the symptom; together they point at one setting to change.

Example
    The loss swings between 0.9 and 4.7, updates reach 0.14 of the weights' norm per step
    (140x the usual 1e-3) and 90% of one layer's units died: the learning rate is too high.

How to fix
    Lower the learning rate by the factor the update ratios give and warm it up; when the LR
    rose mid-run, check the schedule at that step.

False positives
    A loss that jumps tenfold and more from one step to the next by design (a style
    transfer's image under L-BFGS, batches in different units) lies below its next steps'
    level at the first step as at many others: a rise smaller than `jump` counts only beyond
    that spread (`_loss_tail`: the 95th percentile of the ratio of the next steps' median to
    each later step's loss).
    Gradient norms scale with the loss (an MSE on targets in the hundreds), and Adam-type
    optimizers move each weight by about the learning rate whatever the gradients, so that
    small layers show update ratios of lr/|w| (0.1-0.3 at lr 0.03): neither means much while
    the loss falls fourfold, hence the loss's veto; gradient growth that its own rule found
    benign (an information note: the loss kept falling) casts no vote, nor do units dead from
    the start (the initialization's, not the steps'). A cause that keeps the loss high by
    itself and that its own facts show (vanishing gradients, BatchNorm over a few samples,
    training in eval mode, weight decay that pins the weights, units dead from the start)
    ranks above this finding and explains it, unless the loss jumped right after the LR rose,
    turned NaN/Inf or grew (and units dead from the start do not where other units died
    right after a step that rewrote their weights: that death is the steps'). Symptoms that an input cause already explains (a bad batch,
    unnormalized inputs) do not count, nor NaN/Inf that only the evaluation's loss holds. A
    loss at the input-free prediction's level and a score that fell are no votes about the
    optimization (targets unrelated to their inputs, overfitting): they count only beside
    updates 100x the usual, swings, spikes or a rise, never alone, and a game's score none.
    Where several players hold the model's parameters, each stepping on its own loss (a GAN's
    generator and discriminator, an actor and a critic: `several_players`; several optimizers on
    one loss, such as Muon with AdamW, are no game), the one recorded loss swings by design, as
    each player moves against the other: its swings and spikes count only when it diverges
    (turns non-finite, or ends above everything its first tenth held and at its highest level);
    each optimizer's update size, gradients and NaN/Inf still count. So they do not, nor a rise
    under the first updates, where the run steps several times on each batch and the loss
    falls on most of those steps (`descends_per_batch`: PPO's epochs over one rollout): it
    swings where the batch changes. Healthy tiny networks reach 30-60x the usual update ratio
    in their first steps, below `far_above` (a recorded update spanning an inner loop's
    optimizer steps counts divided by them: a lower bound of one step's size); a lone spike with
    its gradient burst is one signal, not two, and one outlier batch after the first step is no
    rise (the median of the first tenth is); a game's loss casts no rise vote. More generally,
    a loss whose objective moves with the model (`loss_level_uninformative`: several players,
    or recorded targets that move with it, such as a DQN's bootstrapped TD targets r + gamma *
    max Q(s'), which rise as its Q-values rise) is no fixed objective: its rise, swings and
    spikes cast no vote unless the optimization itself shows an overshoot (NaN/Inf, updates
    100x the usual size, a learning rate raised tenfold mid-run: `overshoot_facts`).
    So is a loss partly computed by a copy of the model that follows it without gradients
    (`moving_copy`: MoCo's momentum key encoder and its queue of negatives, whose first loss
    against random keys lies far below the level real keys set), and where the targets move
    (bootstrapped returns) under a normalized optimizer, the update size is read against the
    kind's usual step (`kind_overshoot`: RMSprop moves an actor's 1e-3-scaled head by 10 lr
    per weight at first; an overshoot is a learning rate a tenth of the weights' size).
    Its fix presumes that an optimizer's learning rate moves these weights: where no optimizer
    holds any of the model's trained parameters (meta.json's optimizers), the diagnosis ranks
    below every one the recorded facts do not contradict.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd
from scipy.stats import mannwhitneyu

from tracelab.analyzers._batches import sums_over_batch
from tracelab.analyzers.dead_units import BURST_OVER_MEDIAN
from tracelab.analyzers._dynamics import OUTCOME, edge_len, initial, matrix_params
from tracelab.analyzers._dynamics import fmt as _fmt
from tracelab.analyzers._learning_rate import (LR_KNOWN, LR_MOVES_THE_MODEL, NO_OPTIMIZER_FIX,
                                               adversarial_game, descends_per_batch,
                                               loss_grew, loss_level_uninformative, lr_known,
                                               without_optimizer)
from tracelab.analyzers._loss_contracts import class_shares, constant_loss, mean_reduced
from tracelab.analyzers._moving_copy import (copy_level_uninformative,
                                             targets_level_uninformative)
from tracelab.analyzers._objectives import objective_improved, run_direction
from tracelab.analyzers._slow_updates import per_update
from tracelab.core import causes
from tracelab.core.causes import Chain, explained_by, explains
from tracelab.core.findings import INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import LR_PREFIX, TRAIN, UPDATE, WEIGHT, Needs

PRIMARY = {"oscillation", "lr_rise", "spikes", "updates", "rose"}


def _lr_symptom(cause: Finding, effect: Finding) -> bool:
    if effect.rule == "update-ratio":
        return causes.update_side(effect) == "high"
    if effect.rule == "dead-units":
        return _died(effect)
    return not causes.input_borne(effect)


def _died(f: Finding) -> bool:
    """A dead-units finding whose units died during the run: most were alive at its first
    recording (units dead from the start are the initialization's, not the steps')."""
    first, level = f.evidence.get("dead_frac_first"), f.evidence.get("dead_frac")
    if not isinstance(first, (int, float)) or not isinstance(level, (int, float)):
        return True
    return first < level / 2


def _stuck(f: Finding) -> bool:
    """A target-problems finding that the train loss settled at the level of the best
    prediction that ignores the input (not a memorized train split, not a label range)."""
    return f.rule == "target-problems" and f.severity != INFO \
        and f.evidence.get("cause") == "targets_unaligned" \
        and "late_loss_to_constant" in f.evidence


def _named_stuck(cause: Finding, effect: Finding) -> bool:
    """For `explains`: the finding read this constant-prediction level as a vote."""
    return _stuck(effect) and "constant" in (cause.evidence.get("votes") or ())


def _flat_loss_cause(cause: Finding, effect: Finding) -> bool:
    """For `explained_by`: a stated cause that keeps the loss from falling by itself (gradients
    that vanish, noisy or frozen normalization statistics, decay that pins the weights, units
    dead from the start) explains a finding that the loss's own facts do not set apart: no
    jump right after the LR rose, no NaN/Inf, no loss that grew."""
    if cause.severity == INFO:
        return False
    if cause.rule == "dead-units" and (_died(cause) or effect.evidence.get("burst_before_death")):
        return False  # units that died after a step that rewrote their weights: the steps'
    votes = effect.evidence.get("votes") or ()
    return not ({"lr_rise", "nonfinite"} & set(votes) or effect.evidence.get("loss_grew"))


_BEFORE_DEATH = "before the units it feeds died"  # the `updates` vote read from dead-units

_FLAT = "keeps the loss from falling whatever the learning rate, and its symptoms are the same"


@rule(name="learning-rate-too-high", code="TL208", plot=Plot.LEARNING_RATE,
      reads=("loss-oscillation", "loss-spike", "update-ratio", "dead-units",
             "exploding-gradients", "nonfinite-values", "collapsed-outputs", "loss-plateau",
             "target-problems"),
      links=(explains("loss-oscillation", "loss-spike", "update-ratio", "dead-units",
                      "exploding-gradients", "nonfinite-values", "collapsed-outputs",
                      "saturated-activations", "frozen-parameters", *OUTCOME,
                      why="too large steps make the loss swing and spike, and kill units",
                      timing="overlap", when=_lr_symptom),
             # A model thrown by its first steps to the prediction that ignores the input,
             # where it stays: the targets are not to blame where this finding names it.
             explains("target-problems", why="steps that rewrite the weights leave the model "
                      "at the prediction that ignores the input", timing="overlap",
                      when=_named_stuck),
             # What else leaves the loss high, named from its own recorded facts: its finding
             # ranks first, this one under it.
             explained_by("vanishing-gradients", why="gradients that vanish " + _FLAT,
                          timing="overlap", when=_flat_loss_cause),
             explained_by("batchnorm-small-batch", why="BatchNorm over a few samples " + _FLAT,
                          timing="overlap", when=_flat_loss_cause),
             explained_by("train-in-eval-mode", why="training in eval mode " + _FLAT,
                          timing="overlap", when=_flat_loss_cause),
             explained_by("weight-decay-too-high", why="decay that holds the weights near zero "
                          + _FLAT, timing="overlap", when=_flat_loss_cause),
             explained_by("dead-units", why="units dead from the start " + _FLAT,
                          timing="overlap", when=_flat_loss_cause)),
      presumes=(LR_MOVES_THE_MODEL,))
def learning_rate_too_high(run: Run, chains: Sequence[Chain], *, far_above: float = 100.0,
                           early: int = 10, fell: float = 4.0, alpha: float = 1e-3,
                           jump: float = 100.0, worse: float = 2.0) -> list[Finding]:
    seen: list[Finding] = []
    for chain in chains:
        if _symptom(chain.root):
            seen += [chain.root] + [f for f in chain.explains if _symptom(f)]
    rose = _rose(run, worse)
    if rose is not None and rose[2] < worse * _rows_spread(run, rose[1]):
        rose = None  # a loss summed over more rows than the first step's, not a worse model
    if rose is not None and rose[2] < jump and rose[2] < _loss_tail(run):
        rose = None  # within how far the loss's own steps reach above their recent level
    lost = _objective_lost(run)
    if not seen and rose is None and lost is None:
        return []
    course = _loss_course(run)
    if _fell_steadily(course, fell) or objective_improved(run, alpha):
        return []
    votes = _votes(run, seen, far_above, early, rose, jump, lost)
    if len(votes) < 2 or not PRIMARY & set(votes):
        return []
    basis = [text for text, _ in votes.values()]
    weight = sum(w for _, w in votes.values())
    confidence = min(0.95, 0.35 + 0.15 * weight)
    spans = [f.steps for f in seen if f.steps] + ([rose[:2]] if rose else []) \
        or [tuple(run.step_range or (0, 0))]
    steps = (min(s[0] for s in spans), max(s[1] for s in spans))
    peak = _lr_peak(run)
    where = f" (it peaks at {fmt(peak[1])} in '{peak[0]}')" if peak else ""
    # A warning at least: the rule fires only on a vote about the optimization itself, which
    # its symptom findings' own severities do not weigh (units that died, judged benign because
    # the live ones still carry the signal, leave a loss the step kept far above its twin's).
    severity = min([f.severity for f in seen] + [WARNING], key=lambda s: s.rank)
    claim = f"The learning rate is too high{where}: "
    if without_optimizer(run):
        claim = ("The steps are too large (the run recorded no optimizer object, so its "
                 "learning rate was not judged): ")
    return [learning_rate_too_high.finding(
        severity, "learning rate", steps, claim + "; ".join(basis) + ".",
        {"basis": basis, "confidence": confidence, "votes": sorted(votes),
         "symptoms": [f.id for f in seen], "lr_peak": peak[1] if peak else None,
         "burst_before_death": _BEFORE_DEATH in votes.get("updates", ("",))[0],
         "update_ratio": _fastest(run, early)[1] if Needs.UPDATES in run.available else None,
         "loss_start": course.get("start"), "loss_end": course.get("end"),
         "loss_best": course.get("best"), "loss_grew": course.get("grew", False),
         LR_KNOWN: lr_known(run)},
        _fix(run, seen, early))]


def fmt(value) -> str:
    """A number from a finding's evidence; "?" where the rule left it out."""
    return _fmt(value) if isinstance(value, (int, float)) else "?"


def _symptom(f: Finding) -> bool:
    if f.rule == "target-problems":
        return _stuck(f)
    return _lr_symptom(f, f)


def _loss_course(run: Run) -> dict[str, float]:
    """The training loss's start: where it started (`initial`), or the loss of the best
    prediction that ignores the input (`constant_loss`) when lower, as a loss that only
    learned the targets' mean has learned nothing of the input; its end (median of its last
    tenth) and best (the lowest median of a window that long). {} where the loss is missing
    or too short."""
    try:
        loss = run.loss().to_numpy(dtype=float, na_value=np.nan)
        grew = loss_grew(run)
    except (KeyError, ValueError, TypeError):
        return {}
    n = edge_len(len(loss), lo=5, hi=100)
    if n < 5 or len(loss) < 2 * n or not np.isfinite(loss[:5]).all():
        return {}
    windows = np.lib.stride_tricks.sliding_window_view(loss, n)
    with np.errstate(invalid="ignore"):
        medians = np.median(windows, axis=1)
    medians = medians[np.isfinite(medians)]
    start = initial(loss)
    try:
        constant = constant_loss(run)
    except (KeyError, ValueError, TypeError, IndexError):
        constant = None
    if isinstance(constant, (int, float)) and np.isfinite(constant) and constant > 0:
        start = min(start, float(constant))
    return {"start": start, "end": float(np.median(loss[-n:])),
            "best": float(medians.min()) if medians.size else float("nan"),
            "finite": bool(np.isfinite(loss[-n:]).all()), "grew": grew}


def _fell_steadily(course: dict[str, float], fell: float) -> bool:
    """Whether the loss shows no sign of a too-high learning rate: it ends finite and `fell`
    times or more below its start (for a mean squared error under the best constant
    prediction's, three quarters of the targets' variance explained). A learning rate too
    high keeps the loss from falling, makes it rise, turn NaN/Inf or swing around a level far
    above its best; a loss that ends fourfold below its start, and within twice its best, did
    none of these, whatever the size of the gradients (which scales
    with the loss's) or of the updates (which Adam-type optimizers set near the learning rate
    per element, whatever the gradients: their ratio to the weights is the LR over the
    weights' scale)."""
    start, end, best = course.get("start"), course.get("end"), course.get("best")
    if not course.get("finite") or start is None or end is None:
        return False
    if best is not None and best > 0 and end > 2 * best:
        return False  # it fell, then gave back more than half: a late divergence is judged
    return start > 0 and end >= 0 and start >= fell * end  # a factor means nothing across 0


def _rose(run: Run, jump: float) -> Optional[tuple[int, int, float, str]]:
    """The training loss's rise under the first updates: (first step, last step, factor, how)
    where the median of its finite values over the first tenth of the run after its first
    value (up to its first NaN/Inf) is `jump` times that first value or more, with two such
    values at least (not one outlier batch; how: "median"), or where each of the first two
    values after it is (how: "each", the factor their lower one); None otherwise, where the loss is missing or its first value
    is not finite and positive (a factor means nothing across 0). The first recorded loss is
    the model's before any update: steps that leave it orders of magnitude higher overshot,
    and a step too large diverges so, geometrically, until it turns NaN/Inf."""
    try:
        series = run.loss()
        loss = series.to_numpy(dtype=float, na_value=np.nan)
        steps = np.asarray(series.index, dtype=float)
    except (KeyError, ValueError, TypeError):
        return None
    if len(loss) < 3 or not np.isfinite(loss[0]) or loss[0] <= 0:
        return None
    window = loss[1:1 + edge_len(len(loss), lo=5, hi=100)]
    bad = np.flatnonzero(~np.isfinite(window))
    window = window[:bad[0]] if bad.size else window
    if window.size < 2:
        return None
    factor = float(np.median(window)) / float(loss[0])
    if factor >= jump:
        return int(steps[1]), int(steps[window.size]), factor, "median"
    # The first two updates each leaving the loss that much above the untrained model's: an
    # overshoot that an Adam-type optimizer's growing second moment damps within a few steps,
    # which the median over the first tenth hides. Never the primary `rose` (see _votes).
    first = float(np.min(window[:2])) / float(loss[0])
    if first >= jump:
        return int(steps[1]), int(steps[2]), first, "each"
    return None


def _loss_tail(run: Run, alpha: float = 0.05) -> float:
    """How far the training loss's median over the next steps (a window of the run's first
    tenth, as `_rose` takes it) lies above one step's loss by chance, from the run's own steps:
    that ratio at every step after the first, its 1 - `alpha` quantile. A loss that jumps
    100-fold from one step to the next by design (a style transfer's image under L-BFGS) lies
    as often below its next steps' level at the first step as at any other, and a rise within
    that spread says nothing of the first updates; a loss that falls or stays level has such
    ratios near 1 or below. 0 where the loss is missing or too short (`worse` alone decides)."""
    try:
        loss = run.loss().to_numpy(dtype=float, na_value=np.nan)
    except (KeyError, ValueError, TypeError):
        return 0.0
    n = edge_len(len(loss), lo=5, hi=100)
    if len(loss) < 2 * n + 2:
        return 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        after = np.median(np.lib.stride_tricks.sliding_window_view(loss[2:], n), axis=1)
        ratios = after / loss[1:1 + len(after)]
    ratios = ratios[np.isfinite(ratios) & (loss[1:1 + len(after)] > 0)]
    return float(np.quantile(ratios, 1 - alpha)) if ratios.size >= n else 0.0


def _rows_spread(run: Run, until: Optional[float] = None) -> float:
    """How many times more rows the largest profiled train batch up to step `until` (the end
    of the rise `_rose` measures; every step where None) held than the first profiled one
    (the input profiles' count, the largest feature's per step), where the loss is not known
    to be a mean (`mean_reduced`) and grows with the rows of its batch (`sums_over_batch`: a
    sum): such a loss grows with the rows it sums (an actor-critic's loss summed over an
    episode that lasts 12 steps at first and 81 later), so a rise under the first updates
    smaller than `worse` times this says nothing of them. 1 where the loss is a mean or does
    not follow its rows (a partial last batch of a mean loss whose reduction was not told),
    the rows are not known, or fewer than two steps up to `until` were profiled."""
    try:
        if mean_reduced(run) or not len(run.inputs) or sums_over_batch(run) is None:
            return 1.0
        rows = run.inputs[run.inputs["split"] == TRAIN]
        count = pd.to_numeric(rows.groupby("step")["count"].max(), errors="coerce")
        if until is not None:
            count = count[np.asarray(count.index, dtype=float) <= float(until)]
        count = count.to_numpy(dtype=float, na_value=np.nan)
    except (KeyError, ValueError, TypeError, AttributeError):
        return 1.0
    count = count[np.isfinite(count) & (count > 0)]
    return float(count.max() / count[0]) if count.size >= 2 else 1.0


def _votes(run: Run, seen: Sequence[Finding], far_above: float, early: int,
           rose: Optional[tuple[int, int, float, str]] = None,
           jump: float = 100.0,
           lost: Optional[tuple[str, str, float, float]] = None) -> dict[str, tuple[str, int]]:
    """kind -> (what it shows, weight). A rise under the first updates of `jump` times or
    more is a divergence in itself (`rose`, primary); a smaller one (`worse`: the first
    updates left the model worse than untrained) has other causes too (gradients that explode
    through an unclipped recurrence), and counts beside a primary vote only. Neither counts in
    a game, nor where the run descends on each batch it steps on again (`descends_per_batch`:
    the loss changes with the batch, a new rollout, not with the steps)."""
    votes: dict[str, tuple[str, int]] = {}
    # A loss whose objective moves with the model (a game's opponent, bootstrapped targets)
    # rises and swings by design: its level casts no vote unless the optimization's own
    # facts (NaN/Inf, updates 100x the usual size) show an overshoot.
    # So does one partly computed by a copy of the model that follows it without gradients
    # (MoCo's momentum key encoder and its queue of negatives, a BYOL target network).
    # Bootstrapped targets' overshoot is read against the optimizer kind's usual step (RMSprop
    # moves an actor's 1e-3-scaled head by 10 lr per weight at first).
    moving = loss_level_uninformative(run) or copy_level_uninformative(run) or \
        targets_level_uninformative(run)
    if rose is not None and not moving and not adversarial_game(run) \
            and not descends_per_batch(run):
        how = rose[3] if len(rose) > 3 else "median"
        kind = "rose" if rose[2] >= jump and how == "median" else "worse"
        votes[kind] = (f"the loss rose {fmt(rose[2])}x above its first value under the "
                       f"first updates ({how} of steps {rose[0]}-{rose[1]})", 1)
    # Several players each move their own parameters on their own losses (a GAN's players,
    # an actor and a critic): its swings and spikes are the game's, not one LR's, unless
    # the loss leaves the range it started in, upward. A jump right after an LR rose still is.
    game = adversarial_game(run) or moving
    spikes = [f for f in seen if f.rule == "loss-spike" and not game]
    for f in seen:
        ev = f.evidence
        if f.rule == "loss-oscillation" and game:
            continue
        if f.rule == "loss-oscillation" and "oscillation" not in votes:
            votes["oscillation"] = (f"the loss keeps swinging between {fmt(ev.get('p10'))} and "
                                    f"{fmt(ev.get('p90'))}", 1)
        elif f.rule == "loss-spike" and causes.stated_cause(f) == "lr_increase":
            votes["lr_rise"] = (f"the loss jumped at step {ev.get('step')} right after the "
                                f"learning rate rose {fmt(ev.get('lr_ratio'))}x", 2)
        elif f.rule == "update-ratio" and "updates" not in votes:
            votes["updates"] = (f"updates reach {fmt(ev.get('worst_ratio'))} of the weights' "
                                f"norm per step, {fmt((ev.get('worst_ratio') or 0) / 1e-3)}x the "
                                "usual 1e-3", 1)
        elif f.rule == "exploding-gradients" and "exploding" not in votes \
                and f.severity != INFO:  # growth its rule found benign (the loss kept falling)
            votes["exploding"] = (f"gradients explode (norm {fmt(ev.get('peak_norm'))} in "
                                  f"'{f.subject}')", 1)
        elif f.rule == "nonfinite-values" and "nonfinite" not in votes \
                and f.evidence.get("source") != "eval loss":  # the evaluation's, not training's
            votes["nonfinite"] = (f"NaN/Inf appear from step {f.steps[0]}", 1)
        elif f.rule == "target-problems" and "constant" not in votes:
            # the model never left the prediction that ignores the input: with large steps (a
            # primary vote), the steps keep it there (Adam's step of lr per element rewrites
            # weights of a smaller scale each step; they grow until it is a small part of them)
            votes["constant"] = (f"the train loss settled at {fmt(ev.get('train_loss_late'))}, "
                                 "the level of the best prediction that ignores the input "
                                 f"({fmt(ev.get('constant_loss'))})", 1)
        elif f.rule == "loss-plateau" and "flat" not in votes \
                and (ev.get("zero_grad_layers") or ev.get("dead_layers")):
            # the loss did not fall, and the units that carry the gradient are dead: with
            # large early steps (a primary vote), the steps killed them
            votes["flat"] = (f"the loss stayed flat ({fmt(ev.get('start_loss'))} at the start, "
                             f"{fmt(ev.get('end_loss'))} at the end) as its units died or its "
                             "weight matrices lost every gradient", 1)
    if lost is not None and not game:
        votes["objective_lost"] = (f"the {lost[0]} {lost[1]} fell from {fmt(lost[2])} at its "
                                   f"first evaluations to {fmt(lost[3])} over the second half "
                                   "of the run", 1)
        if "constant" in votes:
            # one fact, seen twice: a model at the prediction that ignores the input (labels
            # that carry no signal) also scores worse than its first evaluations' luck
            votes["constant"] = (votes["constant"][0] + "; " + votes.pop("objective_lost")[0],
                                 1)
    episodes = max((int(f.evidence.get("spikes_total", 1)) for f in spikes), default=0)
    if episodes >= 2 and "lr_rise" not in votes:
        votes["spikes"] = (f"the loss spiked {episodes} times, first at step "
                           f"{min(f.steps[0] for f in spikes)}", 1)
    if "updates" not in votes and Needs.UPDATES in run.available:
        name, ratio, when = _fastest(run, early)
        if ratio is not None and ratio >= far_above * causes.HEALTHY_UPDATE_RATIO:
            votes["updates"] = (f"the fastest layer '{name}' changes by {fmt(ratio)} of its "
                                f"norm per step ({when}), {fmt(ratio / 1e-3)}x the usual 1e-3",
                                1)
    dead = [f for f in seen if f.rule == "dead-units" and _died(f)]
    burst = _burst_before_death(dead)
    if "updates" not in votes and burst is not None \
            and burst[0] >= far_above * causes.HEALTHY_UPDATE_RATIO:
        ratio, weight, step, onset = burst
        votes["updates"] = (f"'{weight}' changed by {fmt(ratio)} of its norm in one step (step "
                            f"{step}), {fmt(ratio / 1e-3)}x the usual 1e-3, {_BEFORE_DEATH} "
                            f"(from step {onset})", 1)
    if dead:
        d = max(dead, key=lambda f: f.evidence.get("dead_frac") or 0)
        first_spike = min((f.steps[0] for f in spikes), default=None)
        after = (f" after the spike at step {first_spike}"
                 if first_spike is not None and d.steps[0] >= first_spike else "")
        votes["dead"] = (f"{fmt(100 * (d.evidence.get('dead_frac') or 0))}% of the units of "
                         f"'{d.subject}' died{after} (from step {d.steps[0]})", 1)
    return votes


def _burst_before_death(dead: Sequence[Finding]) -> Optional[tuple[float, str, int, int]]:
    """The largest update, as a share of its weight's norm, that the weights around units
    which died took up to the onset of their death (dead-units' `update_ratio_before_onset`,
    per subject of a merged finding): (ratio, weight, step, onset). Only from a death that
    costs the model (a warning or an error: the loss does no better than the best constant
    prediction, or every unit died); where the live units carry the signal (information),
    a tiny network's large first steps say nothing. Units die after the step that rewrites
    their layer's weights and stop updating from then on, so a median over the run (as
    `_fastest` reads it) hides that step: the order in time is the fact. None where no such
    finding holds one. A step counts only at `BURST_OVER_MEDIAN` times the median of the same
    weight's ratios up to the death or more: Adam moves each weight by about lr per step, so a
    layer initialized small shows a large ratio at every step, with no burst among them."""
    best = None
    for f in dead:
        if f.severity == INFO:
            continue
        per = f.evidence.get("per_subject")
        for ev in (list(per.values()) if isinstance(per, dict) else []) + [f.evidence]:
            ratio = ev.get("update_ratio_before_onset") if isinstance(ev, dict) else None
            usual = ev.get("update_ratio_median_before_onset") if isinstance(ev, dict) else None
            steps = (ev.get("update_ratio_step"), ev.get("onset_step")) \
                if isinstance(ev, dict) else ()
            if isinstance(ratio, (int, float)) and np.isfinite(ratio) \
                    and isinstance(usual, (int, float)) and np.isfinite(usual) \
                    and ratio >= BURST_OVER_MEDIAN * usual \
                    and all(isinstance(s, (int, np.integer)) for s in steps) \
                    and (best is None or ratio > best[0]):
                best = (float(ratio), str(ev.get("update_ratio_weight")), int(steps[0]),
                        int(steps[1]))
    return best


def _objective_lost(run: Run, min_points: int = 8, factor: float = 1.2,
                    alpha: float = 0.05) -> Optional[tuple[str, str, float, float]]:
    """An evaluation split's logged metric whose name gives its direction (`run_direction`:
    an accuracy, a reward, an error), at `min_points` evaluations or more, positive, whose
    last half (its median) is worse than every value of its first quarter (two at least) by
    `factor` or more (a score falls to 1/factor of it, an error grows `factor` times) and
    whose last half is worse than that quarter by a one-sided Mann-Whitney test at `alpha`
    (a score at chance that moved once by a point is no fall), and, for a score, whose first
    quarter's worst value lies above the largest class's share (`_chance`: at or under it the
    model never beat the prediction that ignores the input): (split, name, the first
    quarter's worst value, the last half's median). Training left the model worse at what it
    is measured on than after its first steps; the steps threw it away from what they had
    found. None where no such metric was logged or the facts are malformed."""
    sc = run.scalars
    if not len(sc) or not {"split", "name"} <= set(sc.columns):
        return None
    try:
        for split, name in sc[["split", "name"]].drop_duplicates().itertuples(index=False):
            if str(split) == TRAIN:
                continue
            sign = run_direction(run, str(split), str(name))
            values = run.scalar(str(name), str(split)).to_numpy(dtype=float, na_value=np.nan)
            values = values[np.isfinite(values)]
            if not sign or len(values) < min_points:
                continue
            first, late = values[:len(values) // 4], values[len(values) // 2:]
            if len(first) < 2 or values.min() <= 0:
                continue  # a factor means nothing across 0
            worst, level = (first.min(), np.median(late)) if sign > 0 else \
                (first.max(), np.median(late))
            if sign * worst < sign * factor ** sign * level:
                continue
            if sign > 0 and worst <= _chance(run, str(split)) * (100 if values.max() > 1 else 1):
                continue  # a score never above what the largest class alone scores: luck
            p = mannwhitneyu(sign * late, sign * first, alternative="less").pvalue
            if float(p) < alpha:
                return str(split), str(name), float(worst), float(level)
    except (KeyError, ValueError, TypeError):
        return None
    return None


def _chance(run: Run, split: str) -> float:
    """The largest class's share of the split's recorded targets (the train split's where
    the split's own are not recorded): what a prediction that ignores the input scores at
    most in accuracy. 0 where the classes are not recorded."""
    try:
        shares = class_shares(run, split)
        shares = class_shares(run, TRAIN) if shares is None else shares
        return float(np.max(shares)) if shares is not None and len(shares) else 0.0
    except (KeyError, ValueError, TypeError, AttributeError):
        return 0.0


def _fastest(run: Run, early: int) -> tuple[Optional[str], Optional[float], str]:
    """The fastest layer's median update ratio per optimizer step over the run, or over its
    first steps when larger: units that die or weights that blow up stop the updates later
    on. A recorded update that spans several optimizer steps (an inner loop) is divided by
    their count (`per_update`, as update-ratio reads it): a lower bound of one step's size."""
    upd, w = run.stat(UPDATE, "norm"), run.stat(WEIGHT, "norm")
    names = matrix_params(run, [n for n in upd.columns if n in w.columns])
    if not names or upd.empty:
        return None, None, "median"
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = (upd[names] / w[names].reindex(upd.index)).replace([np.inf, -np.inf], np.nan)
    ratio = per_update(run, ratio)
    whole = ratio.median().dropna()
    name, top = (str(whole.idxmax()), float(whole.max())) if len(whole) else (None, None)
    if len(upd) < 2 * early:
        return name, top, "median"
    first = ratio.iloc[:early].median().dropna()
    if len(first) and (top is None or first.max() > top):
        return str(first.idxmax()), float(first.max()), f"median of the first {early} steps"
    return name, top, "median"


def _lr_peak(run: Run) -> Optional[tuple[str, float]]:
    sc = run.scalars
    names = [str(n) for n in sc.loc[sc["split"] == TRAIN, "name"].unique()
             if str(n).startswith(LR_PREFIX)]
    best = None
    for name in names:
        values = run.scalar(name).to_numpy(dtype=float)
        values = values[np.isfinite(values)]
        if values.size and (best is None or values.max() > best[1]):
            best = (name, float(values.max()))
    return best


def _fix(run: Run, seen: Sequence[Finding], early: int) -> str:
    if without_optimizer(run):
        return NO_OPTIMIZER_FIX
    rise = [f for f in seen if f.rule == "loss-spike" and causes.stated_cause(f) == "lr_increase"]
    if rise:
        return (f"Check the learning-rate schedule at step {rise[0].evidence.get('step')}: it "
                f"rose {fmt(rise[0].evidence.get('lr_ratio'))}x there (a restart, warm-up "
                "applied twice, a wrong step unit); keep the LR where the loss was falling.")
    ratio = _fastest(run, early)[1] if Needs.UPDATES in run.available else None
    if ratio is None or ratio < 30e-3:
        factor = "3-10x"
    else:  # toward 3e-3, the top of the healthy range, in round steps
        steps = (3, 10, 30, 100, 300, 1000)
        n = min(steps, key=lambda s: abs(np.log(s) - np.log(ratio / 3e-3)))
        peak = _lr_peak(run)
        factor = f"about {n}x" + (f" (to about {fmt(peak[1] / n)})" if peak else "")
    return (f"Lower the learning rate {factor}, until updates are near 1e-3 of the weights, "
            "and warm it up over the first steps; clip gradients (max_norm about 1) meanwhile.")
