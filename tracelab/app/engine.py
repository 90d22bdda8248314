"""The analysis engine: one loop over the explicit rule list."""
from __future__ import annotations

import os
import traceback
from typing import Any, Iterable, Optional, Sequence

from tracelab.core.config import Config
from tracelab.core.errors import ConfigError, TraceError
from tracelab.core.findings import Diagnosis, Finding, RuleError, Skipped
from tracelab.core.rules import RuleSpec
from tracelab.core.run import Run, open_run


def all_rules() -> list[RuleSpec]:
    from tracelab.analyzers import RULES
    return [r.spec for r in RULES]


def find_rule(key: str) -> Optional[RuleSpec]:
    key = key.strip()
    for spec in all_rules():
        if key in (spec.name, spec.code) or key.upper() == spec.code:
            return spec
    return None


def _resolve(keys: Iterable[str], what: str) -> set[str]:
    names = set()
    for key in keys:
        spec = find_rule(key)
        if spec is None:
            raise ConfigError(f"{what}: unknown rule '{key}'; `tracelab rules` lists them")
        names.add(spec.name)
    return names


def _thresholds(spec: RuleSpec, config: Config) -> dict[str, Any]:
    given = dict(config.rules.get(spec.name, config.rules.get(spec.code, {})))
    allowed = spec.thresholds()
    for key, value in given.items():
        if key not in allowed:
            raise ConfigError(f"{config.source}: rule {spec.name} has no threshold '{key}'; "
                              f"expected one of {', '.join(allowed) or '(none)'}")
        default = allowed[key]
        # An int threshold (a window, a count) must stay an int: 50.0 would break the rule.
        if isinstance(default, bool) != isinstance(value, bool) or (
                isinstance(default, (int, float)) and not isinstance(value, (int, float))) or (
                isinstance(default, int) and not isinstance(value, int)):
            kind = type(default).__name__
            raise ConfigError(f"{config.source}: {spec.name}.{key} = {value!r}; expected "
                              f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} like {default!r}")
    return given


def _as_run(run: Run | str | os.PathLike) -> Run:
    return run if isinstance(run, Run) else open_run(run)


def analyze(run: Run | str | os.PathLike, *, config: Config | None = None,
            baseline: Run | str | os.PathLike | None = None,
            select: Sequence[str] | None = None,
            ignore: Sequence[str] | None = None) -> Diagnosis:
    """Run every selected rule over a run; findings sorted by severity, then step."""
    config = config or Config()
    run = _as_run(run)
    if run.is_empty:
        where = run.path or run.name
        raise TraceError(f"{where}: the run holds no recorded steps"
                         + (f" ({'; '.join(run.problems)})" if run.problems else ""))
    base = _as_run(baseline) if baseline is not None else None
    chosen = select if select is not None else config.select
    wanted = _resolve(chosen, "select") if chosen else None
    dropped = _resolve(list(config.ignore) + list(ignore or ()), "ignore")

    findings: list[Finding] = []
    skipped: list[Skipped] = []
    errors: list[RuleError] = []
    ran: list[str] = []
    specs = all_rules()
    for spec in specs:
        if (wanted is not None and spec.name not in wanted) or spec.name in dropped:
            continue
        kwargs = _thresholds(spec, config)
        missing = [r.label for r in spec.requires if r not in run.available]
        if missing:
            skipped.append(Skipped(spec.name, spec.code, "not recorded: " + ", ".join(missing)))
            continue
        if spec.uses_baseline:
            kwargs["baseline"] = base
        try:
            result = spec.func(run, **kwargs)
        except Exception as exc:  # a rule that breaks on odd data must not end the analysis
            where = traceback.extract_tb(exc.__traceback__)[-1]
            errors.append(RuleError(spec.name, spec.code, f"{type(exc).__name__}: {exc} "
                                    f"({os.path.basename(where.filename)}:{where.lineno})"))
            continue
        ran.append(spec.name)
        findings.extend(result)
    findings.sort(key=lambda f: f.sort_key)
    return Diagnosis(run=run, findings=findings, skipped=skipped, errors=errors,
                     baseline=base, rules_run=ran, rules={s.name: s for s in specs})
