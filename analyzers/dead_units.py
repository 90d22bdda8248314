"""dead-units: a large share of a ReLU layer's units output zero for every input.

What it detects
    For each ReLU or ReLU6 module, the share of its units (channels of conv outputs, features
    otherwise) whose output is <= 0 for every sample of the batch (`dead_frac`). A layer is
    flagged when that share is `min_dead` or more on every one of its last third of recorded
    steps (at least `min_recordings`): the units counted dead on the recording with the fewest
    are the most that can have been silent for every sample of every recorded batch.
    A layer whose units are all dead on every recording (`error_dead` or more) is an error:
    nothing after it depends on the input. A partly dead layer is a warning only while the
    train loss, averaged over those steps, does no better than the best constant prediction
    (the targets' variance for MSELoss, the entropy of the class shares for cross-entropy, of
    the positive rate for BCE); where it does better, the live units carry the signal and the
    finding is info.
    From the gradients: where no ReLU module's activations were recorded (a hand-written
    `relu`, `F.relu`, a run recorded without activations), a weight matrix that requires grad
    and whose recorded gradient is exactly zero (a gradient, not None) on every one of its last
    third of recordings, while other parameters' gradients are non-zero at those steps, is
    named an error: the loss has gradient, and none of it flows through that layer, which is
    what a ReLU layer whose every unit is dead does to the weights before it (and to the
    weights after it, whose inputs are all zero). Parameters whose gradient is None (unused,
    detached) are left to frozen-parameters; a run whose every gradient is zero is not judged
    (the gradients were reset before they were recorded, or nothing depends on the weights). A
    mask that zeroes a whole layer's output reads the same, and the message says so.
    A sub-layer of a module -- a weight and its bias -- whose gradient is zero while the
    module's other parameters get gradients is not counted: dead units before a layer leave
    its bias a gradient, so this is a part of a fused module's output left unread (the last
    layer's forward direction of a bidirectional GRU whose code reads only `hidden[-1]`); nor
    is a bias whose weight gets gradients (it cancels, as a Siamese network's output bias in
    `out2 - out1`). The classifier is frozen-parameters' too (_unread).
    Each finding holds, as evidence for the rules that name a cause, what the optimizer did to
    the weights around the dead units up to the onset of their death (the first recording that
    shows it): the largest ratio of a recorded update to its weight's norm, per optimizer step,
    of the Linear or convolution before the ReLU (of the weights that lost their gradient, read
    from the gradients), with its step (`update_ratio_before_onset`) and the median of the
    same weight's ratios up to then (`update_ratio_median_before_onset`). A step far above the
    usual 1e-3, and `BURST_OVER_MEDIAN` times the layer's median or more, just before the
    units died says the step size killed them (learning-rate-too-high reads it); units that
    die after ordinary updates (a negative bias, a bad initialization, a layer initialized
    so small that Adam's steps are large for its norm from the start) are this rule's own
    diagnosis.

Why it matters
    A dead ReLU unit passes no gradient, so it never recovers: the layer's capacity is lost for
    the rest of training. Too high a learning rate, or a large negative bias, kills units in
    bulk early in training.

Example
    `features.relu2` has 88% or more of its 64 channels dead on each of its last 10 recordings,
    against 3% at the first recorded step, and the loss stays at the constant prediction's.

How to fix
    Lower the learning rate (or warm it up), use LeakyReLU/GELU, check the bias initialization,
    and put BatchNorm before the activation.

False positives
    A unit that fires for few inputs is silent for a whole small batch by chance, so one
    batch's share overstates the dead ones: a unit silent on some recordings and firing on
    others is alive, hence the least share over the window, not its median. A small tabular MLP
    (a last hidden layer of 4 units, batches of 8) often keeps a few units silent while its
    loss falls far below the constant prediction's: ordinary sparsity, reported as info only.
    The constant-prediction level is read from recorded facts (`Recorder(loss_fn=...)` with a
    mean reduction, and `step(targets=...)`); a summed loss, an L1 loss or a run without those
    facts is not judged against it: there a partly dead layer is info when a logged metric
    whose name gives its direction (a reward, an accuracy: loss-against-objective's
    `direction`) kept improving over the run into its second half (learning-rate-too-high's
    test, one-sided Mann-Whitney p < `alpha`), or the train loss was still falling in the last
    quarter of the run (below its first and second quarters at p < `alpha`: a VAE's summed
    loss, whose first convolution on non-negative images keeps the channels with negative
    weights silent), since units that carry no signal cannot make the objective improve, and a warning otherwise (a DQN's hand-written TD loss regresses on
    targets that grow as its policy improves: no constant level exists). A loss divided
    for gradient accumulation reads lower, never higher, than that level. Label smoothing
    raises the constant prediction's cross-entropy and is taken into account. LeakyReLU, GELU
    and other activations that pass negative values are not judged. Functional `F.relu` calls
    are not modules and are not seen by the activations: then only the gradients speak.
    Recurrent modules (RNN/LSTM/GRU) return every layer's and direction's last hidden state
    from one autograd node, so the weights behind the ones the code does not read get zero
    gradients, not None: those are unused, not dead (their tanh and sigmoid gates never give
    an exact zero), and are left to frozen-parameters.
"""
from __future__ import annotations

