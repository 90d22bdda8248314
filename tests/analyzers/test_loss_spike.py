"""loss-spike: a sudden jump fires and names its likely cause; minibatch noise stays quiet."""
import numpy as np
import pandas as pd
import pytest
from dynamics_frames import make_run, noisy_decay, scalar_rows, tensor_rows

from tracelab.analyzers.loss_spike import loss_spike, targets_drift

N, AT = 300, 200
# A jump that no recorded fact explains must stand out of the loss's multiplicative noise
# (20% here) on the log scale: 20x does, 5x (8 sigma of it) need not.
UNEXPLAINED = 20.0


def _loss(jump_at=AT, factor=5.0, seed=0):
    values = noisy_decay(N, noise=0.2, seed=seed)
    values[jump_at] *= factor
    return values


def _inputs(bad_step=None, *, outlier=1.0, nan=0):
    rows = []
    rng = np.random.default_rng(0)
    for step in range(N):
        for feature in ("x0", "x1"):
            hi = abs(rng.normal(2.5, 0.2))
            scale = outlier if step == bad_step and feature == "x1" else 1.0
            rows.append({"step": step, "split": "train", "feature": feature, "dtype": "float32",
                         "count": 32, "mean": 0.0, "std": 1.0, "min": -hi, "max": hi * scale,
                         "nan_count": nan if step == bad_step and feature == "x1" else 0,
                         "inf_count": 0})
    return pd.DataFrame(rows)


def _grads(spike_layer=None, at=AT, factor=20.0):
    rng = np.random.default_rng(1)
    per = {}
    for name in ("fc1.weight", "fc2.weight"):
        norms = 0.5 * np.exp(0.2 * rng.standard_normal(N))
        if name == spike_layer:
            norms[at] *= factor
        per[name] = {"norm": norms, "numel": [64] * N}
    return tensor_rows("grad", per)


def test_names_an_outlier_input_batch():
    run = make_run(scalars=[scalar_rows("loss", _loss())], inputs=_inputs(AT, outlier=40.0),
                   tensors=[_grads("fc2.weight")])
    [f] = loss_spike(run)
    assert f.code == "TL102" and f.severity.value == "warning" and f.steps == (AT, AT)
    assert "outlier input batch" in f.message and "'x1'" in f.message
    assert f.evidence["input_ratio"] == pytest.approx(40.0, rel=0.3)
    assert f.evidence["loss"] / f.evidence["rolling_median"] > 3


def test_names_an_input_batch_with_nan_before_anything_else():
    run = make_run(scalars=[scalar_rows("loss", _loss())], inputs=_inputs(AT, nan=3))
    [f] = loss_spike(run)
    assert "3 NaN/Inf values in 'x1'" in f.message and f.evidence["nonfinite_inputs"] == 3
    assert "NaN" in f.fix


def test_names_a_learning_rate_increase():
    lr = np.full(N, 0.01)
    lr[AT - 1:] = 0.1  # a restart just before the spike
    run = make_run(scalars=[scalar_rows("loss", _loss()), scalar_rows("lr/0", lr)],
                   inputs=_inputs())
    [f] = loss_spike(run)
    assert "learning rate rose 10x" in f.message and f.evidence["lr_ratio"] == pytest.approx(10)


def test_a_learning_rate_decay_is_not_blamed():
    lr = np.full(N, 0.1)
    lr[AT - 1:] = 0.01
    run = make_run(scalars=[scalar_rows("loss", _loss(factor=UNEXPLAINED)),
                            scalar_rows("lr/0", lr)])
    [f] = loss_spike(run)
    assert "learning rate" not in f.message


def test_names_the_layer_of_a_gradient_spike():
    run = make_run(scalars=[scalar_rows("loss", _loss(factor=UNEXPLAINED))], inputs=_inputs(),
                   tensors=[_grads("fc2.weight")])
    [f] = loss_spike(run)
    assert "gradient-norm spike in 'fc2.weight'" in f.message
    assert f.evidence["grad_ratio"] > 10


