"""loss-input-contract: the loss read probabilities as logits, or logits as log-probabilities.

What it detects
    The outputs given to `step(outputs=...)` are what the loss read. Their facts on each
    profiled step say what they are: rows that lie in [0, 1] and sum to 1 are probabilities
    (a softmax), rows whose logsumexp is 0 are log-probabilities (a log_softmax), values in
    [0, 1] are a sigmoid's. With `Recorder(loss_fn=...)` the loss's own contract decides:
    - `CrossEntropyLoss` applies log_softmax itself and expects logits. Fed softmax rows of
      C classes, each loss is -p_y + log(sum_j exp(p_j)) >= log(1 + (C - 1) / e), the value
      of a one-hot row: 1.46 for 10 classes where a trained model reaches near 0.
    - `NLLLoss` expects log-probabilities and returns -x_y: fed logits it is unbounded below,
      fed probabilities it lies in [-1, 0]. The rule fires when the rows are not
      log-probabilities and the loss went below 0, which log-probabilities cannot give.
    - `BCEWithLogitsLoss` applies the sigmoid itself; `BCELoss` expects probabilities. A value
      x in [0, 1] read as a logit (a sigmoid before BCEWithLogitsLoss) or probabilities in
      [1/2, sigmoid(1)] (a sigmoid applied twice before BCELoss) give each positive a loss of
      at least ln(1 + 1/e) = 0.313 and each negative at least ln 2 = 0.693.
    Each case needs the facts on at least `min_share` of the profiled steps. A short run with
    fewer than `min_profiles` profiled training steps may count the outputs that its
    evaluation loop gave to `log(outputs=...)` (what the same loss read there); each split
    must then keep the facts on its own, so probabilities logged for a held-out metric never
    speak for logits given to the training loss. Where the mean
    loss went below the bound those facts imply, the outputs given were not what the loss
    read, and the rule stays quiet. Without `loss_fn` the loss is unknown and its name is not
    guessed: the rule fires only on softmax rows whose loss settled at the cross-entropy
    bound (its last tenth within `near_bound` of it, never below it).

Why it matters
    The loss still falls a little, so the run looks like it trains, but the model is pushed
    towards saturated outputs with vanishing gradients, the loss cannot go below its bound,
    and accuracy stalls below what the model can reach. The gradient reaches the logits only
    through the softmax's or sigmoid's slope (at most 1/4), so the updates shrink with it: tiny
    updates (update-ratio) are this diagnosis's symptom, and raising the learning rate would
    not fix them. With NLLLoss on logits the loss is minimized by growing the logits without
    limit.

Example
    On 12 of 12 profiled steps the rows given to CrossEntropyLoss were probabilities (each in
    [0, 1], summing to 1): it applies log_softmax again, so its loss cannot fall below
    ln(1 + 9/e) = 1.46 for 10 classes; its lowest was 1.52.

How to fix
    Give CrossEntropyLoss and BCEWithLogitsLoss the raw scores (remove the final softmax or
    sigmoid from the model, or apply it only for predictions); give NLLLoss
    `log_softmax(logits, dim=1)`; apply a sigmoid once before BCELoss.

False positives
    Checked against CrossEntropyLoss on logits, on log_softmax rows (a log_softmax of
    log-probabilities changes nothing), with label smoothing and class weights, NLLLoss on
    log_softmax rows and BCEWithLogitsLoss on logits. A run that passes as `outputs` a
    different tensor than the loss read is caught by the bound check when the loss is a mean
    (the loss falling below the bound those outputs allow); a summed loss is judged on its
    outputs' facts alone.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import OUTCOME, edge_len, finite, fmt
from tracelab.analyzers._loss_contracts import (BCE, BCE_LOGITS, CROSS_ENTROPY, NLL, loss_fn,
                                                loss_type, mean_reduced, output_facts)
from tracelab.core import causes
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import (OUTPUT_CLASSES, OUTPUT_LOGSUMEXP, OUTPUT_MAX, OUTPUT_MIN,
                                  OUTPUT_ROW_SUM, OUTPUT_UNIT_ROWS, TRAIN, Needs)

POSITIVE_BOUND = math.log1p(math.exp(-1))  # BCE of a logit in [0, 1] against 1: ln(1 + 1/e)
SIGMOID_ONE = 1 / (1 + math.exp(-1))


def _held_out_splits(run: Run) -> list[str]:
    """The splits other than training that recorded the outputs' facts."""
    sg = run.signals
    if not len(sg) or "split" not in sg:
        return []
    return sorted(str(s) for s in sg.loc[sg["name"] == OUTPUT_MIN, "split"].dropna().unique()
                  if s != TRAIN)


