"""loss-collapse: a loss that falls to near zero early and stays there."""
import numpy as np
from dynamics_frames import make_run, noisy_decay, scalar_rows

from tracelab.analyzers.loss_collapse import loss_collapse


def _collapsing(n=200, at=25, seed=0):
    rng = np.random.default_rng(seed)
    loss = np.concatenate([np.geomspace(1.4, 1e-5, at), 1e-5 * np.exp(rng.normal(0, .3, n - at))])
    return loss


def test_fires_on_a_loss_that_collapses_early_and_stays():
    [f] = loss_collapse(make_run(scalars=[scalar_rows("loss", _collapsing())]))
    assert f.code == "TL601" and f.severity.value == "warning"
    assert f.evidence["collapse_step"] < 25 and "leaked into the inputs" in f.message
    assert "derived from the target" in f.fix


def test_fires_on_a_loss_that_is_zero_from_the_start():
    [f] = loss_collapse(make_run(scalars=[scalar_rows("loss", np.zeros(80))]))
    assert f.evidence["collapse_step"] == 0


def test_names_the_validation_loss_when_it_collapsed_too():
    val = scalar_rows("loss", [0.5, 1e-5, 2e-5, 1e-5], split="val", steps=[49, 99, 149, 199])
    [f] = loss_collapse(make_run(scalars=[scalar_rows("loss", _collapsing()), val]))
    assert "the val loss collapsed too" in f.message


def test_quiet_when_only_the_train_loss_collapses_memorization():
    val = scalar_rows("loss", [1.2, 1.5, 1.9, 2.4], split="val", steps=[49, 99, 149, 199])
    assert loss_collapse(make_run(scalars=[scalar_rows("loss", _collapsing()), val])) == []


def test_quiet_on_converging_runs_and_late_or_shallow_drops():
    for seed in range(5):
        healthy = noisy_decay(300, start=2.3, floor=0.05, tau=40, seed=seed)
        assert loss_collapse(make_run(scalars=[scalar_rows("loss", healthy)])) == []
    late = np.concatenate([np.linspace(1.4, 0.5, 150), np.full(50, 1e-6)])
    shallow = np.concatenate([np.geomspace(1.4, 1e-3, 20), np.full(180, 1e-3)])
    bouncing = _collapsing()
    bouncing[60::2] = 0.8  # does not stay near zero
    for loss in (late, shallow, bouncing, np.zeros(30)):
        assert loss_collapse(make_run(scalars=[scalar_rows("loss", loss)])) == []


def test_quiet_on_losses_that_go_below_zero():
    # A Gaussian NLL falling from 1 to -3 passes through zero: every negative value was
    # "at most 1e-4 of the start", and the rule called it a leaked target.
    for seed in range(3):
        rng = np.random.default_rng(seed)
        t = np.arange(300)
        nll = 4 * np.exp(-t / 60) - 3 + rng.normal(0, 0.05, 300)
        val = scalar_rows("loss", nll[49::50] + 0.1, split="val", steps=list(range(49, 300, 50)))
        assert loss_collapse(make_run(scalars=[scalar_rows("loss", nll), val])) == []
    # the rule still fires when the collapse dips a hair below zero (a float rounding)
    dips = _collapsing()
    dips[40::7] = -1e-6
    [f] = loss_collapse(make_run(scalars=[scalar_rows("loss", dips)]))
    assert f.evidence["collapse_step"] < 25