def test_says_when_nothing_explains_the_spike():
    run = make_run(scalars=[scalar_rows("loss", _loss(factor=UNEXPLAINED))], inputs=_inputs())
    [f] = loss_spike(run)
    assert "no input anomaly" in f.message and f.evidence["cause"] == "unknown"


def test_an_unprofiled_batch_is_said_and_a_gradient_spike_not_blamed():
    inputs = _inputs()
    run = make_run(scalars=[scalar_rows("loss", _loss(factor=UNEXPLAINED))],
                   inputs=inputs[inputs["step"] != AT],
                   tensors=[_grads("fc2.weight")])
    [f] = loss_spike(run)
    assert f"input batch of step {AT} was not profiled" in f.message
    assert "follows from the loss" in f.message and "likely cause" not in f.message
    assert f.evidence["cause"] == "unprofiled" and "input_every=1" in f.fix


def test_detects_a_sustained_level_shift():
    values = noisy_decay(N, noise=0.2, seed=4)
    values[AT:] *= 2.2  # e.g. the LR was raised and the loss stays up
    [f] = loss_spike(make_run(scalars=[scalar_rows("loss", values)]))
    assert AT <= f.steps[0] <= AT + 2


def test_reports_at_most_max_reported_spikes_largest_first():
    values = noisy_decay(N, noise=0.1, tau=10, seed=5)
    for at, factor in ((100, 3), (160, 5), (220, 8), (280, 14)):
        values[at] *= factor
    found = loss_spike(make_run(scalars=[scalar_rows("loss", values)]), max_reported=2)
    assert [f.steps[0] for f in found] == [280, 220]
    assert found[0].evidence["spikes_total"] == 4


@pytest.mark.parametrize("seed", range(6))
def test_quiet_on_minibatch_noise(seed):
    values = noisy_decay(1000, noise=0.3, seed=seed)
    assert loss_spike(make_run(scalars=[scalar_rows("loss", values)])) == []


def test_quiet_on_small_absolute_jumps_near_zero_loss():
    rng = np.random.default_rng(7)
    values = noisy_decay(600, start=2.3, floor=0.01, tau=20, noise=0.2, seed=7)
    hard = rng.choice(np.arange(200, 600), 10, replace=False)
    values[hard] *= 8  # rare hard batches once converged: 0.01 -> 0.08
    assert loss_spike(make_run(scalars=[scalar_rows("loss", values)])) == []


def test_quiet_on_a_too_short_run():
    assert loss_spike(make_run(scalars=[scalar_rows("loss", _loss(jump_at=30)[:40])])) == []


def test_a_spike_of_a_negative_loss_says_how_far_above_its_median_not_a_ratio():
    # A negative log-likelihood (a Gaussian's with a small sigma) runs below zero: a ratio of
    # 0.5 to a median of -2 would read as -0.25x.
    rng = np.random.default_rng(3)
    values = -2.0 + 0.02 * rng.standard_normal(N)
    values[AT] = 0.5
    [f] = loss_spike(make_run(scalars=[scalar_rows("loss", values)], inputs=_inputs()))
    assert f.steps[0] == AT and "2.5 above its rolling median -2" in f.message, f.message
    assert "x its rolling median" not in f.message


def test_a_spike_on_a_step_whose_grads_were_not_recorded_says_so():
    grads = _grads("fc2.weight")
    sparse = grads[grads["step"] % 4 == 2]  # every 4th step, not the spike's nor the one before
    run = make_run(scalars=[scalar_rows("loss", _loss(factor=UNEXPLAINED))], inputs=_inputs(),
                   tensors=[sparse])
    [f] = loss_spike(run)
    assert f.evidence["cause"] == "unknown" and "its gradients were not recorded" in f.message
    # Recorded at that step, the spike is named; recorded and quiet, nothing is said of them.
    [f] = loss_spike(make_run(scalars=[scalar_rows("loss", _loss(factor=UNEXPLAINED))],
                              inputs=_inputs(),
                              tensors=[_grads()]))
    assert "not recorded" not in f.message and f.evidence["cause"] == "unknown"