import numpy as np
from scipy.stats import mannwhitneyu

from tracelab.analyzers._learning_rate import lower_lr_fix
from tracelab.analyzers._dynamics import OUTCOME, finite_stat, fmt, layer_of, matrix_params, \
    name_list, subject_of, tail
from tracelab.analyzers._loss_contracts import constant_loss
from tracelab.analyzers._objectives import objective_improved
from tracelab.analyzers._slow_updates import per_update
from tracelab.analyzers._unread import unread_parameters
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import ACTIVATION, GRAD, UPDATE, WEIGHT, Needs

RELU_TYPES = ("ReLU", "ReLU6")

# A step counts as a burst that rewrote its layer's weights at this many times the median of
# the same layer's update ratios over its recordings up to the death, or more.
BURST_OVER_MEDIAN = 10.0


@rule(name="dead-units", code="TL203", requires=(Needs.MODEL,), merge="layer",
      plot=Plot.DEAD_FRACTION,
      links=(explains("collapsed-outputs", why="dead units leave the outputs nothing to vary",
                      place="downstream"),
             explains("vanishing-gradients", "frozen-parameters",
                      why="dead ReLUs pass no gradient to the layers before them",
                      timing="overlap", place="upstream"),
             explains("frozen-parameters", why="no gradient flows through dead units, so the "
                      "weights around them never change", timing="overlap", place="same"),
             explains(*OUTCOME, why="a network with dead units stops learning", timing="overlap")))
def dead_units(run: Run, *, min_dead: float = 0.5, error_dead: float = 0.95,
               window: float = 1 / 3, min_recordings: int = 3, alpha: float = 1e-3
               ) -> list[Finding]:
    types = run.module_types()
    dead = finite_stat(run, ACTIVATION, "dead_frac")
    modules = [m for m in dead.columns if types.get(m) in RELU_TYPES]
    baseline = constant_loss(run)
    if not modules:
        return _from_gradients(run, window, min_recordings, baseline)
    improved = baseline is None and (objective_improved(run, alpha)
                                     or _loss_kept_falling(run, alpha))
    findings = []
    for module in modules:
        series = dead[module].dropna()
        if len(series) < min_recordings:
            continue
        recent = tail(series, window, minimum=min_recordings)
        level = float(recent.min())
        if level < min_dead:
            continue
        span = (int(recent.index[0]), int(series.index[-1]))
        loss = _mean_loss(run, span)
        learns = (baseline is not None and loss is not None and loss < baseline) or (
            baseline is None and improved)
        severity = ERROR if level >= error_dead else INFO if learns else WARNING
        first = float(series.iloc[0])
        onset = series[series >= min_dead]
        since = int(onset.index[0]) if len(onset) else span[0]
        findings.append(dead_units.finding(
            severity, module, (since, span[1]),
            f"{_share(level)} of the units of '{module}' ({types[module]}) are dead on each "
            f"of its last {len(recent)} recordings, against {fmt(100 * first)}% at step "
            f"{int(series.index[0])}; {_verdict(severity, level, loss, baseline, improved)}.",
            {"dead_frac": level, "dead_frac_median": float(recent.median()),
             "dead_frac_first": first, "dead_frac_max": float(series.max()),
             "recordings": len(recent), "loss_mean": loss, "constant_loss": baseline,
             "objective_improved": improved,
             **_updates_before(run, _feeding(run, module), since)},
            lower_lr_fix(run, "Lower or warm up the learning rate, switch to LeakyReLU/GELU, "
                         "or add BatchNorm before this activation.")))
    return findings


