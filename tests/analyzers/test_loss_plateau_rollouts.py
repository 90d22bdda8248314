"""loss-plateau on a real tiny training stepped K times on each batch (PPO's K epochs over one
rollout): each rollout's returns are normalized anew, so the loss's level from one batch to the
next does not fall, while on each batch held fixed it does. Quiet where the loss falls on the
batches it holds and gradients and updates are ordinary; reported where a recorded fact says
why it does not fall (updates far too small for the weights, a learning rate of 1e-7)."""
import pytest

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from tracelab.analyzers._learning_rate import descends_per_batch  # noqa: E402
from tracelab.analyzers.loss_plateau import loss_plateau  # noqa: E402

ROLLOUTS, K = 30, 10


def _rollouts(path, lr, offset=0.0):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    with tracelab.Recorder(str(path), model=model, optimizer=opt) as rec:
        for _ in range(ROLLOUTS):
            states = torch.randn(256, 4, generator=g)
            returns = torch.randn(256, generator=g)
            returns = (returns - returns.mean()) / returns.std()
            for _ in range(K):
                loss = 0.5 * ((model(states)[:, 0] - returns) ** 2).mean() - offset
                opt.zero_grad()
                loss.backward()
                opt.step()
                rec.step(loss=loss, inputs=states, targets=returns)
    return tracelab.open_run(path)


def test_quiet_where_the_loss_falls_on_each_batch_it_holds(tmp_path):
    run = _rollouts(tmp_path / "ppo", lr=3e-2)
    assert descends_per_batch(run)
    assert loss_plateau(run) == []


def test_fires_where_the_updates_are_far_too_small(tmp_path):
    run = _rollouts(tmp_path / "slow", lr=1e-7)
    [f] = loss_plateau(run)
    assert f.rule == "loss-plateau" and f.evidence["steps"] == ROLLOUTS * K
    assert f.evidence["update_ratio"] < 1e-5 and "learning rate" in f.message


def test_a_loss_that_dips_below_zero_still_reads_as_descending(tmp_path):
    # PPO's loss (surrogate + value loss - entropy bonus) crosses zero: two negative losses'
    # ratio is positive, and one that fell further below zero must not read as a rise
    run = _rollouts(tmp_path / "negative", lr=3e-2, offset=0.475)
    loss = run.loss().to_numpy()
    assert (loss < 0).sum() >= 5 and (loss > 0).sum() >= 200
    assert descends_per_batch(run)
    assert loss_plateau(run) == []
