"""loss-oscillation: a swinging loss with no downward trend fires; minibatch noise does not."""
import numpy as np
import pytest
from dynamics_frames import make_run, model_meta, noisy_decay, scalar_rows, tensor_rows

from tracelab.analyzers.loss_oscillation import loss_oscillation


def _run(values):
    return make_run(scalars=[scalar_rows("loss", values)])


def test_fires_when_the_loss_swings_above_its_start():
    rng = np.random.default_rng(0)
    values = np.concatenate([[1.4] * 5, rng.uniform(3.0, 15.0, 295)])  # lr far too high
    [f] = loss_oscillation(_run(values))
    assert f.code == "TL101" and f.severity.value == "warning" and f.subject == "loss"
    assert f.evidence["swing"] > 0.25 and f.evidence["progress"] < 0
    assert f.steps == (200, 299)
    assert "without a downward trend (against 1.4 at the start)" in f.message


def test_fires_when_the_loss_bounces_back_far_above_its_best():
    rng = np.random.default_rng(1)
    down = np.linspace(2.3, 0.3, 100) * np.exp(0.1 * rng.standard_normal(100))
    values = np.concatenate([down, rng.uniform(0.6, 1.6, 200)])
    [f] = loss_oscillation(_run(values))
    assert "at its best near step" in f.message
    assert f.evidence["median"] > 1.75 * f.evidence["best_level"]


@pytest.mark.parametrize("seed", range(5))
def test_quiet_on_a_noisy_loss_still_falling_to_its_best_at_the_end(seed):
    # Batch-of-one noise around a loss that only starts falling halfway and reaches its
    # lowest level at the very end: the last third's median sits far above that final best,
    # but it is the descent within the last third, not a rebound from an earlier best.
    rng = np.random.default_rng(seed)
    mean = np.concatenate([np.full(1500, 1.8), np.linspace(1.8, 0.1, 1500)])
    values = mean * np.exp(0.5 * rng.standard_normal(3000))
    assert loss_oscillation(_run(values)) == []
    # The same descent thrown back up after its best still fires.
    down = np.concatenate([np.full(500, 1.8), np.linspace(1.8, 0.2, 1500), np.full(1000, 0.8)])
    back = down * np.exp(0.5 * rng.standard_normal(3000))
    [f] = loss_oscillation(_run(back))
    assert f.evidence["median"] > 1.75 * f.evidence["best_level"]


@pytest.mark.parametrize("seed", range(5))
def test_quiet_on_the_minibatch_noise_of_a_converging_run(seed):
    values = noisy_decay(400, noise=0.35, seed=seed)
    assert loss_oscillation(_run(values)) == []


@pytest.mark.parametrize("seed", range(5))
def test_quiet_on_heavy_noise_at_a_low_level(seed):
    # A small GRU with SGD: 0.69 down to about 0.15, batch losses from 0.04 to 0.6.
    values = noisy_decay(300, start=0.69, floor=0.15, tau=40, noise=0.6, seed=seed)
    assert loss_oscillation(_run(values)) == []


def test_quiet_on_a_converged_run_with_noise_near_zero():
    values = noisy_decay(600, start=2.3, floor=0.02, tau=30, noise=0.6, seed=3)
    assert loss_oscillation(_run(values)) == []


def test_quiet_on_a_flat_loss_with_small_noise():
    rng = np.random.default_rng(2)
    values = 1.386 + 0.03 * rng.standard_normal(300)  # a plateau, not an oscillation
    assert loss_oscillation(_run(values)) == []


def test_quiet_on_short_or_negative_losses():
    rng = np.random.default_rng(3)
    assert loss_oscillation(_run(rng.uniform(3, 15, 30))) == []
    assert loss_oscillation(_run(rng.uniform(-5, 5, 300))) == []


def _swinging_with_updates(ratio):
    rng = np.random.default_rng(0)
    values = np.concatenate([[1.4] * 5, rng.uniform(1.0, 3.0, 295)])
    n = len(values)
    tensors = [tensor_rows("weight", {"fc.weight": {"norm": [2.0] * n}}),
               tensor_rows("update", {"fc.weight": {"norm": [2.0 * ratio] * n}})]
    return make_run(model_meta([("fc.weight", (4, 8))]), scalars=[scalar_rows("loss", values)],
                    tensors=tensors)


