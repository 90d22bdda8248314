"""A loss whose objective moves with the model (bootstrapped TD targets, a game's opponent) is
no fixed objective: its rise and swings tell no overshoot unless the optimization's own facts
do (NaN/Inf, updates 100x the usual size, a learning rate raised tenfold mid-run)."""
from __future__ import annotations

import pytest

from tracelab.analyzers._learning_rate import (loss_level_uninformative, moving_targets,
                                               overshoot_facts)


def _td(path, *, lr: float, bootstrap: bool = True, steps: int = 300):
    """A real tiny Q regression (_contract_runs.q_regression), reward 1: bootstrapped targets
    rise with the Q-values toward 10, as a DQN's do; fixed ones come from one data set."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from _contract_runs import q_regression
    return q_regression(path, reward=1.0, lr=lr, bootstrap=bootstrap, steps=steps)


def test_bootstrapped_targets_move_with_the_model_and_a_data_set_s_do_not(tmp_path):
    run = _td(tmp_path / "td", lr=1e-2)  # skipped without torch
    assert moving_targets(run) and not overshoot_facts(run)
    assert loss_level_uninformative(run)
    fixed = _td(tmp_path / "fixed", lr=1e-2, bootstrap=False)
    assert not moving_targets(fixed) and not loss_level_uninformative(fixed)


def test_a_moving_objective_still_counts_an_overshoot_the_optimization_shows(tmp_path):
    run = _td(tmp_path / "td", lr=3.0)  # skipped without torch
    assert overshoot_facts(run) and not loss_level_uninformative(run)


def test_the_level_votes_abstain_on_a_moving_objective(tmp_path, monkeypatch):
    """learning-rate-too-high's loss-level votes (a rise under the first updates, swings) do
    not count where the objective moves; the same run read as a fixed objective casts them."""
    import importlib
    module = importlib.import_module("tracelab.analyzers.learning_rate_too_high")
    from tracelab.core.findings import WARNING, Finding

    run = _td(tmp_path / "td", lr=1e-2)  # skipped without torch
    swing = Finding("loss-oscillation", "TL101", WARNING, "loss", (200, 299), "swings",
                    {"p10": 1.0, "p90": 9.0})
    rose = (1, 30, 5.0, "median")
    assert module._votes(run, [swing], 100.0, 10, rose) == {}
    for guard in ("loss_level_uninformative", "targets_level_uninformative",
                  "copy_level_uninformative"):
        monkeypatch.setattr(module, guard, lambda run: False)
    assert {"oscillation", "worse"} <= set(module._votes(run, [swing], 100.0, 10, rose))
