"""Fixtures of the report tests: hand-built diagnoses (see report_data.py)."""
from __future__ import annotations

import pytest

from report_data import synthetic_diagnosis
from tracelab.core.findings import Diagnosis


@pytest.fixture
def diagnosis() -> Diagnosis:
    return synthetic_diagnosis()


@pytest.fixture
def evil_diagnosis() -> Diagnosis:
    return synthetic_diagnosis(evil=True, failed=True)
