"""The analysis engine: one loop over the explicit rule list."""
from __future__ import annotations

import os
import traceback
from typing import Collection, Iterable, Optional, Sequence

from tracelab.app.diagnose import diagnose
from tracelab.core.causes import Chain
from tracelab.core.config import Config, find_spec, rule_for
from tracelab.core.errors import TraceError
from tracelab.core.findings import (NOT_RECORDED, Diagnosis, Finding, RootCause, RuleError,
                                     Skipped)
from tracelab.core.rules import RuleSpec
from tracelab.core.run import Run


def all_rules() -> list[RuleSpec]:
    from tracelab.analyzers import RULES
    return [r.spec for r in RULES]


def find_rule(key: str) -> Optional[RuleSpec]:
    return find_spec(key, all_rules())


def checked(config: Config | None) -> Config:
    """The config checked against the rule list: a bad name, threshold or setting fails here,
    as one line naming the file, before any run is opened."""
    return (config or Config()).check(all_rules())


def _resolve(specs: Sequence[RuleSpec], keys: Iterable[str], what: str) -> set[str]:
    return {rule_for(key, specs, what).name for key in keys}


def selected(config: Config, select: Sequence[str] | None = None,
             ignore: Sequence[str] | None = None) -> list[str]:
    """The names of the rules an analysis runs, in rule-list order: `select` (else the config's
    select, else all) less the config's and `ignore`'s rules."""
    specs = all_rules()
    chosen = select if select is not None else config.select
    wanted = _resolve(specs, chosen, "select") if chosen else None
    dropped = _resolve(specs, list(config.ignore) + list(ignore or ()), "ignore")
    return [s.name for s in specs
            if (wanted is None or s.name in wanted) and s.name not in dropped]


def _call(spec: RuleSpec, errors: list[RuleError], *args, **kwargs) -> Optional[list[Finding]]:
    """The rule's findings, or None after noting its error: a rule that breaks on odd data must
    not end the analysis."""
    try:
        return spec.func(*args, **kwargs)
    except MemoryError:  # ArrowMemoryError too: the run, not the rule, is beyond the machine
        raise
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        errors.append(RuleError(spec.name, spec.code, f"{type(exc).__name__}: {exc} "
                                f"({os.path.basename(where.filename)}:{where.lineno})"))
        return None


def _as_run(run: Run | str | os.PathLike) -> Run:
    """A Run as it is, else the run at a path in any format the CLI reads (native, TensorBoard,
    CSV, MLflow, W&B)."""
    if isinstance(run, Run):
        return run
    from tracelab.app.sources import open_any
    return open_any(run)


def analyze(run: Run | str | os.PathLike, *, config: Config | None = None,
            baseline: Run | str | os.PathLike | None = None,
            select: Sequence[str] | None = None,
            ignore: Sequence[str] | None = None,
            baseline_rules: Collection[str] | None = None) -> Diagnosis:
    """Run every selected rule over a run; findings sorted by severity, then step, one per
    defect (tracelab.app.diagnose merges and links them), and diagnoses most likely first.

    The config and the selection are checked before the run is opened. The baseline goes to
    every rule with a baseline mode, or only to `baseline_rules` (names) when given.
    """
    config = checked(config)
    names = selected(config, select, ignore)
    run = _as_run(run)
    if run.is_empty:
        where = run.path or run.name
        raise TraceError(f"{where}: the run holds no recorded steps"
                         + (f" ({'; '.join(run.problems)})" if run.problems else ""))
    base = _as_run(baseline) if baseline is not None else None

    findings: list[Finding] = []
    skipped: list[Skipped] = []
    errors: list[RuleError] = []
    ran: list[str] = []
    specs = all_rules()
    absent = run.absent  # data the recorder meant to record says so where rules miss it
    readers = []
    for spec in specs:
        if spec.name not in names:
            continue
        kwargs = config.thresholds(spec)
        missing = [r.label + (" (absent: the report's What was recorded says why)"
                              if r.key in absent else "")
                   for r in spec.requires if r not in run.available]
        if missing:
            skipped.append(Skipped(spec.name, spec.code, NOT_RECORDED + ", ".join(missing)))
            continue
        if spec.reads:  # it reads the other rules' findings, once they are linked
            readers.append(spec)
            continue
        if spec.uses_baseline:
            kwargs["baseline"] = base if baseline_rules is None or spec.name in baseline_rules \
                else None
        result = _call(spec, errors, run, **kwargs)
        if result is not None:
            ran.append(spec.name)
            findings.extend(result)

    def read(spec: RuleSpec, chains: Sequence[Chain]) -> list[Finding]:
        if spec not in readers:  # not selected, or what it needs was not recorded
            return []
        result = _call(spec, errors, run, chains, **config.thresholds(spec))
        if result is not None:
            ran.append(spec.name)
        return result or []
    try:
        findings, diagnoses = diagnose(run, findings, specs, read)
    except Exception as exc:  # the findings stand even when linking them fails
        errors.append(RuleError("diagnoses", "-", f"{type(exc).__name__}: {exc}"))
        findings = sorted(findings, key=lambda f: f.sort_key)
        diagnoses = [RootCause(f, fix=f.fix) for f in findings]
    return Diagnosis(run=run, findings=findings, skipped=skipped, errors=errors,
                     baseline=base, rules_run=ran, rules={s.name: s for s in specs},
                     diagnoses=diagnoses)
