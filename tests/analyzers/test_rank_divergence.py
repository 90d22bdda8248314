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


def _weight_rows(per_rank: dict[int, np.ndarray], names=("fc1.weight", "fc2.weight"),
                 steps=STEPS):
    """Weight statistics per rank: `per_rank[r]` scales every statistic of rank r's weights at
    each step (ones for a replica identical to the others)."""
    rows = []
    for rank, scale in per_rank.items():
        for i, name in enumerate(names):
            base = 1.0 + 0.01 * steps + i
            rows.append(pd.DataFrame({"step": steps, "kind": "weight", "name": name,
                                      "numel": 64, "norm": 8 * base * scale,
                                      "mean": 0.1 * base * scale, "min": -2 * base * scale,
                                      "max": 2 * base * scale, "rank": rank}))
    return pd.concat(rows, ignore_index=True)


def _replicas(weights, n_ranks=2, grads=None, meta=None, seed=8):
    rng = np.random.default_rng(seed)
    tensors = [_weight_rows(weights)]
    tensors.append(_grad_rows(grads if grads is not None else _synced_grads(n_ranks, rng)))
    return Run.from_frames(meta, scalars=_loss_rows(_healthy(n_ranks, rng)),
                           tensors=pd.concat(tensors, ignore_index=True))


def test_weights_that_differ_at_one_late_step_are_an_error_from_that_step():
    # Gradients all-reduced and identical, but rank 1's weights move off at step 70 (its
    # learning rate changed there): a median over the run would not see it.
    drift = np.ones(len(STEPS))
    drift[70:] = 1 + 1e-3 * np.arange(1, 51)
    [f] = rank_divergence(_replicas({0: np.ones(len(STEPS)), 1: drift}))
    assert (f.severity, f.subject, f.steps) == (ERROR, "rank 1", (70, 119))
    assert f.evidence["first_step"] == 70 and f.evidence["steps_differing"] == 50
    assert "from step 70 on" in f.message and "though the gradients agree" in f.message
    assert "on every rank" in f.fix and "step 70" in f.fix


def test_a_single_differing_step_is_enough():
    drift = np.ones(len(STEPS))
    drift[90] = 1 + 1e-4
    [f] = rank_divergence(_replicas({0: np.ones(len(STEPS)), 1: drift}))
    assert f.evidence["first_step"] == 90 and f.evidence["steps_differing"] == 1


def test_float_rounding_between_identical_replicas_stays_quiet():
    rng = np.random.default_rng(9)
    noise = {r: 1 + 1e-7 * rng.standard_normal(len(STEPS)) for r in range(4)}
    assert rank_divergence(_replicas(noise, n_ranks=4)) == []


def test_among_four_ranks_the_one_that_differs_is_named():
    weights = {r: np.ones(len(STEPS)) for r in range(4)}
    weights[2] = np.full(len(STEPS), 1.01)  # started from other weights (a checkpoint)
    [f] = rank_divergence(_replicas(weights, n_ranks=4))
    assert f.subject == "rank 2" and f.evidence["first_step"] == 0


def test_unsynchronized_replicas_are_one_error_with_the_ddp_fix():
    rng = np.random.default_rng(10)
    grads = {r: 1.0 + 0.3 * rng.random(len(STEPS)) for r in range(2)}
    weights = {0: np.ones(len(STEPS)), 1: 1 + 0.01 * rng.random(len(STEPS))}
    [f] = rank_divergence(_replicas(weights, grads=grads))
    assert f.subject == "rank 1" and "not averaged" in f.message
    assert f.fix.startswith("Wrap the model in DistributedDataParallel")
    assert f.evidence["median_relative_difference"] > 0.05


def test_shards_and_parameters_of_some_ranks_are_not_replicas():
    differ = {0: np.ones(len(STEPS)), 1: np.full(len(STEPS), 1.5)}
    # FSDP2: every rank holds its own shard of these parameters, by design.
    sharded = {"sharded_parameters": ["fc1.weight", "fc2.weight"]}
    assert rank_divergence(_replicas(differ, meta=sharded)) == []
    flat = _weight_rows(differ, names=("_fsdp_wrapped_module._flat_param",))
    stage = _weight_rows({1: np.ones(len(STEPS))}, names=("head.weight",))
    rng = np.random.default_rng(11)
    run = Run.from_frames(scalars=_loss_rows(_healthy(2, rng)),
                          tensors=pd.concat([flat, stage, _weight_rows(
                              {0: np.ones(len(STEPS)), 1: np.ones(len(STEPS))})],
                              ignore_index=True))
    assert rank_divergence(run) == []
    # Replicas averaged only now and then (local SGD): the check is turned off by config.
    assert rank_divergence(_replicas(differ), weight_rtol=float("inf")) == []
