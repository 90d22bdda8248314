"""Which finding can explain which: the causal links between rules, as data, in one place.

A link says that a finding of rule `cause` can explain a finding of each rule in `effects`.
It holds between two findings only when the evidence agrees:

- timing: "first" - the cause starts no later than the effect (give or take `SLACK` steps, the
  usual recording cadence), "overlap" - their step ranges meet;
- place: "any", "same" (they share a layer), "downstream" (the effect sits at or after the
  cause's first layer in the model), "upstream" (at or before its last layer), "feature" (they
  share an input feature), "split" (the effect is about the cause's data split);
- when: an optional check on both findings' evidence (a loss spike blamed on its input batch
  is not the learning rate's doing).

No rule refers to another rule in its code: the links live here, and the engine applies them.
`MERGE` names the noun of the subjects a rule's findings are merged under (one finding per
defect), `LR_SYMPTOMS` the findings a too-high learning rate shows through, and `UNSEEN` the
signal whose absence at a finding's step leaves its cause unnamed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from tracelab.core.findings import Finding

SLACK = 10  # steps: signals recorded every few steps see an event a little late

LR_TOO_HIGH = "learning-rate-too-high"
LR_CODE = "TL208"
HEALTHY_UPDATE_RATIO = 1e-3


@dataclass(frozen=True)
class Link:
    cause: str
    effects: tuple[str, ...]
    why: str
    timing: str = "first"
    place: str = "any"
    when: Optional[Callable[[Finding, Finding], bool]] = None


# -- evidence checks ---------------------------------------------------------------------------
def spike_cause(f: Finding) -> str:
    """What loss-spike named as the spike's cause (input_nonfinite, input_outlier,
    lr_increase, grad_spike, unprofiled or unknown)."""
    return str(f.evidence.get("cause", "unknown"))


def input_borne(f: Finding) -> bool:
    """A finding whose own evidence points at the input data."""
    if f.rule == "loss-spike":
        return spike_cause(f).startswith("input")
    if f.rule == "nonfinite-values":
        return f.evidence.get("source") == "input"
    return False


def update_side(f: Finding) -> str:
    ratio = f.evidence.get("worst_ratio")
    return "high" if ratio is not None and ratio > HEALTHY_UPDATE_RATIO else "low"


def _not_input(_: Finding, effect: Finding) -> bool:
    return not input_borne(effect)


def _lr_symptom(cause: Finding, effect: Finding) -> bool:
    if effect.rule == "update-ratio":
        return update_side(effect) == "high"
    return not input_borne(effect)


def _low_updates(_: Finding, effect: Finding) -> bool:
    return effect.rule != "update-ratio" or update_side(effect) == "low"


def _spike_explains(cause: Finding, effect: Finding) -> bool:
    # A spike blamed on its batch, the LR or a batch nobody profiled comes before the gradient
    # burst it causes; a spike blamed on a gradient burst is the burst's effect instead.
    if input_borne(effect):
        return False
    return effect.rule != "exploding-gradients" or spike_cause(cause) != "grad_spike"


def _gradient_first(cause: Finding, effect: Finding) -> bool:
    if effect.rule == "loss-spike":
        return spike_cause(effect) == "grad_spike"
    return not input_borne(effect)


def _from_input(cause: Finding, effect: Finding) -> bool:
    return input_borne(cause) or effect.rule in ("run-aborted", "loss-plateau",
                                                 "metric-stagnation")


def _low_side(cause: Finding, effect: Finding) -> bool:
    return update_side(cause) == "low"


OUTCOME = ("loss-plateau", "metric-stagnation")

LINKS: tuple[Link, ...] = (
    # The data comes first: what arrives broken breaks everything downstream.
    Link("input-collapse", ("train-val-mismatch", "unnormalized-inputs"),
         "a collapsed feature no longer matches its own distribution elsewhere",
         timing="overlap", place="feature"),
    Link("train-val-mismatch", ("overfitting", "metric-stagnation"),
         "validation inputs unlike training ones make validation loss and accuracy diverge",
         timing="overlap", place="split"),
    Link("unnormalized-inputs", ("saturated-activations", "dead-units", "exploding-gradients",
                                 "loss-spike", "loss-oscillation", "nonfinite-values",
                                 "vanishing-gradients", "update-ratio", "frozen-parameters",
                                 "collapsed-outputs") + OUTCOME,
         "inputs far from unit scale saturate or kill units and blow up gradients",
         timing="overlap", when=_not_input),
    Link("nonfinite-values", ("loss-spike", "exploding-gradients", "dead-units",
                              "collapsed-outputs", "run-aborted") + OUTCOME,
         "a NaN/Inf input batch makes activations, loss and gradients non-finite",
         when=_from_input),
    # The training loop: bugs whose symptoms would otherwise read as a too-high learning rate
    # or as a model that stopped learning.
    Link("missing-zero-grad", ("loss-oscillation", "loss-spike", "update-ratio", "dead-units",
                               "exploding-gradients", "nonfinite-values", "collapsed-outputs",
                               "saturated-activations") + OUTCOME,
         "gradients summed over every step so far make each update larger than the last",
         timing="overlap", when=_not_input),
    Link("amp-overflow", ("nonfinite-values", "loss-spike", "exploding-gradients",
                          "update-ratio", "frozen-parameters") + OUTCOME,
         "a loss scale too large for float16 overflows the gradients, and their steps are "
         "skipped", timing="overlap", when=_not_input),
    Link("loss-collapse", ("loss-plateau", "update-ratio", "frozen-parameters",
                           "vanishing-gradients", "metric-stagnation"),
         "a loss already at zero leaves nothing to learn: it stays flat and its gradients "
         "vanish", timing="overlap", when=_low_updates),
    Link("target-problems", ("loss-oscillation", "loss-spike", "exploding-gradients",
                             "update-ratio") + OUTCOME,
         "labels the loss cannot fit keep the loss from settling", timing="overlap",
         when=_not_input),
    # The learning rate, when the evidence names it (see LR_SYMPTOMS).
    Link(LR_TOO_HIGH, ("loss-oscillation", "loss-spike", "update-ratio", "dead-units",
                       "exploding-gradients", "nonfinite-values", "collapsed-outputs",
                       "saturated-activations", "frozen-parameters") + OUTCOME,
         "too large steps make the loss swing and spike, and kill units",
         timing="overlap", when=_lr_symptom),
    Link("loss-spike", ("dead-units", "exploding-gradients", "nonfinite-values",
                        "collapsed-outputs", "frozen-parameters") + OUTCOME,
         "a spike's large gradients kill units and can overflow", when=_spike_explains),
    Link("exploding-gradients", ("nonfinite-values", "loss-spike", "loss-oscillation",
                                 "run-aborted", "dead-units", "saturated-activations")
         + OUTCOME,
         "exploding gradients overflow into NaN/Inf and throw the loss about",
         when=_gradient_first),
    Link("loss-oscillation", OUTCOME, "a loss that keeps swinging never settles lower",
         timing="overlap"),
    # Layers: what happens in one layer shows in the layers it feeds (or that feed it, for
    # gradients, which flow backwards).
    Link("dead-units", ("collapsed-outputs",), "dead units leave the outputs nothing to vary",
         place="downstream"),
    Link("dead-units", ("vanishing-gradients", "frozen-parameters"),
         "dead ReLUs pass no gradient to the layers before them", timing="overlap",
         place="upstream"),
    Link("dead-units", OUTCOME, "a network with dead units stops learning", timing="overlap"),
    Link("saturated-activations", ("vanishing-gradients",),
         "saturated units pass almost no gradient back", timing="overlap", place="upstream"),
    Link("saturated-activations", ("collapsed-outputs",) + OUTCOME,
         "saturated units stop the network from learning", timing="overlap"),
    Link("vanishing-gradients", ("update-ratio", "frozen-parameters"),
         "layers without gradient barely move", timing="overlap", place="downstream",
         when=_low_updates),
    Link("vanishing-gradients", OUTCOME, "layers that get no gradient do not learn",
         timing="overlap"),
    Link("update-ratio", ("frozen-parameters",) + OUTCOME,
         "updates far below 1e-3 of the weights leave the model where it started",
         timing="overlap", when=_low_side),
    Link("frozen-parameters", OUTCOME, "parameters that never change do not learn",
         timing="overlap"),
    Link("collapsed-outputs", OUTCOME, "outputs that no longer vary cannot fit the labels",
         timing="overlap"),
    Link("loss-plateau", ("metric-stagnation",),
         "a loss that does not fall leaves the metrics at chance", timing="overlap"),
)

# Rules whose findings merge into one when they share steps and fix; the noun of a subject.
# (unnormalized-inputs and train-val-mismatch group their features per split themselves.)
MERGE = {"input-collapse": "feature", "dead-units": "layer", "saturated-activations": "layer",
         "frozen-parameters": "module group", "metric-stagnation": "metric",
         "nonfinite-values": "source", "rank-divergence": "rank"}

# What each symptom of a too-high learning rate says, and how much it weighs.
LR_SYMPTOMS = ("loss-oscillation", "loss-spike", "update-ratio", "dead-units",
               "exploding-gradients", "nonfinite-values", "collapsed-outputs")

# rule -> (signal, what to record): the cause-naming evidence a finding needs at its step.
UNSEEN = {
    "loss-spike": ("the input batch", "record every batch's inputs: Recorder(input_every=1)"),
    "nonfinite-values": ("the input batch",
                         "record every batch's inputs: Recorder(input_every=1)"),
}


# -- applying one link -------------------------------------------------------------------------
def names(f: Finding) -> list[str]:
    """A finding's subjects: the merged list when there is one, else its (first) subject."""
    listed = f.evidence.get("subjects")
    if listed:
        return [str(s) for s in listed]
    return [f.subject.split(" (+", 1)[0]]


