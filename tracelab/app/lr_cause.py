"""A too-high learning rate, named from its symptoms when enough of them agree.

No rule sees the learning rate directly: it shows as a loss that keeps swinging, loss spikes
(right after the LR rose, or again and again), updates far above 1e-3 of the weights (100x or
more, over the run or its first 10 steps), exploding gradients, NaN/Inf and units that die.
When at least two of these agree, and one of them is about the optimization itself (swings,
spikes, update size), the diagnosis says so, with the numbers, and explains those findings.
Symptoms that an input cause already explains (a bad batch, unnormalized inputs) do not count.

How to fix: lower the learning rate by the factor the update ratios give and warm it up; when
the LR rose mid-run, check the schedule at that step.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from tracelab.analyzers._dynamics import fmt as _fmt
from tracelab.analyzers._dynamics import matrix_params, update_ratios
from tracelab.core import causes
from tracelab.core.findings import Finding
from tracelab.core.run import Run
from tracelab.core.schema import LR_PREFIX, TRAIN, UPDATE, WEIGHT, Needs

FAR_ABOVE = 100.0  # update ratios this many times 1e-3 are far above it (healthy tiny nets
#                    reach 30-60x in their first steps)
EARLY = 10  # the first recorded steps, before dead units stop updating
PRIMARY = {"oscillation", "lr_rise", "spikes", "updates"}


def infer_lr_too_high(run: Run, findings: Sequence[Finding],
                      roots: dict[str, list[Finding]]) -> Optional[Finding]:
    """The learning-rate-too-high finding, or None when the evidence does not agree."""
    by_id = {f.id: f for f in findings}
    seen: list[Finding] = []
    for rid, reached in roots.items():
        root = by_id[rid]
        if root.rule in causes.LR_SYMPTOMS and _symptom(root):
            seen += [root] + [f for f in reached if f.rule in causes.LR_SYMPTOMS and _symptom(f)]
    if not seen:
        return None
    votes = _votes(run, seen)
    if len(votes) < 2 or not PRIMARY & set(votes):
        return None
    basis = [text for text, _ in votes.values()]
    weight = sum(w for _, w in votes.values())
    confidence = min(0.95, 0.35 + 0.15 * weight)
    steps = (min(f.steps[0] for f in seen if f.steps), max(f.steps[1] for f in seen if f.steps))
    peak = _lr_peak(run)
    where = f" (it peaks at {fmt(peak[1])} in '{peak[0]}')" if peak else ""
    severity = min((f.severity for f in seen), key=lambda s: s.rank)
    return Finding(
        causes.LR_TOO_HIGH, causes.LR_CODE, severity, "learning rate", steps,
        f"The learning rate is too high{where}: " + "; ".join(basis) + ".",
        {"basis": basis, "confidence": confidence, "votes": sorted(votes),
         "symptoms": [f.id for f in seen], "lr_peak": peak[1] if peak else None,
         "update_ratio": _fastest(run)[1] if Needs.UPDATES in run.available else None},
        _fix(run, seen))


def fmt(value) -> str:
    """A number from a finding's evidence; "?" where the rule left it out."""
    return _fmt(value) if isinstance(value, (int, float)) else "?"


def _symptom(f: Finding) -> bool:
    if f.rule == "update-ratio":
        return causes.update_side(f) == "high"
    return not causes.input_borne(f)


