"""The kinds of log a run can be read from, and Source: a run's kind and where it was read.

A Run keeps its Source, so what depends on the kind (where a report goes: next to a tracelab
run, never next to another logger's files) asks the run instead of probing the disk again.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

NATIVE, TENSORBOARD, CSV = "tracelab", "tensorboard", "csv"


@dataclass(frozen=True)
class Source:
    path: Path
    format: str

    @property
    def imported(self) -> bool:
        """Read from another logger's files, in memory: tracelab never writes next to them."""
        return self.format != NATIVE
