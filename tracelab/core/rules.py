"""The rule decorator and the metadata it attaches. Registration is the explicit list
`tracelab.analyzers.RULES`; this module only describes rules.

Everything the rest of tracelab needs to know about a rule is declared with it, in its
`@rule(...)`: what it needs recorded, what it explains and what explains it (`links`,
tracelab.core.causes), the noun its findings merge under, the plot its findings get, the
findings it reads (a rule that names a cause from other rules' findings) and the signal whose
absence at a finding's step leaves its cause unnamed, and the facts its fix presumes.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from enum import Enum
from functools import partial
from typing import Any, Callable, NamedTuple, Optional

from tracelab.core.causes import Link, Premise
from tracelab.core.findings import Finding
from tracelab.core.schema import Requirement

DOC_SECTIONS = ("What it detects", "Why it matters", "Example", "How to fix", "False positives")


class Plot(str, Enum):
    """What a finding's plot shows; the reports map each kind to the function that draws it."""
    SUBJECT = "subject"                # whatever tensors or scalar the finding names
    NONE = "none"                      # no plot: the evidence table says it all
    LOSS = "loss"                      # the train loss, the finding's steps shaded
    SCALAR = "scalar"                  # the scalar the finding names, its steps shaded
    LOSS_SWINGS = "loss-swings"        # the loss's swinging stretch and its percentile band
    LOSS_JUMP = "loss-jump"            # the loss around a jump, with the LR and gradient norm
    LEARNING_RATE = "learning-rate"    # the loss over the run with the learning rate under it
    NONFINITE = "nonfinite"            # every curve, the first NaN/Inf step marked
    TRAIN_VS_EVAL = "train-vs-eval"    # train and validation loss, the best step marked
    METRIC = "metric"                  # a metric on every split, chance marked
    RUN_END = "run-end"                # the curves up to where the run stopped
    GRADIENT_LAYERS = "gradient-layers"
    DEAD_FRACTION = "dead-fraction"
    SATURATED_FRACTION = "saturated-fraction"
    WEIGHT_CHANGE = "weight-change"    # how far each module group's weights moved
    UPDATE_RATIOS = "update-ratios"
    OUTPUT_SPREAD = "output-spread"
    SPLIT_DISTRIBUTIONS = "split-distributions"
    FEATURE_SPREAD = "feature-spread"
    INPUT_SCALE = "input-scale"
    STEP_TIME = "step-time"            # data-loading time against the step's time
    RANKS = "ranks"                    # one curve per rank


class Unseen(NamedTuple):
    """The signal that names a finding's cause, and how to record it, when it was missing at
    the finding's step."""
    signal: str
    advice: str


@dataclass(frozen=True)
class RuleSpec:
    name: str
    code: str
    requires: tuple[Requirement, ...]
    func: Callable[..., list[Finding]]
    links: tuple[Link, ...] = ()
    merge: Optional[str] = None
    plot: Plot = Plot.SUBJECT
    reads: tuple[str, ...] = ()
    unseen: Optional[Unseen] = None
    presumes: tuple[Premise, ...] = ()

    @property
    def summary(self) -> str:
        """The docstring's first line, after the "name:" prefix."""
        lines = self.doc.splitlines()
        first = lines[0] if lines else ""
        return first.split(":", 1)[1].strip() if ":" in first else first

    @property
    def doc(self) -> str:
        return inspect.getdoc(inspect.getmodule(self.func)) or inspect.getdoc(self.func) or ""

    def thresholds(self) -> dict[str, Any]:
        """Keyword-only parameters and their defaults: what config may override."""
        return {p.name: p.default for p in inspect.signature(self.func).parameters.values()
                if p.kind is p.KEYWORD_ONLY and p.name != "baseline"}

    @property
    def uses_baseline(self) -> bool:
        return "baseline" in inspect.signature(self.func).parameters


def rule(*, name: str, code: str, requires: tuple[Requirement, ...] = (),
         links: tuple[Link, ...] = (), merge: Optional[str] = None, plot: Plot = Plot.SUBJECT,
         reads: tuple[str, ...] = (), unseen: Optional[Unseen] = None,
         presumes: tuple[Premise, ...] = ()) -> Callable:
    """Attach rule metadata to a pure function `f(run, *, thresholds...) -> list[Finding]`, or
    `f(run, chains, *, thresholds...)` for a rule that `reads` other rules' findings (it gets
    the causal chains that start at one of them: tracelab.core.causes.Chain).

    `links` are `causes.explains(...)` and `causes.explained_by(...)`: the declaring rule's
    side of each is filled in here. `merge` is the noun of the subjects that findings sharing
    steps and fix merge under (one finding per defect). `presumes` are the facts its fix
    presumes (`causes.Premise`): a diagnosis the run's facts contradict is ranked below the
    others. The function gains `.spec` and `.finding(...)`, a Finding constructor with rule
    and code filled in. Nothing is registered here.
    """
    def decorate(func: Callable[..., list[Finding]]) -> Callable[..., list[Finding]]:
        own = tuple(replace(lk, cause=lk.cause or name, effects=lk.effects or (name,))
                    for lk in links)
        func.spec = RuleSpec(name=name, code=code, requires=tuple(requires), func=func,
                             links=own, merge=merge, plot=Plot(plot), reads=tuple(reads),
                             unseen=unseen, presumes=tuple(presumes))
        func.finding = partial(Finding, name, code)
        return func
    return decorate