def test_a_jump_within_the_multiplicative_noise_needs_a_recorded_cause():
    """5x is 8 sigma of 20% noise on the log scale: under the bar with nothing to explain it,
    a bad batch when the step's batch holds an outlier."""
    assert loss_spike(make_run(scalars=[scalar_rows("loss", _loss())], inputs=_inputs())) == []
    [f] = loss_spike(make_run(scalars=[scalar_rows("loss", _loss())],
                              inputs=_inputs(AT, outlier=40.0)))
    assert f.evidence["cause"] == "input_outlier"


# -- real tiny trainings: a regression whose per-batch loss swings severalfold ---------------
def _heavy_regression(path, bad_step=None):
    """Morvan's BatchNorm regression, shrunk: y = x^2 - 5 on x in [-7, 10] (targets up to 95),
    BatchNorm on the input and after each hidden layer, Adam at 0.03, batches of 64 from 2,000
    points (each epoch ends on a batch of 16). Its per-batch MSE swings several times over from
    batch to batch, and a few batches (the short last ones) stand 5-10x above the median.
    `bad_step`: that batch's targets come 20x too large (a unit bug in the pipeline)."""
    torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    from torch import nn

    import tracelab
    torch.manual_seed(1)
    g = torch.Generator().manual_seed(1)
    x = torch.linspace(-7, 10, 2000).unsqueeze(1)
    y = x ** 2 - 5 + 2 * torch.randn(2000, 1, generator=g)
    model = nn.Sequential(nn.BatchNorm1d(1), nn.Linear(1, 10), nn.BatchNorm1d(10), nn.ReLU(),
                          nn.Linear(10, 10), nn.BatchNorm1d(10), nn.ReLU(), nn.Linear(10, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.03)
    loss_fn = nn.MSELoss()
    step = 0
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=loss_fn) as rec:
        for _ in range(8):
            for idx in torch.randperm(2000, generator=g).split(64):
                xb, yb = x[idx], y[idx] * (20 if step == bad_step else 1)
                out = model(xb)
                loss = loss_fn(out, yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                rec.step(loss=loss, inputs=xb, targets=yb, outputs=out)
                step += 1
    return tracelab.open_run(path)


def test_a_heavy_tailed_regression_loss_is_noise_and_its_bad_batch_a_spike(tmp_path):
    run = _heavy_regression(tmp_path / "healthy")
    loss = run.loss().to_numpy()
    assert loss[127] > 5 * np.median(loss[77:127])  # a short last batch, 10x on a linear MAD
    assert loss_spike(run) == []
    assert targets_drift(run) is None  # a fixed data set: its targets keep their scale
    [f] = loss_spike(_heavy_regression(tmp_path / "bad", bad_step=150))
    assert f.evidence["cause"] == "input_outlier" and f.evidence["step"] == 150


# -- real tiny trainings: a GAN's two optimizers -------------------------------------------------
def _gan(tmp_path, name, **kw):
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from _gan_training import train
    return train(tmp_path / name, **kw)


def test_a_gan_s_jump_is_the_game_s_and_the_same_losses_of_one_optimizer_fire(tmp_path):
    import tracelab
    path = _gan(tmp_path, "gan", steps=800, seed=5)  # skipped without torch
    from _gan_training import one_optimizer
    assert loss_spike(tracelab.open_run(path)) == []  # the players' game jumps by design
    [f] = loss_spike(tracelab.open_run(one_optimizer(path, tmp_path / "one")))
    assert f.evidence["cause"] not in ("lr_increase", "input_outlier", "input_nonfinite")


def test_a_gan_s_jump_right_after_its_learning_rates_rose_still_fires(tmp_path):
    import tracelab
    from tracelab.analyzers._learning_rate import adversarial_game
    run = tracelab.open_run(_gan(tmp_path, "gan", steps=400, lr_rise_at=300, rise=50.0))
    assert adversarial_game(run)  # two players, and the loss did not grow
    [f] = loss_spike(run)
    assert f.evidence["cause"] == "lr_increase" and 300 <= f.evidence["step"] <= 310
    assert f.evidence["spikes_total"] == 1


# -- real tiny trainings: a regression on targets that a synced copy of the model recomputes -----
def _bootstrapped(path, bad_step=None, steps=600, sync=150):
    """Fitted value iteration on a fixed random chain of 256 states (4 features, reward about
    1, discount 0.97): the targets r + 0.97 V'(next) come from a copy of the model synced every
    `sync` steps, so they grow (1 -> about 8) and the loss jumps at each sync, a DQN's target
    network in small. `bad_step`: that batch's targets come 20x too large."""
    torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    import copy

    from torch import nn

    import tracelab
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    states = torch.randn(256, 4, generator=g)
    following = torch.randint(0, 256, (256,), generator=g)
    reward = 1 + 0.1 * torch.randn(256, generator=g)
    model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))
    target = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.MSELoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=loss_fn) as rec:
        for step in range(steps):
            i = torch.randint(0, 256, (32,), generator=g)
            with torch.no_grad():
                y = reward[i] + 0.97 * target(states[following[i]])[:, 0]
            y = y * (20 if step == bad_step else 1)
            out = model(states[i])[:, 0]
            loss = loss_fn(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=states[i], targets=y, outputs=out)
            if step % sync == sync - 1:
                target.load_state_dict(model.state_dict())
    return tracelab.open_run(str(path))


