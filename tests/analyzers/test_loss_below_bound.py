"""loss-below-bound: a training loss below its function's minimum (a flipped sign); real tiny
trainings, and frames for losses whose function is unknown."""
import pandas as pd
import pytest

from tracelab.analyzers.loss_below_bound import loss_below_bound
from tracelab.core.run import Run

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
nn = torch.nn

import tracelab  # noqa: E402
from _contract_runs import blobs, regression, train  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _mlp(inputs: int = 16, out: int = 4) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(inputs, 32), nn.ReLU(), nn.Linear(32, out))


def _findings(path):
    diagnosis = tracelab.analyze(path)
    assert not diagnosis.errors, diagnosis.errors
    return [f for f in diagnosis.findings if f.rule == "loss-below-bound"]


def test_a_maximized_cross_entropy_fires(tmp_path):
    ce = nn.CrossEntropyLoss()
    path = train(tmp_path / "r", _mlp(), blobs(2048), lambda out, y: -ce(out, y), loss_fn=ce)
    [f] = _findings(path)
    assert f.code == "TL612" and f.severity.value == "error" and f.steps[0] == 0
    assert "CrossEntropyLoss loss was below 0" in f.message and "minus sign" in f.fix
    assert f.evidence["median_last_half"] < 0


def test_a_maximized_mse_fires(tmp_path):
    mse = nn.MSELoss()
    path = train(tmp_path / "r", _mlp(8, 1), regression(2048),
                 lambda out, y: -mse(out.squeeze(1), y), loss_fn=mse)
    assert len(_findings(path)) == 1


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_a_minimized_cross_entropy_stays_quiet(tmp_path, smoothing):
    ce = nn.CrossEntropyLoss(label_smoothing=smoothing)
    assert _findings(train(tmp_path / "r", _mlp(), blobs(2048), ce, loss_fn=ce)) == []


def test_a_gaussian_log_likelihood_that_goes_negative_stays_quiet(tmp_path):
    # The negative log-likelihood of a learned variance is negative by nature.
    gnll = nn.GaussianNLLLoss()
    x, y = regression(2048)
    path = train(tmp_path / "r", _mlp(8, 2), (x, y),
                 lambda out, y: gnll(out[:, 0], y, out[:, 1].exp()), loss_fn=gnll, steps=150,
                 lr=3e-2)
    assert tracelab.open_run(path).loss().iloc[75:].median() < 0
    assert _findings(path) == []


def _run(losses, meta=None):
    return Run.from_frames(meta, scalars=pd.DataFrame(
        {"step": range(len(losses)), "split": "train", "name": "loss", "value": losses}))


def test_without_loss_fn_a_loss_falling_without_bound_fires():
    [f] = loss_below_bound(_run([-2.3 - 0.5 * i for i in range(100)]))
    assert f.severity.value == "warning" and "fell without bound" in f.message


def test_without_loss_fn_a_negative_loss_that_flattens_stays_quiet():
    # a flow's negative log-likelihood: from +5 down to about -3, slowing down
    flow = [-3 + 8 * 0.95 ** i for i in range(100)]
    assert loss_below_bound(_run(flow)) == []
    # an entropy bonus dipping a little below 0 for a known loss
    dip = [2.0 * 0.9 ** i - 0.001 for i in range(100)]
    assert loss_below_bound(_run(dip, {"loss_fn": {"type": "CrossEntropyLoss"}})) == []


def test_a_loss_that_may_be_negative_is_not_bounded():
    assert loss_below_bound(_run([-1.0 - 0.01 * i for i in range(100)],
                                 {"loss_fn": {"type": "GaussianNLLLoss"}})) == []


def test_a_loss_swinging_around_zero_stays_quiet():
    # a value loss named as loss_fn, recorded with a policy-gradient term beside it
    swings = [0.8 if i % 3 == 0 else -0.5 for i in range(100)]
    meta = {"loss_fn": {"type": "SmoothL1Loss"}}
    assert loss_below_bound(_run(swings, meta)) == []
    assert len(loss_below_bound(_run([-0.5] * 100, meta))) == 1


