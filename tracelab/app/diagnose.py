"""From findings to diagnoses: merge one defect's findings, link causes to their symptoms
(the links each rule declares, tracelab.core.causes), run the rules that name a cause from
other findings, rank the root causes: a diagnosis whose fix the run's recorded facts
contradict (the premises its rule declares) below every one that nothing contradicts."""
from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from typing import Callable, Mapping, Optional, Sequence

from tracelab.core import causes
from tracelab.core.causes import Chain, Link
from tracelab.core.findings import ERROR, INFO, NOT_RECORDED, WARNING, Finding, RootCause
from tracelab.core.rules import RuleSpec
from tracelab.core.run import Run
from tracelab.core.schema import TRAIN, Needs

_BASE = {ERROR: 0.7, WARNING: 0.55, INFO: 0.3}

# What runs a rule that reads findings: (spec, chains) -> its findings.
Reader = Callable[[RuleSpec, Sequence[Chain]], list[Finding]]


def diagnose(run: Run, findings: Sequence[Finding], rules: Optional[Sequence[RuleSpec]] = None,
             read: Optional[Reader] = None) -> tuple[list[Finding], list[RootCause]]:
    """The merged findings (sorted, ids unique) and the diagnoses, most likely first.

    `rules` (default: every registered rule) give the links, merge nouns and unseen signals;
    those among them that read findings run on the causal chains (through `read`, default: with
    their default thresholds) and their findings are linked with the others.
    """
    rules = _registered() if rules is None else rules
    specs = {s.name: s for s in rules}
    links = link_order(rules)
    order = list(run.module_types())
    found = unique_ids(merge(findings, specs))
    edges = link(found, order, links)
    readers = [s for s in rules if s.reads]
    if readers:
        by_id = {f.id: f for f in found}
        chains = [Chain(by_id[r], tuple(reached)) for r, reached in roots(found, edges).items()]
        added = [f for s in readers
                 for f in (read or _defaults(run))(s, causes.chains_of(s.reads, chains))]
        if added:
            found = unique_ids([*added, *found])
            edges = link(found, order, links)
    return found, rank(run, found, edges, specs)


def _registered() -> list[RuleSpec]:
    from tracelab.analyzers import RULES
    return [r.spec for r in RULES]


def _defaults(run: Run) -> Reader:
    return lambda spec, chains: spec.func(run, chains)


def link_order(rules: Sequence[RuleSpec]) -> list[Link]:
    """Every declared link, the most upstream causes' first: by the cause's depth in the graph
    of rules the links draw (0 for a rule nothing explains; rules that explain one another, such
    as a loss spike and a gradient burst, share theirs), then in rule-list order, each rule's
    links as it declares them. A symptom's causes, and a cause's symptoms, are listed in this
    order."""
    names = [s.name for s in rules]
    edges = {(lk.cause, e) for s in rules for lk in s.links for e in lk.effects
             if lk.cause != e}
    reach = {n: {n} for n in names}
    grown = True
    while grown:  # what each rule reaches, to find the rules on a loop with each other
        grown = False
        for cause, effect in edges:
            more = reach.get(effect, {effect}) - reach.setdefault(cause, {cause})
            if more:
                reach[cause] |= more
                grown = True
    depth: dict[str, int] = {}

    def depth_of(name: str) -> int:
        if name not in depth:
            depth[name] = 0
            loop = {m for m in reach.get(name, ()) if name in reach.get(m, ())}
            depth[name] = max((depth_of(c) + 1 for c, e in edges
                               if e in loop | {name} and c not in loop | {name}), default=0)
            for m in loop:
                depth[m] = depth[name]
        return depth[name]

    ranked = sorted(range(len(rules)), key=lambda i: (depth_of(rules[i].name), i))
    return [lk for i in ranked for lk in rules[i].links]


# -- one finding per defect --------------------------------------------------------------------
def merge(findings: Sequence[Finding],
          rules: Optional[Mapping[str, RuleSpec]] = None) -> list[Finding]:
    """Findings of one rule with the same steps and the same fix (one cause) become one that
    lists its subjects and keeps each subject's evidence, where the rule declares the noun of
    its subjects (`rules`: name -> spec, default every registered rule)."""
    rules = {s.name: s for s in _registered()} if rules is None else rules
    nouns = {name: s.merge for name, s in rules.items() if s.merge}
    groups: dict[tuple, list[Finding]] = {}
    for f in findings:
        key = (f.rule, f.steps, f.fix) if f.rule in nouns else (id(f),)
        groups.setdefault(key, []).append(f)
    out = []
    for group in groups.values():
        out.append(group[0] if len(group) == 1 else _merged(group, nouns[group[0].rule]))
    return sorted(out, key=lambda f: f.sort_key)