def _from_gradients(run: Run, window: float, min_recordings: int,
                    baseline: float | None) -> list[Finding]:
    """One finding naming the trainable parameters whose gradient is exactly zero on each of
    their recent recordings while others' are not, when a weight matrix is among them: an
    error when that is every weight matrix, or while the loss does no better than the best
    constant prediction; information where it does and they never had a gradient (a module
    left unused, a head weighted by 0); a warning otherwise."""
    info = run.parameters()
    grads = finite_stat(run, GRAD, "norm")
    unread = unread_parameters(run)  # a fused module's unread layer: no unit there is dead
    trainable = [n for n in grads.columns if info.get(n, {}).get("requires_grad") is True
                 and n not in unread]
    zero, since, recent_steps, died = [], [], set(), False
    for name in trainable:
        series = grads[name].dropna()
        if len(series) < min_recordings:
            continue
        recent = tail(series, window, minimum=min_recordings)
        if (recent == 0).all():
            zero.append(name)
            moved = series[series != 0]
            died = died or len(moved) > 0
            since.append(int(series.index[series.index > moved.index[-1]][0]) if len(moved)
                         else int(series.index[0]))
            recent_steps.update(int(s) for s in recent.index)
    if not zero or not matrix_params(run, zero):
        return []
    live = [n for n in trainable if n not in zero]
    steps = sorted(recent_steps)
    elsewhere = grads.loc[grads.index.isin(steps), live].to_numpy(dtype=float) if live else None
    if elsewhere is None or not np.nanmax(elsewhere, initial=0.0) > 0:
        return []
    peak = float(np.nanmax(elsewhere))
    modules = list(dict.fromkeys(layer_of(n) for n in zero))
    span = (min(since), int(grads.index[-1]))
    one = len(zero) == 1
    loss = _mean_loss(run, span)
    known = baseline is not None and loss is not None
    # Every weight matrix without a gradient: the output is a constant the biases learn.
    constant = set(matrix_params(run, trainable)) <= set(zero)
    severity = (ERROR if constant or (known and loss >= baseline) else
                INFO if known and not died else WARNING)
    return [dead_units.finding(
        severity, subject_of(modules), span,
        f"The {'gradient' if one else 'gradients'} of {name_list(zero)} "
        f"{'is' if one else 'are'} exactly zero on each of {'its' if one else 'their'} "
        f"recordings from step {span[0]} to {span[1]}, while {len(live)} other "
        f"{'parameter gets' if len(live) == 1 else 'parameters get'} gradients (largest "
        f"norm {fmt(peak)}): no gradient flows through "
        f"{'it' if one else 'them'}, as when every unit of the ReLU layer they feed or read "
        "is dead (or a mask zeroes the layer's output); no ReLU module's activations were "
        "recorded to show it.",
        {"parameters": len(zero), "subjects": modules, "zero_grad_parameters": zero,
         "recordings": len(steps), "grad_norm_max_elsewhere": peak, "source": "gradients",
         "had_gradients": died, "loss_mean": loss, "constant_loss": baseline,
         **_updates_before(run, matrix_params(run, zero), span[0])},
        lower_lr_fix(run, "Check the bias initialization of the layer before the ReLU (a "
                     "negative bias kills every unit), lower or warm up the learning rate, or "
                     "use LeakyReLU/GELU."))]


def _feeding(run: Run, module: str) -> list[str]:
    """The weight matrices of the nearest module before `module` in the model's order that
    holds any: the layer whose outputs the ReLU reads, whose weights and bias decide which of
    its units fire. [] where there is none or the model's order is not recorded."""
    try:
        order = list(run.module_types())
        if module not in order:
            return []
        held = matrix_params(run, list(run.parameters()))
    except (KeyError, TypeError, ValueError, AttributeError):  # a malformed model summary
        return []
    for before in reversed(order[:order.index(module)]):
        weights = [n for n in held if layer_of(n) == before]
        if weights:
            return weights
    return []