def test_without_loss_fn_a_loss_gone_orders_of_magnitude_negative_fires():
    # a VAE whose KL term's sign is flipped: the loss explodes to -1e17, then wanders
    exploded = [5000.0] * 10 + [-10.0 ** (i / 4) for i in range(10, 70)] + [-1e15] * 40
    [f] = loss_below_bound(_run(exploded))
    assert "orders of magnitude below the scale it started at" in f.message
    # a Gaussian log-likelihood going from 3 to -5 stays quiet
    assert loss_below_bound(_run([3 - 8 * (1 - 0.97 ** i) for i in range(100)])) == []


def _gan(path, fake_label_for_generator):
    """A tiny GAN on 2-D points with BCELoss, both optimizers given to the Recorder, the
    discriminator's loss logged as `d_loss`; the generator aims at the label of real points,
    or (flipped) at that of fakes."""
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Sigmoid())
    bce = nn.BCELoss()
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
    model = nn.ModuleDict({"generator": G, "discriminator": D})
    with tracelab.Recorder(str(path), model, {"generator": opt_g, "discriminator": opt_d},
                           loss_fn=bce, flush_interval=0.2) as rec:
        for _ in range(120):
            real = torch.randn(32, 2) * 0.5 + torch.tensor([2.0, -1.0])
            ones, zeros = torch.ones(32, 1), torch.zeros(32, 1)
            opt_g.zero_grad()
            fake = G(torch.randn(32, 4))
            g_loss = bce(D(fake), zeros if fake_label_for_generator else ones)
            g_loss.backward()
            opt_g.step()
            opt_d.zero_grad()
            d_loss = (bce(D(real), ones) + bce(D(fake.detach()), zeros)) / 2
            d_loss.backward()
            opt_d.step()
            rec.step(loss=g_loss, metrics={"d_loss": d_loss})
    return _findings(path)


def test_two_players_that_cooperate_fire_and_opponents_stay_quiet(tmp_path):
    [f] = _gan(tmp_path / "flipped", True)
    assert f.evidence["partner"] == "d_loss" and f.evidence["median_last_half"] < 0.48
    assert _gan(tmp_path / "honest", False) == []



def _mean_score(path, *, game: bool):
    """A tiny model trained to lower the mean of its scalar scores on 2-D points, recorded
    without loss_fn: alone (`game` False: one optimizer, nothing bounds the scores, so the loss
    falls without bound), or as WGAN's generator against a weight-clipped critic (`game` True:
    RMSprop for both, five critic steps per generator step, the generator's loss
    -D(G(z)).mean() recorded: it falls a little faster in each quarter of the run, its floor
    moved by the critic)."""
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))
    if not game:
        sgd = torch.optim.SGD(D.parameters(), lr=1e-2)
        with tracelab.Recorder(str(path), D, sgd, flush_interval=0.2) as rec:
            for _ in range(120):
                sgd.zero_grad()
                loss = D(torch.randn(32, 2) + 2.0).mean()
                loss.backward()
                sgd.step()
                rec.step(loss=loss)
        return _findings(path)
    opt_g = torch.optim.RMSprop(G.parameters(), lr=5e-4)
    opt_d = torch.optim.RMSprop(D.parameters(), lr=5e-4)
    model = nn.ModuleDict({"G": G, "D": D})
    with tracelab.Recorder(str(path), model, {"G": opt_g, "D": opt_d},
                           flush_interval=0.2) as rec:
        for _ in range(200):
            for _ in range(5):
                for p in D.parameters():
                    p.data.clamp_(-0.01, 0.01)
                opt_d.zero_grad()
                real = torch.randn(32, 2) * 0.5 + torch.tensor([2.0, -1.0])
                with torch.no_grad():
                    fake = G(torch.randn(32, 4))
                (D(fake).mean() - D(real).mean()).backward()
                opt_d.step()
            opt_g.zero_grad()
            loss = -D(G(torch.randn(32, 4))).mean()
            loss.backward()
            opt_g.step()
            rec.step(loss=loss)
    return _findings(path)


def test_a_mean_score_falling_alone_fires_and_a_wgan_players_stays_quiet(tmp_path):
    # the same loss, linear in the scores: minimized alone it has no floor (a flipped sign
    # reads so); one player's in a game, the critic moves its floor (WGAN, t06)
    [f] = _mean_score(tmp_path / "alone", game=False)
    assert "fell without bound" in f.message
    assert _mean_score(tmp_path / "wgan", game=True) == []
