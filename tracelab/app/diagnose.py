"""From findings to diagnoses: merge one defect's findings, link causes to their symptoms
(tracelab.core.causes), name a cause seen only through its symptoms, rank the root causes."""
from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from typing import Sequence

from tracelab.app.lr_cause import infer_lr_too_high
from tracelab.core import causes
from tracelab.core.findings import ERROR, INFO, WARNING, Finding, RootCause
from tracelab.core.run import Run
from tracelab.core.schema import TRAIN, Needs

_BASE = {ERROR: 0.7, WARNING: 0.55, INFO: 0.3}


def diagnose(run: Run, findings: Sequence[Finding]) -> tuple[list[Finding], list[RootCause]]:
    """The merged findings (sorted, ids unique) and the diagnoses, most likely first."""
    order = list(run.module_types())
    found = unique_ids(merge(findings))
    edges = link(found, order)
    lr = infer_lr_too_high(run, found, roots(found, edges))
    if lr is not None:
        found = unique_ids([lr, *found])
        edges = link(found, order)
    return found, rank(run, found, edges)


# -- one finding per defect --------------------------------------------------------------------
def merge(findings: Sequence[Finding]) -> list[Finding]:
    """Findings of one rule with the same steps and the same fix (one cause) become one that
    lists its subjects and keeps each subject's evidence."""
    groups: dict[tuple, list[Finding]] = {}
    for f in findings:
        key = (f.rule, f.steps, f.fix) if f.rule in causes.MERGE else (id(f),)
        groups.setdefault(key, []).append(f)
    out = []
    for group in groups.values():
        out.append(group[0] if len(group) == 1 else _merged(group))
    return sorted(out, key=lambda f: f.sort_key)


def _merged(group: list[Finding]) -> Finding:
    group = sorted(group, key=lambda f: (f.severity.rank, _natural(f.subject)))
    first = group[0]
    subjects = [f.subject for f in group]
    noun = causes.MERGE[first.rule]
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
def link(findings: Sequence[Finding], order: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """effect id -> [(cause id, why)], in link order; a link that would close a loop (each
    of two findings explaining the other) is left out."""
    by_rule: dict[str, list[Finding]] = {}
    for f in findings:
        by_rule.setdefault(f.rule, []).append(f)
    parents: dict[str, list[tuple[str, str]]] = {}
    for lk in causes.LINKS:
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
def rank(run: Run, findings: Sequence[Finding], parents: dict) -> list[RootCause]:
    by_id = {f.id: f for f in findings}
    reach = roots(findings, parents)
    draft = sorted(reach, key=lambda r: _order(by_id[r], reach[r], _confidence(by_id[r],
                                                                              reach[r])))
    taken: set[str] = set()
    result = []
    for rid in draft:
        root = by_id[rid]
        explains = tuple(f for f in reach[rid] if f.id not in taken)
        taken.update(f.id for f in explains)
        result.append(_root_cause(run, root, explains, parents))
    # Ranked by the strength of each root's own evidence: a signal that was not recorded lowers
    # the confidence in what lies upstream of a root, not the root's place among the others.
    return sorted(result, key=lambda d: _order(d.finding, d.explains,
                                               _confidence(d.finding, d.explains)))


def _order(root: Finding, explains: Sequence[Finding], confidence: float) -> tuple:
    worst = min((f.severity.rank for f in (root, *explains)))
    first = root.steps[0] if root.steps else -1
    return (-round(confidence, 6), worst, first, root.id)


def _confidence(root: Finding, explains: Sequence[Finding]) -> float:
    if root.rule == causes.LR_TOO_HIGH:
        return float(root.evidence.get("confidence", 0.5))
    worst = min((f.severity for f in (root, *explains)), key=lambda s: s.rank)
    return min(0.95, _BASE[worst] + 0.1 * min(len(explains), 4))


def _root_cause(run: Run, root: Finding, explains: tuple[Finding, ...],
                parents: dict) -> RootCause:
    ids = {root.id} | {f.id for f in explains}
    by = {f.id: f.rule for f in explains}
    links = tuple((c, e.id, w) for e in explains for c, w in parents.get(e.id, ()) if c in ids)
    confidence = _confidence(root, explains)
    basis = list(root.evidence.get("basis") or [_headline(root)])
    for why in dict.fromkeys(w for _, _, w in links):
        basis.append(f"explains {', '.join(dict.fromkeys(by[e] for _, e, w in links if w == why))}"
                     f": {why}")
    fix = root.fix
    missing = _missing(run, root)
    if missing:
        basis.append(missing)
        confidence *= 0.6
    return RootCause(root, explains, round(confidence, 3), tuple(basis), fix, links)


def _headline(f: Finding) -> str:
    steps = "" if not f.steps else (f" at step {f.steps[0]}" if f.steps[0] == f.steps[1]
                                    else f" at steps {f.steps[0]}-{f.steps[1]}")
    return f"{f.code} {f.rule} [{f.subject}]{steps}"


def _missing(run: Run, root: Finding) -> str:
    """What was not recorded at the root's step that would have named its cause."""
    unseen = causes.UNSEEN.get(root.rule)
    if unseen is None or not root.steps or causes.input_borne(root):
        return ""
    if root.rule == "loss-spike" and causes.spike_cause(root) == "lr_increase":
        return ""
    signal, advice = unseen
    step = root.steps[0]
    if Needs.INPUTS not in run.available:
        return f"not recorded: {signal} of step {step} (no inputs were profiled); {advice}"
    inp = run.inputs
    if not ((inp["step"] == step) & (inp["split"] == TRAIN)).any():
        return f"not recorded: {signal} of step {step} was not profiled; {advice}"
    return ""