def test_the_jumps_of_targets_a_synced_copy_recomputes_are_the_algorithm_s(tmp_path,
                                                                          monkeypatch):
    import importlib
    module = importlib.import_module("tracelab.analyzers.loss_spike")
    run = _bootstrapped(tmp_path / "td")
    assert module.targets_drift(run) >= 2  # the targets' scale grew as the values did
    assert loss_spike(run) == []
    # the same loss read as a regression on steady targets: each sync is a spike
    monkeypatch.setattr(module, "targets_drift", lambda run: None)
    found = loss_spike(run)
    assert {f.evidence["step"] for f in found} <= {150, 300, 450} and len(found) >= 2


def test_a_bad_batch_among_drifting_targets_still_fires(tmp_path):
    [f] = loss_spike(_bootstrapped(tmp_path / "bad", bad_step=375))
    assert f.evidence["cause"] == "input_outlier" and f.evidence["step"] == 375


def test_the_jumps_where_a_batch_stepped_on_again_changes_are_the_batches(tmp_path,
                                                                          monkeypatch):
    """PPO's K epochs over each rollout: the loss falls on each batch and jumps where the
    batch changes. Read as an ordinary loss (the contract switched off), the first jump out of
    a stretch of quiet batches fires. (The same loop at Adam's lr 1 no longer descends per
    batch; its levels alternate with the batches' noise, 0.2 or 2.0, as often as they did
    before each jump: within the run's own batch-to-batch noise, quiet.)"""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import importlib

    import tracelab
    from _rollouts_and_games import rollouts
    run = tracelab.open_run(rollouts(tmp_path / "ppo"))
    assert loss_spike(run) == []
    module = importlib.import_module("tracelab.analyzers.loss_spike")
    monkeypatch.setattr(module, "descends_per_batch", lambda run: False)
    assert loss_spike(run) != []  # the contract is what keeps it quiet