def test_quiet_when_the_weights_no_longer_move():
    # A dead network: batch-to-batch sampling noise, not an optimizer overshooting.
    assert loss_oscillation(_swinging_with_updates(0.0)) == []
    [f] = loss_oscillation(_swinging_with_updates(0.05))
    assert f.code == "TL101"


def test_threshold_can_be_raised():
    rng = np.random.default_rng(0)
    values = np.concatenate([[1.4] * 5, rng.uniform(3.0, 15.0, 295)])
    assert loss_oscillation(_run(values), min_swing=5.0) == []


# -- real tiny trainings: a GAN's two optimizers -------------------------------------------------
def _gan(tmp_path, name, **kw):
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from _gan_training import train
    return train(tmp_path / name, **kw)


def test_a_gan_s_swinging_loss_is_the_game_s_and_the_same_losses_of_one_optimizer_fire(
        tmp_path):
    import tracelab
    path = _gan(tmp_path, "gan", steps=800, seed=5)  # skipped without torch
    from _gan_training import one_optimizer
    assert loss_oscillation(tracelab.open_run(path)) == []  # two players swing it by design
    [f] = loss_oscillation(tracelab.open_run(one_optimizer(path, tmp_path / "one")))
    assert f.evidence["swing"] >= 0.25


def test_a_gan_s_loss_that_grows_still_fires(tmp_path):
    import tracelab
    from tracelab.analyzers._learning_rate import adversarial_game, optimizers_holding
    # Both learning rates raised 100x at step 300: the summed loss leaves its range upward.
    run = tracelab.open_run(_gan(tmp_path, "gan", steps=400, summed=True, lr_rise_at=300,
                                 rise=100.0))
    assert optimizers_holding(run) == 2 and not adversarial_game(run)
    [f] = loss_oscillation(run)
    assert f.steps[1] == 399


def _reinforce(path, *, score: bool, episodes: int = 200):
    """A real tiny REINFORCE (summed loss -sum(G_t log pi(a_t))): an episode lasts while the
    policy picks the action the observation's sign asks for (60 steps at most), so its returns,
    and with them the loss, grow and swing as the policy learns; `score`: each episode's length
    logged as the metric `score`."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import torch
    from torch import nn

    import tracelab
    from tracelab.core.run import open_run

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    policy = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
    opt = torch.optim.Adam(policy.parameters(), lr=0.02)
    with tracelab.Recorder(str(path), model=policy, optimizer=opt) as rec:
        for _ in range(episodes):
            logps = []
            while len(logps) < 60:
                obs = torch.randn(1, 4, generator=g)
                dist = torch.distributions.Categorical(logits=policy(obs))
                action = dist.sample()
                logps.append(dist.log_prob(action))
                if int(action) != int(obs[0, 0] > 0):
                    break
            returns = torch.arange(len(logps), 0, -1, dtype=torch.float32)
            loss = -(torch.cat(logps) * returns).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, metrics={"score": len(logps)} if score else None)
    return open_run(path)


def test_a_policy_gradient_whose_logged_score_keeps_improving_is_quiet(tmp_path):
    # 160 episodes: the returns still grow and swing; over 200 the policy grows confident and
    # its loss falls through the last third to its lowest level, a descent the rule leaves.
    assert loss_oscillation(_reinforce(tmp_path / "scored", score=True, episodes=160)) == []
    # the same losses without the score logged: nothing says the run gets anywhere
    assert len(loss_oscillation(_reinforce(tmp_path / "unscored", score=False,
                                           episodes=160))) == 1
    assert loss_oscillation(_reinforce(tmp_path / "longer", score=False, episodes=200)) == []


# -- real tiny trainings: PPO-like epochs over each batch; a generator's loss that rises -------
def test_a_loss_that_falls_on_each_batch_stepped_on_again_swings_with_the_batches(
        tmp_path, monkeypatch):
    """PPO's K epochs over each rollout: the loss falls on each batch and jumps where the
    batch changes (its noise differs); the same loop at a step too large (Adam at lr 1)
    raises it on the same batch, and fires."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import importlib

    import tracelab
    from _rollouts_and_games import rollouts

    from tracelab.analyzers._learning_rate import descends_per_batch
    run = tracelab.open_run(rollouts(tmp_path / "ppo"))
    assert descends_per_batch(run) and loss_oscillation(run) == []
    high = tracelab.open_run(rollouts(tmp_path / "high", lr=1.0))
    assert not descends_per_batch(high)
    [f] = loss_oscillation(high)
    assert f.evidence["swing"] >= 0.25
    # the contract is what keeps the first quiet: without it, its swings fire
    module = importlib.import_module("tracelab.analyzers.loss_oscillation")
    monkeypatch.setattr(module, "descends_per_batch", lambda run: False)
    assert loss_oscillation(run) != []