def _merged(group: list[Finding], noun: str) -> Finding:
    group = sorted(group, key=lambda f: (f.severity.rank, _natural(f.subject)))
    first = group[0]
    subjects = [f.subject for f in group]
    listed = ", ".join(subjects[:3]) + (f" and {len(subjects) - 3} more" if len(subjects) > 3
                                        else "")
    steps = (f"step {first.steps[0]}" if first.steps and first.steps[0] == first.steps[1]
             else f"steps {first.steps[0]}-{first.steps[1]}" if first.steps else "the run")
    message = (f"{len(group)} {noun}s show the same at {steps} ({listed}): "
               f"{first.message}")
    evidence = {**first.evidence, "subjects": subjects,
                "per_subject": {f.subject: {**f.evidence, "message": f.message} for f in group}}
    merged = replace(first, subject=f"{len(group)} {noun}s", message=message,
                     evidence=evidence, id="")
    # Two groups of one rule can share count and steps (the same features, another cause):
    # the fix, which is what they share, tells them apart.
    tag = hashlib.sha1(first.fix.encode()).hexdigest()[:6]
    return replace(merged, id=f"{merged.id}:{tag}")


def _natural(text: str) -> list:
    """feature[2] before feature[10]."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text)]


def unique_ids(findings: Sequence[Finding]) -> list[Finding]:
    seen: dict[str, int] = {}
    out = []
    for f in sorted(findings, key=lambda f: (f.sort_key, f.id)):
        n = seen.get(f.id, 0) + 1
        seen[f.id] = n
        out.append(f if n == 1 else replace(f, id=f"{f.id}#{n}"))
    return out


# -- the causal graph --------------------------------------------------------------------------
def link(findings: Sequence[Finding], order: Sequence[str],
         links: Sequence[Link]) -> dict[str, list[tuple[str, str]]]:
    """effect id -> [(cause id, why)], in link order; a link that would close a loop (each
    of two findings explaining the other) is left out."""
    by_rule: dict[str, list[Finding]] = {}
    for f in findings:
        by_rule.setdefault(f.rule, []).append(f)
    parents: dict[str, list[tuple[str, str]]] = {}
    for lk in links:
        for cause in by_rule.get(lk.cause, ()):
            for rule in lk.effects:
                for effect in by_rule.get(rule, ()):
                    if (causes.holds(lk, cause, effect, order)
                            and not _reaches(parents, cause.id, effect.id)
                            and all(c != cause.id for c, _ in parents.get(effect.id, ()))):
                        parents.setdefault(effect.id, []).append((cause.id, lk.why))
    return parents


def _reaches(parents: dict, start: str, target: str) -> bool:
    """Whether `target` is already a cause (transitively) of `start`."""
    todo, seen = [start], set()
    while todo:
        node = todo.pop()
        for cause, _ in parents.get(node, ()):
            if cause == target:
                return True
            if cause not in seen:
                seen.add(cause)
                todo.append(cause)
    return False


def roots(findings: Sequence[Finding], parents: dict) -> dict[str, list[Finding]]:
    """root id -> the findings it reaches, in causal order (nearest first)."""
    by_id = {f.id: f for f in findings}
    children: dict[str, list[str]] = {}
    for effect, causes_ in parents.items():
        for cause, _ in causes_:
            children.setdefault(cause, []).append(effect)
    out = {}
    for f in findings:
        if f.id in parents:
            continue
        reached, frontier = [], [f.id]
        while frontier:
            nxt = []
            for node in frontier:
                for child in children.get(node, ()):
                    if child not in reached and child != f.id:
                        reached.append(child)
                        nxt.append(child)
            frontier = nxt
        out[f.id] = [by_id[r] for r in reached]
    return out


# -- ranking -----------------------------------------------------------------------------------
def rank(run: Run, findings: Sequence[Finding], parents: dict,
         rules: Mapping[str, RuleSpec]) -> list[RootCause]:
    by_id = {f.id: f for f in findings}
    reach = roots(findings, parents)
    verdicts = {r: _verdicts(run, by_id[r], rules.get(by_id[r].rule)) for r in reach}
    against = {r for r, vs in verdicts.items() if any(v.contradicted for v in vs)}
    draft = sorted(reach, key=lambda r: _order(by_id[r], reach[r], _confidence(by_id[r],
                                                                              reach[r]),
                                               r in against))
    taken: set[str] = set()
    result = []
    for rid in draft:
        root = by_id[rid]
        explains = tuple(f for f in reach[rid] if f.id not in taken)
        taken.update(f.id for f in explains)
        result.append(_root_cause(run, root, explains, parents, rules.get(root.rule),
                                  verdicts[rid]))
    # Ranked by the strength of each root's own evidence: a signal that was not recorded lowers
    # the confidence in what lies upstream of a root, not the root's place among the others;
    # a fix the recorded facts contradict puts it after every diagnosis nothing contradicts.
    return sorted(result, key=lambda d: _order(d.finding, d.explains,
                                               _confidence(d.finding, d.explains),
                                               bool(d.contradicted)))


def _order(root: Finding, explains: Sequence[Finding], confidence: float,
           contradicted: bool = False) -> tuple:
    worst = min((f.severity.rank for f in (root, *explains)))
    first = root.steps[0] if root.steps else -1
    return (contradicted, -round(confidence, 6), worst, first, root.id)


def _verdicts(run: Run, root: Finding, spec: Optional[RuleSpec]) -> list[causes.Verdict]:
    """What the run's recorded facts say of the premises of the root's fix."""
    return causes.judged(spec.presumes, run, root) if spec is not None else []


def _confidence(root: Finding, explains: Sequence[Finding]) -> float:
    if "confidence" in root.evidence:  # a cause named from its symptoms weighs them itself
        return float(root.evidence["confidence"])
    worst = min((f.severity for f in (root, *explains)), key=lambda s: s.rank)
    return min(0.95, _BASE[worst] + 0.1 * min(len(explains), 4))


def _root_cause(run: Run, root: Finding, explains: tuple[Finding, ...], parents: dict,
                spec: Optional[RuleSpec], verdicts: Sequence[causes.Verdict] = ()) -> RootCause:
    ids = {root.id} | {f.id for f in explains}
    by = {f.id: f.rule for f in explains}
    links = tuple((c, e.id, w) for e in explains for c, w in parents.get(e.id, ()) if c in ids)
    confidence = _confidence(root, explains)
    basis = list(root.evidence.get("basis") or [_headline(root)])
    for why in dict.fromkeys(w for _, _, w in links):
        basis.append(f"explains {', '.join(dict.fromkeys(by[e] for _, e, w in links if w == why))}"
                     f": {why}")
    fix = root.fix
    missing = _missing(run, root, spec)
    if missing:
        basis.append(missing)
        confidence *= 0.6
    basis += [NOT_RECORDED + v.missing for v in verdicts if v.missing]
    against = tuple(dict.fromkeys(v.contradicted for v in verdicts if v.contradicted))
    if against:
        why = "; ".join(against)
        basis.append(f"contradicted by the recorded facts: {why}")
        confidence *= 0.5
        fix = f"Probably not this: {why}. (The fix it would call for: {fix})"
    return RootCause(root, explains, round(confidence, 3), tuple(basis), fix, links, against)


def _headline(f: Finding) -> str:
    steps = "" if not f.steps else (f" at step {f.steps[0]}" if f.steps[0] == f.steps[1]
                                    else f" at steps {f.steps[0]}-{f.steps[1]}")
    return f"{f.code} {f.rule} [{f.subject}]{steps}"


def _missing(run: Run, root: Finding, spec: Optional[RuleSpec]) -> str:
    """What was not recorded at the root's step that would have named its cause."""
    unseen = spec.unseen if spec is not None else None
    if unseen is None or not root.steps or causes.input_borne(root) \
            or causes.names_its_cause(root):
        return ""
    signal, advice = unseen
    step = root.steps[0]
    if Needs.INPUTS not in run.available:
        return f"not recorded: {signal} of step {step} (no inputs were profiled); {advice}"
    inp = run.inputs
    if not ((inp["step"] == step) & (inp["split"] == TRAIN)).any():
        return f"not recorded: {signal} of step {step} was not profiled; {advice}"
    return ""