def cross_entropy_bound(classes: int) -> float:
    """The least cross-entropy of a row of probabilities read as logits: a one-hot row."""
    return math.log1p((classes - 1) / math.e)


def _squashed_inputs_starve(cause: Finding, effect: Finding) -> bool:
    """For `when`: the loss read bounded rows (probabilities or a sigmoid's values, a floor
    above 0 on its loss) and the effect's updates are small in every layer it judged: the
    gradient reaches the logits only through the squashing function, whose slope is at most
    1/4, and that factor scales the whole backward pass alike, so it explains small updates
    across the model, not one layer's (a first layer saturated by unscaled inputs). Logits
    given to NLLLoss (floor 0, unbounded below) make updates grow, not shrink."""
    bound = cause.evidence.get("bound")
    layers, of = effect.evidence.get("layers"), effect.evidence.get("of_layers")
    return (isinstance(bound, (int, float)) and bound > 0 and causes.low_updates(cause, effect)
            and isinstance(layers, int) and layers > 0 and layers == of)


@rule(name="loss-input-contract", code="TL607", requires=(Needs.OUTPUTS, Needs.LOSS),
      plot=Plot.LOSS,
      links=(explains("loss-below-bound", "vanishing-gradients", "saturated-activations",
                      "loss-oscillation", *OUTCOME,
                      why="a loss fed inputs outside its contract has a floor above its "
                          "minimum (or none at all), and saturated outputs pass back little "
                          "gradient", timing="overlap"),
             explains("update-ratio",
                      why="squashed rows (a softmax or sigmoid) given to a loss that applies "
                          "its own pass back its gradient through the squashing function's "
                          "slope (at most 1/4), so the updates shrink with it",
                      timing="overlap", when=_squashed_inputs_starve)))
