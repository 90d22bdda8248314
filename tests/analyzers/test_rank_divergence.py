"""rank-divergence (TL501) on in-memory distributed runs."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tracelab.analyzers.rank_divergence import rank_divergence
from tracelab.core.findings import ERROR, WARNING
from tracelab.core.run import Run

STEPS = np.arange(120)


def _curve(steps=STEPS):
    return 2.0 * np.exp(-steps / 40) + 0.4


def _loss_rows(per_rank: dict[int, np.ndarray]) -> pd.DataFrame:
    return pd.concat([pd.DataFrame({"step": np.arange(len(v)), "split": "train", "name": "loss",
                                    "value": v, "rank": r}) for r, v in per_rank.items()],
                     ignore_index=True)


def _grad_rows(per_rank: dict[int, np.ndarray], names=("fc1.weight", "fc2.weight")):
    rows = []
    for rank, norms in per_rank.items():
        for i, name in enumerate(names):
            rows.append(pd.DataFrame({"step": np.arange(len(norms)), "kind": "grad",
                                      "name": name, "numel": 16, "norm": norms * (i + 1),
                                      "rank": rank}))
    return pd.concat(rows, ignore_index=True)


def _healthy(n_ranks, rng, noise=0.15):
    # Each rank's loss is the same curve plus its own batch's sampling noise.
    return {r: _curve() * (1 + noise * rng.standard_normal(len(STEPS))) for r in range(n_ranks)}


def _synced_grads(n_ranks, rng):
    shared = 1.0 + 0.3 * rng.random(len(STEPS))
    # All-reduced gradients agree up to float rounding.
    return {r: shared * (1 + 1e-7 * rng.standard_normal(len(STEPS))) for r in range(n_ranks)}


@pytest.mark.parametrize("n_ranks", [2, 4])
def test_quiet_on_healthy_noisy_ranks(n_ranks):
    for seed in range(10):
        rng = np.random.default_rng(seed)
        run = Run.from_frames(scalars=_loss_rows(_healthy(n_ranks, rng)),
                              tensors=_grad_rows(_synced_grads(n_ranks, rng)))
        assert rank_divergence(run) == [], seed


def test_fires_on_a_data_skewed_rank_among_four():
    rng = np.random.default_rng(1)
    losses = _healthy(4, rng)
    losses[2] = losses[2] * 1.4
    found = rank_divergence(Run.from_frames(scalars=_loss_rows(losses)))
    assert [(f.severity, f.subject) for f in found] == [(WARNING, "rank 2")]
    f = found[0]
    assert f.code == "TL501" and f.steps == (0, 119)
    assert f.evidence["relative_gap"] == pytest.approx(0.4, abs=0.1)
    assert "above" in f.message


@pytest.mark.parametrize("skewed", [0, 1])
def test_two_ranks_name_the_higher_loss(skewed):
    rng = np.random.default_rng(2)
    losses = _healthy(2, rng)
    losses[skewed] = losses[skewed] * 1.5
    found = rank_divergence(Run.from_frames(scalars=_loss_rows(losses)))
    assert [f.subject for f in found] == [f"rank {skewed}"]


def test_fires_on_a_drift_that_starts_mid_run():
    rng = np.random.default_rng(3)
    losses = _healthy(2, rng, noise=0.05)
    losses[1][70:] *= 1.5
    found = rank_divergence(Run.from_frames(scalars=_loss_rows(losses)))
    assert [f.subject for f in found] == ["rank 1"]
    assert found[0].steps == (60, 119)


def test_quiet_on_a_tiny_steady_gap_after_convergence():
    # Both ranks fit their shards; one shard keeps a hair more loss. Nothing to act on.
    steps = STEPS
    base = 2.0 * np.exp(-steps / 10) + 1e-4
    losses = {0: base, 1: base + 5e-5 * (steps > 30)}
    assert rank_divergence(Run.from_frames(scalars=_loss_rows(losses))) == []


def test_fires_on_unsynchronized_gradients():
    rng = np.random.default_rng(4)
    losses = _healthy(2, rng)
    grads = {r: 1.0 + 0.3 * rng.random(len(STEPS)) for r in range(2)}
    found = rank_divergence(Run.from_frames(scalars=_loss_rows(losses),
                                            tensors=_grad_rows(grads)))
    assert [(f.severity, f.subject) for f in found] == [(ERROR, "rank 1")]
    assert found[0].evidence["median_relative_difference"] > 0.05


def test_grads_compare_only_parameters_every_rank_holds():
    rng = np.random.default_rng(5)
    grads = _grad_rows(_synced_grads(2, rng))
    extra = grads[grads["rank"] == 1].assign(name="head.weight", norm=50.0)
    run = Run.from_frames(scalars=_loss_rows(_healthy(2, rng)),
                          tensors=pd.concat([grads, extra], ignore_index=True))
    assert rank_divergence(run) == []


def test_nonfinite_steps_are_left_to_other_rules():
    rng = np.random.default_rng(6)
    losses = _healthy(2, rng)
    losses[1][50:55] = np.nan
    losses[0][80] = np.inf
    assert rank_divergence(Run.from_frames(scalars=_loss_rows(losses))) == []


def test_single_rank_and_empty_runs_are_quiet():
    rng = np.random.default_rng(7)
    single = _loss_rows({0: _healthy(1, rng)[0]}).drop(columns="rank")
    assert rank_divergence(Run.from_frames(scalars=single)) == []
    assert rank_divergence(Run.from_frames()) == []
    short = _loss_rows({0: _curve()[:10], 1: 2 * _curve()[:10]})
    assert rank_divergence(Run.from_frames(scalars=short)) == []
