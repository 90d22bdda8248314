"""The kinds of log a run can be read from, and Source: a run's kind and where it was read.

A Run keeps its Source, so what depends on the kind (where a report goes: next to a tracelab
run, never next to another logger's files) asks the run instead of probing the disk again.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

NATIVE, TENSORBOARD, CSV = "tracelab", "tensorboard", "csv"
MLFLOW, WANDB = "mlflow", "wandb"
FORMATS = (NATIVE, TENSORBOARD, CSV, MLFLOW, WANDB)


@dataclass(frozen=True)
class Source:
    path: Path
    format: str
    # One run inside a store that holds several (an MLflow SQLite database: the run's id).
    key: Optional[str] = None

    @property
    def imported(self) -> bool:
        """Read from another logger's files, in memory: tracelab never writes next to them."""
        return self.format != NATIVE
