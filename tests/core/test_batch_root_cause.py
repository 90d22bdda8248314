"""The root cause a batch row names: the analysis' own when it names one, else the first
finding at warning or above."""
from types import SimpleNamespace

from tracelab.app.batch import root_cause
from tracelab.core.findings import Diagnosis, Finding


def _finding(rule, severity, first):
    return Finding(rule, "TL000", severity, "loss", (first, first + 1), "message")


def _diagnosis(*findings):
    return Diagnosis(run=None, findings=list(findings), skipped=[], errors=[])


def test_first_warning_or_worse_in_sorted_order():
    info = _finding("metric-stagnation", "info", 0)
    late, early = _finding("loss-spike", "warning", 50), _finding("loss-plateau", "warning", 5)
    assert root_cause(_diagnosis(info, late, early)) is early
    assert root_cause(_diagnosis(info)) is None
    assert root_cause(_diagnosis()) is None


def test_the_analysis_root_cause_comes_first():
    diagnosis = _diagnosis(_finding("loss-spike", "error", 0))
    named = _finding("vanishing-gradients", "warning", 3)
    diagnosis.diagnoses = [SimpleNamespace(finding=named)]
    assert root_cause(diagnosis) is named