def test_a_generator_s_loss_that_rises_as_its_discriminator_learns_is_the_game_s(tmp_path):
    """A generator's BCE starts near ln 2 and rises above its first tenth as D learns, then
    swings back: the game's, not a divergence (it does not end at its highest level); the
    same losses recorded with one optimizer fire."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import tracelab
    from _gan_training import one_optimizer
    from _rollouts_and_games import ring_gan

    from tracelab.analyzers._learning_rate import adversarial_game, game_loss_grew, loss_grew
    path = ring_gan(tmp_path / "gan")
    run = tracelab.open_run(path)
    assert loss_grew(run) and not game_loss_grew(run) and adversarial_game(run)
    assert loss_oscillation(run) == []
    assert loss_oscillation(tracelab.open_run(one_optimizer(path, tmp_path / "one"))) != []


def _xor(path, *, lr: float, momentum: float, batch: int, steps: int = 300):
    """A real tiny training: a tanh MLP on 2-D XOR (y = [x0 * x1 > 0]), BCE on batches of
    `batch` fresh points, SGD at `lr` with `momentum`."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import torch
    from torch import nn

    import tracelab
    from tracelab.core.run import open_run

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    with tracelab.Recorder(str(path), model=model, optimizer=opt,
                           loss_fn=nn.BCEWithLogitsLoss()) as rec:
        for _ in range(steps):
            x = torch.randn(batch, 2, generator=g)
            y = (x[:, :1] * x[:, 1:] > 0).float()
            loss = nn.functional.binary_cross_entropy_with_logits(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x, targets=y)
    return open_run(path)


def test_a_slow_descent_from_chance_level_is_no_oscillation(tmp_path, one_thread):
    """Batches of 2 leave XOR's chance level (ln 2) late: the last third sits less than a tenth
    below the start and its batch losses swing by half their median, but they fall with the
    step beyond that scatter (Kendall's tau); a learning rate far too high swings the loss
    far above its start and fires, falling or not."""
    from tracelab.analyzers.loss_oscillation import still_falling

    slow = _xor(tmp_path / "slow", lr=0.008, momentum=0.9, batch=2)  # skipped without torch
    loss = slow.loss().to_numpy(dtype=float)
    assert still_falling(loss[-100:], 0.01)
    assert [f.evidence["progress"] < 0.1 and f.evidence["swing"] > 0.25
            for f in loss_oscillation(slow, trend_alpha=0)] == [True]  # the trend unjudged
    assert loss_oscillation(slow) == []
    wild = _xor(tmp_path / "wild", lr=50.0, momentum=0.0, batch=4)
    [f] = loss_oscillation(wild)
    assert f.evidence["median"] > 10 * f.evidence["start_loss"]


