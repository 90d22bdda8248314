"""Finding: what a rule reports. RootCause: one defect, its cause and the findings it explains.
Diagnosis: everything one analysis returns."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional

if TYPE_CHECKING:
    from tracelab.core.rules import RuleSpec


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for the worst."""
        return _RANK[self]

    @classmethod
    def parse(cls, value: "str | Severity") -> "Severity":
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown severity {value!r}; expected error, warning or info") from None


_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO


@dataclass(frozen=True)
class Finding:
    rule: str
    code: str
    severity: Severity
    subject: str
    steps: Optional[tuple[int, int]]
    message: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    fix: str = ""
    # Stable within one analysis and across runs of it: "TL102:loss:830-845". The engine
    # appends "#2", "#3" to the rare repeats so that ids are unique within one result.
    id: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", Severity.parse(self.severity))
        if self.steps is not None:
            object.__setattr__(self, "steps", (int(self.steps[0]), int(self.steps[1])))
        object.__setattr__(self, "evidence", {k: _plain(v) for k, v in self.evidence.items()})
        if not self.id:
            where = f"{self.steps[0]}-{self.steps[1]}" if self.steps else "-"
            object.__setattr__(self, "id", f"{self.code}:{self.subject}:{where}")

    @property
    def sort_key(self) -> tuple:
        first = self.steps[0] if self.steps else -1
        return (self.severity.rank, first, self.rule, self.subject)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["severity"] = self.severity.value
        d["steps"] = list(self.steps) if self.steps else None
        return d


def json_text(data: Any) -> str:
    """Strict JSON (RFC 8259): NaN becomes null and an infinity the string "inf" or "-inf",
    where json.dumps would write bare NaN/Infinity that strict parsers reject."""
    return json.dumps(_strict(data), indent=2, default=str, allow_nan=False) + "\n"


def _strict(value: Any) -> Any:
    if isinstance(value, float):
        if value != value:
            return None
        return value if abs(value) != float("inf") else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """Numpy scalars and the like to plain JSON-able Python values."""
    if hasattr(value, "item") and callable(value.item):
        try:
            value = value.item()
        except (ValueError, TypeError):
            pass
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class RootCause:
    """One defect: the finding that names its cause, the findings it explains (in causal
    order), how sure the diagnosis is and why, and the one fix, the cause's."""
    finding: Finding
    explains: tuple[Finding, ...] = ()
    confidence: float = 0.5
    basis: tuple[str, ...] = ()
    fix: str = ""
    # (cause id, effect id, why) of each causal link the diagnosis rests on: its chain.
    links: tuple[tuple[str, str, str], ...] = ()
    # The recorded facts that contradict what the fix presumes (tracelab.core.causes.Premise):
    # such a diagnosis ranks below every one that nothing contradicts.
    contradicted: tuple[str, ...] = ()

    @property
    def worst(self) -> Severity:
        return min((f.severity for f in (self.finding, *self.explains)), key=lambda s: s.rank)

    @property
    def level(self) -> str:
        """The confidence in words: high, medium or low."""
        return "high" if self.confidence >= 0.75 else "medium" if self.confidence >= 0.5 \
            else "low"

    def to_dict(self) -> dict[str, Any]:
        f = self.finding
        return {"id": f.id, "rule": f.rule, "code": f.code, "severity": self.worst.value,
                "subject": f.subject, "steps": list(f.steps) if f.steps else None,
                "message": f.message, "fix": self.fix,
                "confidence": round(self.confidence, 3), "level": self.level,
                "basis": list(self.basis), "explains": [e.id for e in self.explains],
                "links": [list(link) for link in self.links],
                "contradicted": list(self.contradicted)}


@dataclass
class RuleError:
    """A rule that broke on this run's data: reported, never fatal to the analysis."""
    rule: str
    code: str
    error: str


@dataclass
class Skipped:
    rule: str
    code: str
    reason: str  # NOT_RECORDED and what was not, for a rule whose data the run lacks


NOT_RECORDED = "not recorded: "


def _top_level_items(text: str) -> list[str]:
    """`text` split at the ", " that lie outside parentheses: an item's own advice
    ("rows (step(inputs=..., targets=...))") stays whole."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and text.startswith(", ", i):
            items.append(text[start:i])
            start = i + 2
    return items + [text[start:]]


def skipped_reasons(reasons: Iterable[str]) -> str:
    """Why rules were skipped, as one phrase: every kind of data not recorded, once and sorted
    ("not recorded: gradient stats, input stats"), then any other reason."""
    missing: set[str] = set()
    other: list[str] = []
    for reason in reasons:
        if reason.startswith(NOT_RECORDED):
            missing.update(_top_level_items(reason[len(NOT_RECORDED):]))
        elif reason not in other:
            other.append(reason)
    return "; ".join(([NOT_RECORDED + ", ".join(sorted(missing, key=str.lower))] if missing else []) + other)


@dataclass
class Diagnosis:
    run: Any  # tracelab.core.run.Run; Any keeps this module free of the reader's imports
    findings: list[Finding]
    skipped: list[Skipped]
    errors: list[RuleError]
    baseline: Any = None
    rules_run: list[str] = field(default_factory=list)
    # name -> spec of every rule the engine knew: the renderers read each finding's rule
    # documentation here instead of importing the analyzers.
    rules: Mapping[str, "RuleSpec"] = field(default_factory=dict)
    # The findings read as defects, most likely first: each finding is one diagnosis's root
    # cause or explained by one.
    diagnoses: list[RootCause] = field(default_factory=list)

    def cause_of(self, finding: Finding) -> Optional[RootCause]:
        """The diagnosis whose root cause is `finding` or that explains it."""
        for d in self.diagnoses:
            if d.finding.id == finding.id or any(e.id == finding.id for e in d.explains):
                return d
        return None

    @property
    def worst(self) -> Optional[Severity]:
        return min((f.severity for f in self.findings), key=lambda s: s.rank, default=None)

    def counts(self) -> dict[str, int]:
        return {s.value: sum(f.severity is s for f in self.findings) for s in Severity}

    def verdict(self) -> str:
        c = self.counts()
        parts = [f"{c[s.value]} {s.value}{'s' if c[s.value] != 1 else ''}" for s in Severity
                 if c[s.value]]
        text = ", ".join(parts) or "no problems found"
        # A clean verdict on half a log would mislead: say that part of it could not be read.
        unread = len(getattr(self.run, "problems", None) or ())
        if unread:
            text += f" in what could be read ({unread} part{'s' if unread != 1 else ''} not read)"
        return text

    def to_dict(self) -> dict[str, Any]:
        from tracelab._version import __version__
        return {
            "tracelab_version": __version__,
            "run": self.run.summary(),
            "baseline": self.baseline.summary() if self.baseline is not None else None,
            "verdict": {"worst": self.worst.value if self.worst else None,
                        "counts": self.counts(), "text": self.verdict()},
            "diagnoses": [d.to_dict() for d in self.diagnoses],
            "findings": [f.to_dict() for f in self.findings],
            "skipped": [asdict(s) for s in self.skipped],
            "errors": [asdict(e) for e in self.errors],
            "rules_run": list(self.rules_run),
        }
