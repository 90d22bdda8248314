"""End to end: the tuning set's half b. Every scenario's label names a known cause, family and
optimizer; a healthy scenario (d2l's house prices on a pandas table) and a faulty one (the
MNIST CNN without zero_grad) record runs that open and hold their steps."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
pytest.importorskip("sklearn", reason="the scenarios' data is scikit-learn's digits")

import tracelab  # noqa: E402

_TUNING = Path(__file__).parents[2] / "benchmarks" / "calibration" / "tuning"
_CAUSES = _TUNING.parent / "CAUSES.md"
FAMILIES = {"cnn", "rnn", "transformer", "vae", "gan", "rl", "tabular", "contrastive", "mlp"}
OPTIMIZERS = {"sgd", "adam", "adamw", "adadelta", "lbfgs", "rmsprop", "manual"}


def _scenario(name: str):
    if str(_TUNING) not in sys.path:
        sys.path.insert(0, str(_TUNING))
    spec = importlib.util.spec_from_file_location(f"tuning_{name}", _TUNING / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _names() -> list[str]:
    return sorted(p.stem for p in _TUNING.glob("b[0-9][0-9].py"))


def test_every_label_names_a_known_cause_family_and_optimizer():
    causes = set(re.findall(r"^\| ([a-z-]+) \|", _CAUSES.read_text(), flags=re.M)) - {"key"}
    names = _names()
    assert len(names) >= 24
    labels = {name: _scenario(name).LABEL for name in names}
    for name, label in labels.items():
        assert label["family"] in FAMILIES, name
        assert label["optimizer"] in OPTIMIZERS, name
        assert label["loss_reduction"] in {"mean", "sum"}, name
        assert label["source"].startswith("https://github.com/"), name
        if label["healthy"]:
            assert label["cause"] is None and label["bug_source"] is None, name
        else:
            assert label["cause"] in causes, name
            assert label["bug_source"].startswith("http"), name
    faulty = [label for label in labels.values() if not label["healthy"]]
    assert len(faulty) >= 14 and len(labels) - len(faulty) >= 10
    assert sum(label["cause"] == "lr-too-high" for label in faulty) <= 3


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_a_healthy_and_a_faulty_scenario_record_runs_that_open(tmp_path):
    _scenario("b15").run(str(tmp_path / "b15"), seed=0)
    _scenario("b02").run(str(tmp_path / "b02"), seed=0)

    healthy = tracelab.open_run(tmp_path / "b15")
    assert healthy.status["state"] == "completed" and healthy.last_step > 0
    assert not healthy.problems
    loss = healthy.loss().dropna()
    assert loss.iloc[-10:].mean() < loss.iloc[:10].mean() / 10  # the healthy run learns
    assert "val" in healthy.splits()

    faulty = tracelab.open_run(tmp_path / "b02")
    assert faulty.status["state"] == "completed" and faulty.last_step > 0
    assert not faulty.problems