# -- real tiny trainings: a loss that sums terms -------------------------------------------------
def test_a_sum_whose_logged_fit_descends_swings_with_its_other_term(tmp_path, one_thread):
    """A VAE under cyclical KL annealing: beta * KL swings the loss back far above its best
    while the reconstruction error, logged as a metric that is the loss's main term, keeps
    descending: the swings are the annealed term's. Without that metric the same losses
    fire; so does a learning rate whose fit term stalls itself."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from _vae_training import cyclical, train

    from tracelab.analyzers._loss_terms import main_term
    from tracelab.core.run import open_run

    run = open_run(train(tmp_path / "vae", cyclical(100, 0.3)))
    assert main_term(run, run.loss()).name == "recon_loss"
    assert loss_oscillation(run) == []
    blind = open_run(train(tmp_path / "blind", cyclical(100, 0.3), log_term=False))
    assert main_term(blind, blind.loss()) is None
    [f] = loss_oscillation(blind)
    assert f.evidence["median"] >= 1.75 * f.evidence["best_level"]
    [f] = loss_oscillation(open_run(train(tmp_path / "high", cyclical(100, 0.3), lr=0.05)))
    assert f.evidence["swing"] >= 0.25


def _episodes(path, *, lr: float):
    """A tiny MLP regression (targets with noise of 1) whose squared errors are summed over
    batches that lengthen as the run goes on (4 to 8 + step / 3 samples, drawn anew each
    step: an episode's rollout that lasts longer as its policy learns), every batch profiled."""
    torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from torch import nn

    import tracelab
    from _contract_runs import regression
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x, y = regression(4096)
    y = y + torch.randn(len(y), generator=g)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, input_every=1) as rec:
        for step in range(300):
            n = int(torch.randint(4, 8 + step // 3, (1,), generator=g))
            i = torch.randint(0, len(x), (n,), generator=g)
            loss = nn.functional.mse_loss(model(x[i])[:, 0], y[i], reduction="sum")
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x[i], targets=y[i])
    return tracelab.open_run(str(path))


def test_a_loss_summed_over_batches_that_lengthen_is_judged_per_sample(tmp_path, one_thread,
                                                                       monkeypatch):
    """Summed over batches that lengthen, the loss ends above its start and swings with the
    batch's size while each sample's error falls: quiet. Read as a mean, the same losses fire;
    Adam at lr 10 swings each sample's error too, and fires."""
    import importlib
    module = importlib.import_module("tracelab.analyzers.loss_oscillation")
    run = _episodes(tmp_path / "sum", lr=1e-2)  # skipped without torch
    assert module.sums_over_batch(run) is not None
    assert loss_oscillation(run) == []
    with monkeypatch.context() as patched:
        patched.setattr(module, "sums_over_batch", lambda run: None)
        [f] = loss_oscillation(run)
        assert f.evidence["progress"] < 0
    [f] = loss_oscillation(_episodes(tmp_path / "wild", lr=10.0))
    assert f.evidence["swing"] >= 0.25


def _q_divergence(path, *, lr: float):
    """A tiny DQN without a target network: targets 1 + 0.99 * max Q(s') (0 at a terminal
    transition, one in twenty) computed under no_grad from the network being trained, which
    rise, and spread, as its Q-values do."""
    torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from torch import nn

    import tracelab
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    q = nn.Sequential(nn.Linear(4, 30), nn.ReLU(), nn.Linear(30, 2))
    opt = torch.optim.Adam(q.parameters(), lr=lr)
    with tracelab.Recorder(str(path), model=q, optimizer=opt, loss_fn=nn.MSELoss()) as rec:
        for _ in range(400):
            s, s2 = torch.randn(64, 4, generator=g), torch.randn(64, 4, generator=g)
            done = (torch.rand(64, 1, generator=g) < 0.05).float()
            with torch.no_grad():
                target = 1 + 0.99 * q(s2).max(1, keepdim=True)[0] * (1 - done)
            out = q(s)[:, :1]
            loss = nn.functional.mse_loss(out, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=s, targets=target, outputs=out)
    return tracelab.open_run(str(path))


def test_targets_whose_scale_drifts_move_the_objective(tmp_path, one_thread, monkeypatch):
    """Bootstrapped targets whose scale grows 2.6x: the loss rises and swings with them, and
    the drift alone (the targets' shift against their spread left unjudged) keeps the rule
    quiet; without it the same losses fire. Adam at lr 0.1, whose updates overshoot (100x the
    usual size), fires."""
    import importlib
    module = importlib.import_module("tracelab.analyzers.loss_oscillation")
    run = _q_divergence(tmp_path / "dqn", lr=1e-2)  # skipped without torch
    monkeypatch.setattr(module, "loss_level_uninformative", lambda run: False)
    monkeypatch.setattr(module, "targets_level_uninformative", lambda run: False)
    assert module.targets_drift(run) >= 2.0
    assert loss_oscillation(run) == []
    with monkeypatch.context() as patched:
        patched.setattr(module, "targets_drift", lambda run: None)
        assert len(loss_oscillation(run)) == 1
    wild = _q_divergence(tmp_path / "wild", lr=0.1)
    assert module.overshoot_facts(wild)
    [f] = loss_oscillation(wild)
    assert f.evidence["progress"] < 0


def _xor_epochs(path, *, seed: int, rows: int = 200, batch: int = 48, epochs: int = 60):
    """XOR on a fixed set of `rows` points in shuffled batches of `batch` (the last of each
    epoch smaller: drop_last=False), BCE declared as a mean, SGD at lr 50, every 7th batch
    profiled."""
    torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from torch import nn

    import tracelab
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 2, generator=g)
    y = (x[:, :1] * x[:, 1:] > 0).float()
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=50.0)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, input_every=7,
                           loss_fn=nn.BCEWithLogitsLoss()) as rec:
        for _ in range(epochs):
            order = torch.randperm(rows, generator=g)
            for i in range(0, rows, batch):
                j = order[i:i + batch]
                loss = nn.functional.binary_cross_entropy_with_logits(model(x[j]), y[j])
                opt.zero_grad()
                loss.backward()
                opt.step()
                rec.step(loss=loss, inputs=x[j], targets=y[j])
    return tracelab.open_run(str(path))


