"""Which finding can explain which: causal links between rules, and how the engine applies them.

A link says that a finding of rule `cause` can explain a finding of each rule in `effects`.
Each rule declares its links with it (`@rule(links=...)`, tracelab.core.rules): what it
explains (`explains(...)`) and what explains it (`explained_by(...)`), naming the other rules
by name; tests/test_registry.py checks that every name is a registered rule. A link holds
between two findings only when the evidence agrees:

- timing: "first" - the cause starts no later than the effect (give or take `SLACK` steps, the
  usual recording cadence), "overlap" - their step ranges meet;
- place: "any", "same" (they share a layer), "downstream" (the effect sits at or after the
  cause's first layer in the model), "upstream" (at or before its last layer), "feature" (they
  share an input feature), "split" (the effect is about the cause's data split);
- when: an optional check on both findings' evidence (a loss spike blamed on its input batch
  is not the learning rate's doing). The checks here read evidence only, whichever rule found
  it: a `cause` a rule names ("input_..." for the input data), the `source` where a value was
  seen, a `worst_ratio` of updates to weights.

A rule also declares what its fix presumes of the run (`@rule(presumes=...)`: `Premise`s). The
engine judges each against the run's recorded facts: a diagnosis whose fix a fact contradicts
(zero_grad() when the leftover gradient sits on a parameter no optimizer holds) is ranked
below every diagnosis nothing contradicts, and says why; one whose deciding facts were not
recorded says which, and how to record them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Collection, NamedTuple, Optional, Sequence

from tracelab.core.findings import INFO, Finding

SLACK = 10  # steps: signals recorded every few steps see an event a little late

HEALTHY_UPDATE_RATIO = 1e-3


@dataclass(frozen=True)
class Link:
    """A finding of rule `cause` can explain one of each rule in `effects`, for the reason
    `why`, when `timing`, `place` and `when` agree. Declared through `explains` or
    `explained_by`, which leave the declaring rule's side for `@rule` to fill in."""
    cause: str
    effects: tuple[str, ...]
    why: str
    timing: str = "first"
    place: str = "any"
    when: Optional[Callable[[Finding, Finding], bool]] = None


# -- declaring a link ---------------------------------------------------------------------------
def explains(*effects: str, why: str, timing: str = "first", place: str = "any",
             when: Optional[Callable[[Finding, Finding], bool]] = None) -> Link:
    """A link from the rule that declares it (in its `@rule(links=...)`) to `effects`."""
    return Link("", tuple(effects), why, timing, place, when)


def explained_by(cause: str, *, why: str, timing: str = "first", place: str = "any",
                 when: Optional[Callable[[Finding, Finding], bool]] = None) -> Link:
    """A link from `cause` to the rule that declares it."""
    return Link(cause, (), why, timing, place, when)


# -- evidence checks: what a finding's evidence says, whichever rule found it ------------------
def stated_cause(f: Finding) -> str:
    """The cause a finding's evidence names (a loss spike's: input_nonfinite, input_outlier,
    lr_increase, grad_spike, unprofiled or unknown)."""
    return str(f.evidence.get("cause", "unknown"))


def names_its_cause(f: Finding) -> bool:
    """Whether the finding's evidence names what caused it."""
    return stated_cause(f) not in ("unprofiled", "unknown")


def input_borne(f: Finding) -> bool:
    """A finding whose own evidence points at the input data: the cause it names is an input
    (`cause` "input_..."), or the input is where it was seen (`source` "input")."""
    return stated_cause(f).startswith("input") or f.evidence.get("source") == "input"


def update_side(f: Finding) -> str:
    """"high" where the evidence holds an update ratio above the healthy 1e-3, else "low"."""
    ratio = f.evidence.get("worst_ratio")
    return "high" if ratio is not None and ratio > HEALTHY_UPDATE_RATIO else "low"


def not_input(_: Finding, effect: Finding) -> bool:
    """For `when`: the effect's evidence does not point at the input data."""
    return not input_borne(effect)


def cause_is_stated(cause: Finding, _: Finding) -> bool:
    """For `when`: the cause is a warning or an error; an information note explains nothing."""
    return cause.severity != INFO


def low_updates(_: Finding, effect: Finding) -> bool:
    """For `when`: the effect holds no update ratio above the healthy one."""
    return update_side(effect) == "low"


# -- what a fix presumes ----------------------------------------------------------------------
class Verdict(NamedTuple):
    """What the recorded facts say of a premise: `contradicted` (why, in words) or `missing`
    (the fact that would decide and how to record it); neither when the facts agree."""
    contradicted: str = ""
    missing: str = ""


HOLDS = Verdict()


def contradicted(why: str) -> Verdict:
    """The facts contradict the premise; `why` names them ("'2.bias' is in no optimizer")."""
    return Verdict(contradicted=why)


def unknown(fact: str, advice: str) -> Verdict:
    """The fact that decides was not recorded: what it is, and how to record it."""
    return Verdict(missing=f"{fact}; {advice}")


@dataclass(frozen=True)
class Premise:
    """A fact a rule's fix presumes (`fact`, in words), and `judge(run, finding)`: what the
    run's recorded facts say of it for that finding (a Verdict). A judge reads facts only,
    never raises to signal, and says `unknown` rather than guess. `when`, if given, picks the
    findings whose fix presumes it (a rule whose fix for an input NaN is not its fix for a
    NaN loss)."""
    fact: str
    judge: Callable[[Any, Finding], Verdict]
    when: Optional[Callable[[Finding], bool]] = None


def judged(premises: Sequence[Premise], run: Any, finding: Finding) -> list[Verdict]:
    """Every premise's verdict on `finding`, leaving out those the facts agree with."""
    verdicts = (premise.judge(run, finding) for premise in premises
                if premise.when is None or premise.when(finding))
    return [v for v in verdicts if v.contradicted or v.missing]


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


def link_between(links: Sequence[Link], cause: Finding, effect: Finding,
                 order: Sequence[str] = ()) -> Optional[Link]:
    """The first of `links` that joins `cause` to `effect`, if any."""
    return next((lk for lk in links if holds(lk, cause, effect, order)), None)


# -- what a rule that reads findings sees ------------------------------------------------------
@dataclass(frozen=True)
class Chain:
    """A finding nothing explains, and the findings it explains, nearest first."""
    root: Finding
    explains: tuple[Finding, ...]


def chains_of(rules: Collection[str], chains: Sequence[Chain]) -> list[Chain]:
    """The chains that start at a finding of `rules`, each cut to the findings of `rules`: a
    finding that another rule's finding explains belongs to that cause."""
    return [Chain(c.root, tuple(f for f in c.explains if f.rule in rules))
            for c in chains if c.root.rule in rules]
