"""The demo scenarios, end to end: each planted defect is found, the healthy run stays clean."""
import pytest

import tracelab
from tracelab.app.demo import SCENARIOS, run_demo
from tracelab.core.findings import Severity

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def diagnoses(tmp_path_factory):
    out = {}
    for name, scenario in SCENARIOS.items():
        run_dir = tmp_path_factory.mktemp("demo") / name
        scenario.train(run_dir)
        out[name] = tracelab.analyze(run_dir)
    return out


def test_healthy_run_has_no_warning_or_error(diagnoses):
    alarming = [f for f in diagnoses["healthy"].findings if f.severity is not Severity.INFO]
    assert alarming == []
    assert diagnoses["healthy"].errors == []


@pytest.mark.parametrize("name", [n for n, s in SCENARIOS.items() if s.expect])
def test_the_first_diagnosis_is_the_planted_defect(diagnoses, name):
    diagnosis = diagnoses[name]
    first = diagnosis.diagnoses[0]
    assert first.finding.rule == SCENARIOS[name].expect, [
        (d.finding.rule, d.finding.message) for d in diagnosis.diagnoses]
    assert first.worst is not Severity.INFO and first.fix
    assert diagnosis.errors == []
    # Every finding is the root of one diagnosis or explained by one.
    covered = [d.finding.id for d in diagnosis.diagnoses] + [
        e.id for d in diagnosis.diagnoses for e in d.explains]
    assert sorted(covered) == sorted(f.id for f in diagnosis.findings)


def test_the_learning_rate_diagnosis_gives_its_numbers(diagnoses):
    first = diagnoses["lr_too_high"].diagnoses[0]
    assert "0.3" in first.finding.message and "1e-3" in first.finding.message
    assert "Lower the learning rate" in first.fix
    assert {"loss-spike", "dead-units"} <= {e.rule for e in first.explains}


def test_demo_command_writes_reports_and_an_index(tmp_path, capsys):
    assert run_demo(tmp_path, only=["healthy"]) == 0
    printed = capsys.readouterr().out
    index = tmp_path / "index.html"
    assert index.exists() and f"Demo reports: {index.resolve()}" in printed
    reports = list(tmp_path.glob("healthy-*/report.html"))
    assert len(reports) == 1 and reports[0].parent.name in index.read_text()