def test_a_mean_loss_with_a_small_last_batch_is_no_sum(tmp_path, one_thread):
    """A loss declared as a mean does not grow with its batch: a small last batch profiled
    next to high losses fakes a slope over the batch's size (1.4 here), but the loss is still
    judged as recorded, and a learning rate of 50 fires."""
    from tracelab.analyzers._batches import sums_over_batch

    run = _xor_epochs(tmp_path / "xor", seed=3)  # skipped without torch
    assert sums_over_batch(run) is None
    [f] = loss_oscillation(run)
    assert f.evidence["swing"] >= 0.25


def test_a_best_so_far_loss_is_no_term_of_the_loss(tmp_path, one_thread):
    """A VAE under cyclical KL annealing that logs only its best loss so far: that metric is
    0 or more, never above the loss and all of it at the start, but it never rises with the
    loss, so it is no term that carries it, and the swings fire."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from _vae_training import cyclical, train

    from tracelab.analyzers._loss_terms import main_term
    from tracelab.core.run import open_run

    run = open_run(train(tmp_path / "best", cyclical(100, 0.3), log_term=False, log_best=True))
    assert main_term(run, run.loss()) is None
    [f] = loss_oscillation(run)
    assert f.evidence["median"] >= 1.75 * f.evidence["best_level"]


def test_keys_from_a_momentum_copy_of_the_model_move_the_objective(tmp_path, one_thread,
                                                                    monkeypatch):
    # MoCo: the positives and the queued negatives are keys of a key encoder that follows the
    # query encoder by momentum (requires_grad=False, its values moving): the first step's
    # loss is against a queue of random keys, far below the level the real keys set, and the
    # loss swings with the keys. A key encoder that never moves (m = 1) is a fixed objective,
    # and the same swings above the start still fire.
    pytest.importorskip("torch")
    from _moco_run import moco

    from tracelab.analyzers import _moving_copy
    from tracelab.core.run import open_run

    moving = open_run(moco(tmp_path / "moco", m=0.99, lr=0.003, batch=8, noise=2.0, queue=64))
    assert _moving_copy.moving_copy(moving)
    assert loss_oscillation(moving) == []
    fixed = open_run(moco(tmp_path / "fixed", m=1.0, lr=0.003, batch=8, noise=2.0, queue=64))
    assert _moving_copy.moving_copy(fixed) == []
    [f] = loss_oscillation(fixed)
    assert f.evidence["progress"] < 0
    # the moving copy is what quiets it: judged without that fact, the same run fires
    import sys
    monkeypatch.setattr(sys.modules[loss_oscillation.__module__], "copy_level_uninformative",
                        lambda run: False)
    assert len(loss_oscillation(moving)) == 1
