"""End to end: two scenarios of the tuning set's half a, a healthy one and a faulty one, run
through benchmarks/calibration/tuning/run_all.py into a folder, open as recorded runs, and
their labels land in labels.json."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
pytest.importorskip("sklearn", reason="the scenarios' data is scikit-learn's digits")

import tracelab  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

_RUN_ALL = Path(__file__).parents[2] / "benchmarks" / "calibration" / "tuning" / "run_all.py"


def _run_all():
    spec = importlib.util.spec_from_file_location("tuning_run_all", _RUN_ALL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_healthy_and_a_faulty_scenario_record_runs_that_open(tmp_path, capsys):
    run_all = _run_all()
    assert {"a01", "a15"} <= set(run_all.scenario_names())

    assert run_all.main([str(tmp_path), "--only", "a01", "a15"]) == 0
    printed = capsys.readouterr().out
    assert "2 of 2 scenarios ran" in printed and "cause=shape-broadcast" in printed

    labels = json.loads((tmp_path / "labels.json").read_text())
    assert labels["a01"]["healthy"] is True and labels["a01"]["cause"] is None
    assert labels["a15"]["healthy"] is False and labels["a15"]["bug_source"].startswith("https://")

    healthy = tracelab.open_run(tmp_path / "a01")
    assert healthy.status["state"] == "completed" and healthy.last_step > 0
    loss = healthy.loss().dropna()
    assert loss.iloc[-10:].mean() < loss.iloc[:10].mean() / 2  # the healthy run learns

    faulty = tracelab.open_run(tmp_path / "a15")
    assert faulty.status["state"] == "completed" and faulty.last_step > 0
    assert not faulty.problems


def test_run_all_refuses_an_unknown_scenario_and_a_folder_holding_its_run(tmp_path, capsys):
    run_all = _run_all()
    assert run_all.main([str(tmp_path), "--only", "zz99"]) == 2
    assert "no scenario named zz99" in capsys.readouterr().err

    (tmp_path / "a15").mkdir()
    assert run_all.main([str(tmp_path), "--only", "a15"]) == 2
    assert "already holds runs of a15" in capsys.readouterr().err