def test_a_spike_on_a_batch_stepped_on_again_is_the_step_s():
    """Blocks of 10 steps on one batch, the loss falling on each and its level moving with
    the batch: descends_per_batch. A fivefold jump on a batch held fixed is the step's
    overshoot (a fixed batch's loss does not jump at a step small enough): it does not."""
    from tracelab.analyzers._learning_rate import descends_per_batch
    from tracelab.core.run import Run
    rng = np.random.default_rng(0)
    levels = rng.uniform(0.3, 1.5, 30)
    loss = np.concatenate([level * np.linspace(1.0, 0.9, 10) for level in levels])
    batch = np.repeat(np.arange(30), 10).astype(float)
    batches = pd.DataFrame({"step": np.repeat(np.arange(300), 2), "split": "train",
                            "role": ["input", "target"] * 300, "name": ["input", "target"] * 300,
                            "min": np.repeat(-batch, 2), "max": np.repeat(batch + 1, 2),
                            "nan_count": 0, "inf_count": 0})

    def run(values):
        scalars = pd.DataFrame({"step": range(300), "split": "train", "name": "loss",
                                "value": values})
        return Run.from_frames({}, scalars=scalars, batches=batches)

    assert descends_per_batch(run(loss))
    spiked = loss.copy()
    spiked[155] *= 5
    assert not descends_per_batch(run(spiked))


# -- real tiny trainings: a discriminator that catches up; a loss summed over growing batches ---
def _catching_up(path, steps=300, catch_up=150, k=10):
    """A GAN on points of a ring (two Adams, the generator's BCE recorded), its discriminator
    stepped `k` times per batch from step `catch_up` on: it catches up, and the generator's
    loss jumps to a new level and climbs on from it, as a game's does by design."""
    torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from torch import nn

    import tracelab
    torch.manual_seed(0)
    angles = torch.rand(2048) * 6.2832
    data = torch.stack([angles.cos(), angles.sin()], 1) * 2 + 0.05 * torch.randn(2048, 2)
    G = nn.Sequential(nn.Linear(4, 32), nn.LeakyReLU(0.2), nn.Linear(32, 2))
    D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid())
    bce = nn.BCELoss()
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-4)
    opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
    with tracelab.Recorder(str(path), model=nn.ModuleDict({"G": G, "D": D}),
                           optimizer={"G": opt_g, "D": opt_d}, loss_fn=bce) as rec:
        for step in range(steps):
            x = data[torch.randint(0, 2048, (64,))]
            for _ in range(k if step >= catch_up else 1):
                opt_d.zero_grad()
                d_loss = bce(D(x), torch.ones(64, 1)) + \
                    bce(D(G(torch.randn(64, 4)).detach()), torch.zeros(64, 1))
                d_loss.backward()
                opt_d.step()
            opt_g.zero_grad()
            g_loss = bce(D(G(torch.randn(64, 4))), torch.ones(64, 1))
            g_loss.backward()
            opt_g.step()
            rec.step(loss=g_loss)
    return tracelab.open_run(str(path))


def test_a_game_s_loss_that_jumps_and_holds_its_level_is_the_game_s(tmp_path, monkeypatch):
    import importlib

    from tracelab.analyzers._learning_rate import game_loss_grew
    run = _catching_up(tmp_path / "gan")
    assert game_loss_grew(run)  # grown, and ending at its highest level
    assert loss_spike(run) == []
    # the same loss read as one optimizer's: the jump where D caught up is a spike
    module = importlib.import_module("tracelab.analyzers.loss_spike")
    monkeypatch.setattr(module, "several_players", lambda run: False)
    assert [150 <= f.evidence["step"] <= 175 for f in loss_spike(run)] == [True]


def _growing_batches(path, *, reduction="sum", bad_step=None, steps=300, grow_at=150):
    """A regression whose batches grow from 8 to 64 samples at `grow_at` (an episode's rollout
    that lengthens as its policy learns), its MSE summed over the batch (or averaged), the
    model fitted beforehand; `bad_step`: that batch's inputs come 30x too large."""
    torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from torch import nn

    import tracelab
    from _contract_runs import regression
    torch.manual_seed(0)
    x, y = regression(4096)
    model = nn.Linear(8, 1)
    fit = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(500):
        i = torch.randint(0, len(x), (64,))
        loss = nn.functional.mse_loss(model(x[i])[:, 0], y[i])
        fit.zero_grad()
        loss.backward()
        fit.step()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, input_every=5) as rec:
        for step in range(steps):
            n = 8 if step < grow_at else 64
            i = torch.randint(0, len(x), (n,))
            xb = x[i] * (30 if step == bad_step else 1)
            loss = nn.functional.mse_loss(model(xb)[:, 0], y[i], reduction=reduction)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb)
    return tracelab.open_run(str(path))