def _module(name: str, order: Sequence[str]) -> Optional[int]:
    """Position in the model of a module path or parameter name ("2.weight" -> "2")."""
    while name:
        if name in order:
            return order.index(name)
        name = name.rsplit(".", 1)[0] if "." in name else ""
    return None


def _timing(kind: str, c: tuple[int, int], e: tuple[int, int]) -> bool:
    if kind == "overlap":
        return c[0] <= e[1] + SLACK and e[0] <= c[1] + SLACK
    return c[0] <= e[0] + SLACK


def _features(f: Finding) -> set[str]:
    found = set(names(f))
    for item in f.evidence.get("worst") or ():
        if isinstance(item, dict) and "feature" in item:
            found.add(str(item["feature"]))
    return found


def _place(kind: str, cause: Finding, effect: Finding, order: Sequence[str]) -> bool:
    if kind == "any":
        return True
    if kind == "feature":
        return bool(_features(cause) & _features(effect))
    if kind == "split":
        split = str(cause.evidence.get("split") or cause.subject)
        return effect.subject == split or effect.subject.startswith((split + "/", split + " "))
    if kind == "same":
        return bool(set(names(cause)) & set(names(effect)))
    where = [p for p in (_module(n, order) for n in names(cause)) if p is not None]
    there = [p for p in (_module(n, order) for n in names(effect)) if p is not None]
    if not where or not there:
        return False
    if kind == "downstream":
        return max(there) >= min(where)
    return min(there) <= max(where)  # upstream


def holds(link: Link, cause: Finding, effect: Finding, order: Sequence[str] = ()) -> bool:
    """Whether `link` joins these two findings: rules, timing, place and evidence agree."""
    if cause.rule != link.cause or effect.rule not in link.effects or cause is effect:
        return False
    if cause.steps and effect.steps and not _timing(link.timing, cause.steps, effect.steps):
        return False
    if not _place(link.place, cause, effect, order):
        return False
    return link.when is None or link.when(cause, effect)


def link_between(cause: Finding, effect: Finding, order: Sequence[str] = ()) -> Optional[Link]:
    """The first link that joins `cause` to `effect`, if any."""
    return next((lk for lk in LINKS if holds(lk, cause, effect, order)), None)
