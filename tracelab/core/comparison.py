"""The result of comparing two runs (`tracelab diff`): plain data that the diff renderers draw.

The comparison itself is `tracelab.app.diff`; this module only describes what it finds.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from tracelab.core.findings import Finding
from tracelab.core.schema import LOSS_NAME, TRAIN

# Ranks of a setup difference: how likely it is to change the numbers a run produces.
CAUSE, VERSION, INCIDENTAL = 0, 1, 2
RANK_LABEL = {CAUSE: "cause", VERSION: "version", INCIDENTAL: "incidental"}


@dataclass
class Change:
    section: str            # config, environment, optimizer, model
    key: str
    a: Any
    b: Any
    rank: int = CAUSE
    note: str = ""

    @property
    def label(self) -> str:
        return f"{self.section}.{self.key}"

    def text(self) -> str:
        note = f" ({self.note})" if self.note else ""
        return f"{self.label}: {show(self.a)} → {show(self.b)}{note}"


@dataclass
class SeriesDiff:
    split: str
    name: str
    common_steps: int
    first_step: Optional[int]        # first common step beyond tolerance
    a_at: Optional[float]
    b_at: Optional[float]
    max_rel_diff: float
    final_a: Optional[float]
    final_b: Optional[float]


@dataclass
class LayerDiff:
    name: str
    common_steps: int
    median_ratio: float              # median over common steps of norm_B / norm_A
    max_ratio: float
    min_ratio: float
    first_step: Optional[int]        # first step beyond tolerance


@dataclass
class FeatureDiff:
    split: str
    feature: str
    a: dict[str, Any]
    b: dict[str, Any]
    why: list[str]


@dataclass
class RunDiff:
    a: str
    b: str
    rtol: float
    atol: float
    changes: list[Change] = field(default_factory=list)
    series: list[SeriesDiff] = field(default_factory=list)
    layers: list[LayerDiff] = field(default_factory=list)
    layers_only: dict[str, list[str]] = field(default_factory=dict)
    drift: list[Finding] = field(default_factory=list)
    drift_note: str = ""
    features: list[FeatureDiff] = field(default_factory=list)
    only_a: list[Finding] = field(default_factory=list)
    only_b: list[Finding] = field(default_factory=list)
    shared_findings: int = 0
    notes: list[str] = field(default_factory=list)
    # what could not be read of each run ("A", "B"): the comparison covers the rest only
    unreadable: dict[str, list[str]] = field(default_factory=dict)

    @property
    def causes(self) -> list[Change]:
        """Setup differences that can change results; versions when nothing else differs."""
        for rank in (CAUSE, VERSION):
            found = [c for c in self.changes if c.rank == rank]
            if found:
                return found
        return []

    @property
    def loss(self) -> Optional[SeriesDiff]:
        return next((s for s in self.series if (s.split, s.name) == (TRAIN, LOSS_NAME)), None)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["causes"] = [c.label for c in self.causes]
        for key in ("drift", "only_a", "only_b"):
            d[key] = [f.to_dict() for f in getattr(self, key)]
        for c in d["changes"]:
            c["rank"] = RANK_LABEL[c["rank"]]
        return d


def show(value: Any) -> str:
    if value is MISSING:
        return "(absent)"
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value) if isinstance(value, str) else str(value)


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


MISSING = _Missing()