def test_a_loss_summed_over_batches_that_grow_follows_their_size(tmp_path, monkeypatch):
    import importlib
    module = importlib.import_module("tracelab.analyzers.loss_spike")
    run = _growing_batches(tmp_path / "sum")
    assert module.sums_over_batch(run) >= 0.5
    assert loss_spike(run) == []
    assert module.sums_over_batch(_growing_batches(tmp_path / "mean", reduction="mean")) is None
    monkeypatch.setattr(module, "sums_over_batch", lambda run: None)
    assert [f.evidence["step"] for f in loss_spike(run)] == [150]  # read as a mean: a spike


def test_a_bad_batch_in_a_loss_summed_over_growing_batches_still_fires(tmp_path):
    [f] = loss_spike(_growing_batches(tmp_path / "bad", bad_step=225))
    assert f.evidence["cause"] == "input_outlier" and f.evidence["step"] == 225


# -- real tiny trainings: a loss that sums terms -------------------------------------------------
def test_a_jump_of_a_sum_s_other_term_is_no_spike_while_its_logged_fit_holds(tmp_path,
                                                                            one_thread):
    """A VAE whose KL term is switched on at step 150: the loss jumps tenfold while the
    reconstruction error, logged as the loss's main term, stays within its own noise there.
    Without that metric the same losses fire; a jump that throws the fit's own term up (the
    decoder's output layer scaled tenfold, as an update that overshot) fires with it."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from _vae_training import switched_on, train

    from tracelab.core.run import open_run

    assert loss_spike(open_run(train(tmp_path / "vae", switched_on(150, 0.1)))) == []
    [f] = loss_spike(open_run(train(tmp_path / "blind", switched_on(150, 0.1),
                                    log_term=False)))
    assert f.steps[0] == 150
    [f] = loss_spike(open_run(train(tmp_path / "kick", switched_on(150, 0.1), kick_at=270)))
    assert f.steps[0] == 270 and f.evidence["cause"] not in ("input_outlier", "lr_increase")


def test_a_best_so_far_loss_does_not_hide_a_jump(tmp_path, one_thread):
    """The same VAE logging only its best loss so far, which never rises: no term of the
    loss, so the jump where the KL term is switched on fires as without any metric."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from _vae_training import switched_on, train

    from tracelab.core.run import open_run

    [f] = loss_spike(open_run(train(tmp_path / "best", switched_on(150, 0.1), log_term=False,
                                    log_best=True)))
    assert f.steps[0] == 150


def _heavy_targets(path, *, seed: int):
    """A linear regression on a fixed set of 2,000 standardized targets with Student-t (3)
    noise, batches of 4 drawn at random, every 25th of 300 profiled (12 batches)."""
    torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from torch import nn

    import tracelab
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2000, 8, generator=g)
    y = x[:, 0] + torch.distributions.StudentT(3.0).sample((2000,))
    y = (y - y.mean()) / y.std()
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, input_every=25,
                           loss_fn=nn.MSELoss()) as rec:
        for _ in range(300):
            i = torch.randint(0, 2000, (4,), generator=g)
            loss = nn.functional.mse_loss(model(x[i])[:, 0], y[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x[i], targets=y[i])
    return tracelab.open_run(str(path))


def test_a_fixed_heavy_tailed_target_set_does_not_drift(tmp_path, one_thread):
    """The medians of three small batches of heavy-tailed targets per quarter differ twice
    over by chance (2.05x on this seed): no drift without enough batches to judge it beyond
    their own noise."""
    run = _heavy_targets(tmp_path / "t3", seed=11)  # skipped without torch
    assert targets_drift(run, min_batches=8, alpha=1.0) >= 2.0
    assert targets_drift(run) is None