def loss_input_contract(run: Run, *, tolerance: float = 1e-3, min_share: float = 0.9,
                        min_profiles: int = 2, near_bound: float = 0.05) -> list[Finding]:
    facts = output_facts(run).dropna(subset=[OUTPUT_MIN, OUTPUT_MAX])
    loss = finite(run.loss())
    if not len(facts) or not len(loss):
        return []
    # Too few profiled training steps (a short run): the outputs given to `log(outputs=...)`
    # on the evaluation splits, what the same loss read there, may corroborate them; every
    # split must then keep the facts on its own (`holds`).
    splits = [facts]
    if len(facts) < min_profiles:
        splits += [found for split in _held_out_splits(run)
                   if len(found := output_facts(run, split).dropna(
                       subset=[OUTPUT_MIN, OUTPUT_MAX]))]
        facts = pd.concat(splits).sort_index(kind="stable")
    if len(facts) < min_profiles:
        return []
    origin = np.concatenate([np.full(len(part), i) for i, part in enumerate(splits)])[
        np.argsort(np.concatenate([part.index.to_numpy() for part in splits]), kind="stable")]
    kind = loss_type(run)
    widest = facts[OUTPUT_CLASSES].max()
    classes = int(widest) if np.isfinite(widest) else 0
    probabilities = ((facts[OUTPUT_UNIT_ROWS] >= 1) & (facts[OUTPUT_ROW_SUM] <= tolerance)
                     ).to_numpy()
    unit_values = ((facts[OUTPUT_MIN] >= 0) & (facts[OUTPUT_MAX] <= 1)).to_numpy()
    # A step whose logsumexp was not read counts as log-probability rows: no evidence against.
    log_probabilities = ~(facts[OUTPUT_LOGSUMEXP] > tolerance).to_numpy()
    lowest = float(loss.min())
    mean = mean_reduced(run)
    steps = facts.index.to_numpy()

    def found(severity, held: np.ndarray, message: str, evidence: dict, fix: str) -> list:
        where = steps[held]
        return [loss_input_contract.finding(
            severity, kind or "loss", (int(where[0]), int(where[-1])),
            f"On {int(held.sum())} of {len(held)} profiled steps {message}",
            {"loss_fn": kind, "profiled_steps": len(held), "violating_steps": int(held.sum()),
             "classes": classes, "lowest_loss": lowest,
             "outputs_min": float(facts[OUTPUT_MIN].min()),
             "outputs_max": float(facts[OUTPUT_MAX].max()), **evidence}, fix)]

    def holds(held: np.ndarray) -> bool:
        return all(bool(held[origin == i].mean() >= min_share) for i in range(len(splits)))

    if (kind in CROSS_ENTROPY or kind is None) and classes >= 2 and holds(probabilities):
        bound = cross_entropy_bound(classes)
        below = lowest < bound - tolerance * max(1.0, bound)
        fix = ("Give CrossEntropyLoss the raw scores: remove the softmax at the end of the "
               "model (apply it only to read predictions), or use NLLLoss on "
               "log_softmax(logits, dim=1).")
        text = (f"the rows given to the loss were probabilities (each in [0, 1], summing to "
                f"1): cross-entropy applies log_softmax again, so its loss cannot fall below "
                f"ln(1 + {classes - 1}/e) = {fmt(bound)} for {classes} classes; its lowest "
                f"was {fmt(lowest)}.")
        if kind is not None and not (mean and below):
            return found(ERROR, probabilities, text, {"bound": bound}, fix)
        values = loss.to_numpy(dtype=float)
        settled = float(np.median(values[-edge_len(len(values)):]))
        if kind is None and not below and settled <= bound * (1 + near_bound):
            return found(WARNING, probabilities, text.replace(
                "cross-entropy", "if the loss is a cross-entropy, it") + (
                f" It settled at {fmt(settled)}."), {"bound": bound, "settled_loss": settled},
                fix)
        return []
    if kind in NLL and lowest < -tolerance and holds(~log_probabilities):
        held = ~log_probabilities
        if holds(probabilities):
            what = ("probabilities (a softmax), not log-probabilities: NLLLoss returns -p of "
                    "the target class, between -1 and 0")
        else:
            what = ("not log-probabilities (their logsumexp is not 0, up to "
                    f"{fmt(float(facts[OUTPUT_LOGSUMEXP].max()))}): NLLLoss returns -x of the "
                    "target class, which has no lower bound, so training grows it without limit")
        return found(ERROR, held, f"the rows given to NLLLoss were {what}; the loss reached "
                     f"{fmt(lowest)}, below the 0 that log-probabilities allow.", {"bound": 0.0},
                     "Give NLLLoss log_softmax(logits, dim=1) (or give the logits to "
                     "CrossEntropyLoss, which applies log_softmax itself).")
    weighted = bool(loss_fn(run).get("pos_weight"))
    if kind in BCE_LOGITS and holds(unit_values):
        if mean and not weighted and lowest < POSITIVE_BOUND - tolerance:
            return []
        return found(ERROR, unit_values, "every value given to BCEWithLogitsLoss lay in [0, 1] "
                     f"(from {fmt(float(facts[OUTPUT_MIN].min()))} to "
                     f"{fmt(float(facts[OUTPUT_MAX].max()))}): a probability read as a logit, "
                     f"so each positive's loss is at least ln(1 + 1/e) = {fmt(POSITIVE_BOUND)} "
                     f"and each negative's at least ln 2; its lowest was {fmt(lowest)}.",
                     {"bound": POSITIVE_BOUND},
                     "Give BCEWithLogitsLoss the raw scores: remove the sigmoid before it (or "
                     "keep the sigmoid and use BCELoss).")
    twice = ((facts[OUTPUT_MIN] >= 0.5) & (facts[OUTPUT_MAX] <= SIGMOID_ONE + tolerance)
             ).to_numpy()
    if kind in BCE and holds(twice):
        if mean and lowest < POSITIVE_BOUND - tolerance:
            return []
        return found(ERROR, twice, "every probability given to BCELoss lay in [1/2, "
                     f"sigmoid(1)] (from {fmt(float(facts[OUTPUT_MIN].min()))} to "
                     f"{fmt(float(facts[OUTPUT_MAX].max()))}): a sigmoid applied twice, so each "
                     f"positive's loss is at least {fmt(POSITIVE_BOUND)} and each negative's at "
                     f"least ln 2; its lowest was {fmt(lowest)}.", {"bound": POSITIVE_BOUND},
                     "Apply the sigmoid once: remove it from the model or from the loss call "
                     "(or give the raw scores to BCEWithLogitsLoss).")
    return []
