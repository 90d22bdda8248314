"""The rule decorator and the metadata it attaches. Registration is the explicit list
`tracelab.analyzers.RULES`; this module only describes rules."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from tracelab.core.findings import Finding
from tracelab.core.schema import Requirement

DOC_SECTIONS = ("What it detects", "Why it matters", "Example", "How to fix", "False positives")


@dataclass(frozen=True)
class RuleSpec:
    name: str
    code: str
    requires: tuple[Requirement, ...]
    func: Callable[..., list[Finding]]

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


def rule(*, name: str, code: str, requires: tuple[Requirement, ...] = ()) -> Callable:
    """Attach rule metadata to a pure function `f(run, *, thresholds...) -> list[Finding]`.

    The function gains `.spec` and `.finding(...)`, a Finding constructor with rule and code
    filled in. Nothing is registered here.
    """
    def decorate(func: Callable[..., list[Finding]]) -> Callable[..., list[Finding]]:
        func.spec = RuleSpec(name=name, code=code, requires=tuple(requires), func=func)
        func.finding = partial(Finding, name, code)
        return func
    return decorate