def _updates_before(run: Run, weights: list[str], onset: int) -> dict:
    """What the optimizer did to the weights around the dead units up to the onset of their
    death (the first recording that shows it), as evidence for the rules that name a cause:
    the largest ratio of a recorded update to its weight's norm at a recording no later than
    `onset` (per optimizer step where a recorded update spans several: `per_update`, a lower
    bound), its weight, its step and the median of that weight's ratios over the same
    recordings (the weight whose peak is `BURST_OVER_MEDIAN` times its median or more, where
    one is). A step that rewrites a layer's weights (far above the usual 1e-3 of their norm,
    and far above the layer's other steps) moves its units' pre-activations by as much as
    they vary and can push them below zero for every input: the death then follows the step
    size. Ratios that are large at every step (Adam moves each weight by about lr per step,
    so a layer initialized small shows a large ratio from step 0 on, falling smoothly as it
    grows) are no burst. {} where updates or weights were not recorded, or the facts are
    malformed."""
    if not weights or Needs.UPDATES not in run.available or Needs.WEIGHTS not in run.available:
        return {}
    try:
        upd, w = run.stat(UPDATE, "norm"), run.stat(WEIGHT, "norm")
        names = [n for n in weights if n in upd.columns and n in w.columns]
        if not names:
            return {}
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = (upd[names] / w[names].reindex(upd.index)).replace([np.inf, -np.inf],
                                                                        np.nan)
        ratio = per_update(run, ratio)
        ratio = ratio[np.asarray(ratio.index, dtype=float) <= onset].astype(float)
        peaks, usual = ratio.max().dropna(), ratio.median()
        if peaks.empty:
            return {}
        # A burst stands out of its own layer's steps; a layer whose steps are all large for
        # its norm (Adam moves each weight by about lr per step: a small init) holds none.
        bursts = peaks[peaks >= BURST_OVER_MEDIAN * usual.reindex(peaks.index)]
        name = str((bursts if not bursts.empty else peaks).idxmax())
        return {"update_ratio_before_onset": float(peaks[name]), "update_ratio_weight": name,
                "update_ratio_step": int(ratio[name].idxmax()), "onset_step": int(onset),
                "update_ratio_median_before_onset": float(usual[name])}
    except (KeyError, TypeError, ValueError, AttributeError):
        return {}


def _loss_kept_falling(run: Run, alpha: float, min_points: int = 24) -> bool:
    """Whether the train loss, at `min_points` values or more, was still falling in the last
    quarter of the run: below its second quarter and its first (one-sided Mann-Whitney
    p < `alpha`), its last quarter the lowest. Units that carry no signal cannot make the loss
    keep falling, whatever its scale (a summed loss has no constant-prediction level); a loss
    that rises as its targets grow (a DQN's) is not judged by it."""
    values = run.loss().to_numpy(dtype=float, na_value=np.nan)
    values = values[np.isfinite(values)]
    if len(values) < min_points:
        return False
    quarters = np.array_split(values, 4)
    medians = [float(np.median(q)) for q in quarters]
    if medians[-1] > min(medians):
        return False
    try:
        p = max(float(mannwhitneyu(quarters[-1], q, alternative="less").pvalue)
                for q in quarters[:2])
    except ValueError:
        return False
    return p < alpha


def _mean_loss(run: Run, span: tuple[int, int]) -> float | None:
    loss = run.loss()
    loss = loss[(loss.index >= span[0]) & (loss.index <= span[1])]
    loss = loss[np.isfinite(loss.to_numpy(dtype=float))]
    return float(loss.mean()) if len(loss) else None


def _share(level: float) -> str:
    return "All" if level >= 1 else f"{fmt(100 * level)}% or more"


def _verdict(severity, level: float, loss: float | None, baseline: float | None,
             improved: bool = False) -> str:
    if severity is ERROR:
        return ("nothing after it depends on the input, and no gradient reaches the layers "
                "before it" if level >= 1 else "the few live units left carry all the signal "
                "and the gradient")
    if severity is INFO and improved:
        return ("a logged objective (a reward, an accuracy) or the train loss kept improving "
                "into the last quarter of the run, so the live units carry the signal")
    if baseline is None or loss is None:
        return ("the loss's constant-prediction level was not recorded (pass loss_fn= to the "
                "Recorder and targets= to step()), so the cost of the lost units is not judged")
    if severity is INFO:
        return (f"the train loss averages {fmt(loss)} there, below the {fmt(baseline)} of "
                "the best constant prediction, so the live units carry the signal")
    return (f"the train loss stays at {fmt(loss)} there, no better than the {fmt(baseline)} of "
            "the best constant prediction")