def _votes(run: Run, seen: Sequence[Finding]) -> dict[str, tuple[str, int]]:
    """kind -> (what it shows, weight)."""
    votes: dict[str, tuple[str, int]] = {}
    spikes = [f for f in seen if f.rule == "loss-spike"]
    for f in seen:
        ev = f.evidence
        if f.rule == "loss-oscillation" and "oscillation" not in votes:
            votes["oscillation"] = (f"the loss keeps swinging between {fmt(ev.get('p10'))} and "
                                    f"{fmt(ev.get('p90'))}", 1)
        elif f.rule == "loss-spike" and causes.spike_cause(f) == "lr_increase":
            votes["lr_rise"] = (f"the loss jumped at step {ev.get('step')} right after the "
                                f"learning rate rose {fmt(ev.get('lr_ratio'))}x", 2)
        elif f.rule == "update-ratio" and "updates" not in votes:
            votes["updates"] = (f"updates reach {fmt(ev.get('worst_ratio'))} of the weights' "
                                f"norm per step, {fmt((ev.get('worst_ratio') or 0) / 1e-3)}x the "
                                "usual 1e-3", 1)
        elif f.rule == "exploding-gradients" and "exploding" not in votes:
            votes["exploding"] = (f"gradients explode (norm {fmt(ev.get('peak_norm'))} in "
                                  f"'{f.subject}')", 1)
        elif f.rule == "nonfinite-values" and "nonfinite" not in votes \
                and f.evidence.get("source") != "eval loss":  # the evaluation's, not training's
            votes["nonfinite"] = (f"NaN/Inf appear from step {f.steps[0]}", 1)
    episodes = max((int(f.evidence.get("spikes_total", 1)) for f in spikes), default=0)
    if episodes >= 2 and "lr_rise" not in votes:
        votes["spikes"] = (f"the loss spiked {episodes} times, first at step "
                           f"{min(f.steps[0] for f in spikes)}", 1)
    if "updates" not in votes and Needs.UPDATES in run.available:
        name, ratio, when = _fastest(run)
        if ratio is not None and ratio >= FAR_ABOVE * causes.HEALTHY_UPDATE_RATIO:
            votes["updates"] = (f"the fastest layer '{name}' changes by {fmt(ratio)} of its "
                                f"norm per step ({when}), {fmt(ratio / 1e-3)}x the usual 1e-3",
                                1)
    dead = [f for f in seen if f.rule == "dead-units"]
    if dead:
        d = max(dead, key=lambda f: f.evidence.get("dead_frac") or 0)
        first_spike = min((f.steps[0] for f in spikes), default=None)
        after = (f" after the spike at step {first_spike}"
                 if first_spike is not None and d.steps[0] >= first_spike else "")
        votes["dead"] = (f"{fmt(100 * (d.evidence.get('dead_frac') or 0))}% of the units of "
                         f"'{d.subject}' died{after} (from step {d.steps[0]})", 1)
    return votes


def _max_ratio(run: Run) -> tuple[Optional[str], Optional[float]]:
    ratios = update_ratios(run)
    if not len(ratios):
        return None, None
    return str(ratios.idxmax()), float(ratios.max())


def _fastest(run: Run) -> tuple[Optional[str], Optional[float], str]:
    """The fastest layer's median update ratio over the run, or over its first steps when
    larger: units that die or weights that blow up stop the updates later on."""
    name, ratio = _max_ratio(run)
    upd, w = run.stat(UPDATE, "norm"), run.stat(WEIGHT, "norm")
    names = matrix_params(run, [n for n in upd.columns if n in w.columns])
    if not names or len(upd) < 2 * EARLY:
        return name, ratio, "median"
    with np.errstate(invalid="ignore", divide="ignore"):
        early = (upd[names].iloc[:EARLY] / w[names].reindex(upd.index[:EARLY]))
    early = early.replace([np.inf, -np.inf], np.nan).median().dropna()
    if len(early) and (ratio is None or early.max() > ratio):
        return str(early.idxmax()), float(early.max()), f"median of the first {EARLY} steps"
    return name, ratio, "median"


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


def _fix(run: Run, seen: Sequence[Finding]) -> str:
    rise = [f for f in seen if f.rule == "loss-spike" and causes.spike_cause(f) == "lr_increase"]
    if rise:
        return (f"Check the learning-rate schedule at step {rise[0].evidence.get('step')}: it "
                f"rose {fmt(rise[0].evidence.get('lr_ratio'))}x there (a restart, warm-up "
                "applied twice, a wrong step unit); keep the LR where the loss was falling.")
    ratio = _fastest(run)[1] if Needs.UPDATES in run.available else None
    if ratio is None or ratio < 30e-3:
        factor = "3-10x"
    else:  # toward 3e-3, the top of the healthy range, in round steps
        steps = (3, 10, 30, 100, 300, 1000)
        n = min(steps, key=lambda s: abs(np.log(s) - np.log(ratio / 3e-3)))
        peak = _lr_peak(run)
        factor = f"about {n}x" + (f" (to about {fmt(peak[1] / n)})" if peak else "")
    return (f"Lower the learning rate {factor}, until updates are near 1e-3 of the weights, "
            "and warm it up over the first steps; clip gradients (max_norm about 1) meanwhile.")
