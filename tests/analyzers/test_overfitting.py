"""overfitting: validation loss rising while the train loss falls fires and gives the best step."""
import numpy as np
import pytest
from dynamics_frames import make_run, noisy_decay, scalar_rows

from tracelab.analyzers.overfitting import overfitting

STEPS = list(range(24, 1000, 25))  # an evaluation every 25 steps


def _run(val, train=None, split="val"):
    train = noisy_decay(1000, floor=0.01, tau=150, noise=0.1) if train is None else train
    return make_run(scalars=[scalar_rows("loss", train),
                             scalar_rows("loss", val, split=split, steps=STEPS)])


def _u_shaped(best_at=12, seed=0):
    rng = np.random.default_rng(seed)
    x = np.arange(len(STEPS))
    val = 0.5 + 0.004 * (x - best_at) ** 2
    return val * np.exp(0.02 * rng.standard_normal(len(STEPS)))


def test_fires_and_reports_the_best_step():
    [f] = overfitting(_run(_u_shaped()))
    assert f.code == "TL105" and f.severity.value == "warning" and f.subject == "val loss"
    assert abs(f.evidence["best_step"] - STEPS[12]) <= 25
    assert f.steps == (f.evidence["best_step"], STEPS[-1])
    assert f.evidence["final_val_loss"] > 1.1 * f.evidence["best_val_loss"]
    assert f"step {f.evidence['best_step']}" in f.fix


def test_finds_a_validation_split_by_another_name():
    [f] = overfitting(_run(_u_shaped(), split="valid"))
    assert f.subject == "valid loss"


@pytest.mark.parametrize("seed", range(10))
def test_quiet_on_a_noisy_but_flat_validation_loss(seed):
    rng = np.random.default_rng(seed)
    val = 0.4 * np.exp(0.08 * rng.standard_normal(len(STEPS)))
    assert overfitting(_run(val)) == []


def test_quiet_when_validation_stays_below_train():
    train = noisy_decay(1000, start=0.7, floor=0.1, tau=100, noise=0.3)
    val = np.linspace(0.07, 0.082, len(STEPS))  # rising a little, yet below the train loss
    assert overfitting(_run(val, train)) == []


def test_quiet_when_the_train_loss_rises_too():
    train = np.linspace(0.5, 2.0, 1000)
    assert overfitting(_run(_u_shaped(), train)) == []


def test_quiet_when_only_the_last_evaluation_is_high():
    val = np.linspace(0.8, 0.3, len(STEPS))
    val[-1] = 0.6
    assert overfitting(_run(val)) == []
