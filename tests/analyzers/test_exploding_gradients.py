"""exploding-gradients: sustained huge or fast-growing gradient norms per layer, named."""
import numpy as np
import pandas as pd
import pytest
from dynamics_frames import (GRAD_LAYERS, GRAD_LEVELS, grad_run, make_run, model_meta, noisy,
                             scalar_rows, tensor_rows)

from tracelab.analyzers.exploding_gradients import exploding_gradients
from tracelab.core.run import Run
from tracelab.core.schema import META_LOSS_FN

N = 100
HEALTHY = GRAD_LEVELS


def test_exploding_names_a_growing_layer_and_its_ratio_to_the_others():
    growing = 0.2 * np.exp(np.linspace(0, np.log(5000), N))  # 0.2 -> 1000
    [f] = exploding_gradients(grad_run({**HEALTHY, "l2.weight": growing}))
    assert f.code == "TL202" and f.severity.value == "warning" and f.subject == "l2.weight"
    assert f.evidence["peak_norm"] > 500 and f.evidence["growth"] > 1000
    assert f.evidence["ratio_to_other_layers"] > 100
    assert "'l2.weight'" in f.message and "median of the other layers" in f.message


def _with_loss(run, reduction):
    run.meta[META_LOSS_FN] = {"type": "CrossEntropyLoss", "reduction": reduction}
    return run


def test_exploding_fires_on_a_sustained_huge_norm_of_a_mean_loss():
    run = _with_loss(grad_run({**HEALTHY, "l0.weight": 300.0}), "mean")
    [f] = exploding_gradients(run)
    assert f.subject == "l0.weight" and f.evidence["peak_norm"] > 100


@pytest.mark.parametrize("reduction", ["sum", None])
def test_a_steady_large_norm_of_a_summed_or_unknown_loss_is_its_scale_not_an_explosion(
        reduction):
    """A sum over the batch (a VAE's summed BCE, as pytorch/examples writes it) has gradients
    hundreds of times a mean's from the first step on: no growth, no finding."""
    run = grad_run({**HEALTHY, "l0.weight": 300.0})
    if reduction:
        _with_loss(run, reduction)
    assert exploding_gradients(run) == []


@pytest.mark.parametrize("seed", range(3))
def test_exploding_quiet_on_healthy_noisy_gradients(seed):
    levels = {n: noisy(v, seed * 10 + i, noise=0.5) * np.linspace(1, 3, N)
              for i, (n, v) in enumerate(HEALTHY.items())}
    assert exploding_gradients(grad_run(levels)) == []


def test_exploding_quiet_on_a_single_bad_batch():
    spiky = noisy(0.3, 5)
    spiky[50] = 1e4
    assert exploding_gradients(grad_run({**HEALTHY, "l0.weight": spiky})) == []


def test_exploding_quiet_on_growth_from_a_tiny_start():
    growing = 1e-5 * np.exp(np.linspace(0, np.log(3e4), N))  # 1e-5 -> 0.3
    assert exploding_gradients(grad_run({**HEALTHY, "l3.weight": growing})) == []


def test_exploding_ignores_nonfinite_norms():
    blown = noisy(0.3, 6)
    blown[60:] = np.nan
    assert exploding_gradients(grad_run({**HEALTHY, "l1.weight": blown})) == []


def _growing_run(loss: np.ndarray):
    """Every layer's grads grow 150x from a tiny start (a deep ReLU net leaving its
    initialization), beside the given training loss."""
    growing = 0.01 * np.exp(np.linspace(0, np.log(150), N))
    per = {name: {"norm": growing * (1 + 0.1 * i), "numel": [4096] * N}
           for i, (name, _) in enumerate(GRAD_LAYERS)}
    return make_run(model_meta(GRAD_LAYERS), scalars=[scalar_rows("loss", loss)],
                    tensors=[tensor_rows("grad", per)])


def test_grads_that_grow_while_the_loss_falls_are_information():
    [f] = exploding_gradients(_growing_run(2.3 * np.exp(-np.linspace(0, 3, N))))
    assert f.severity.value == "info" and "kept falling" in f.message


@pytest.mark.parametrize("loss", [np.full(N, 2.3), np.linspace(2.3, 9.0, N),
                                  np.r_[np.full(N - 1, 2.3), np.nan]])
def test_grads_that_grow_while_the_loss_stalls_rises_or_breaks_are_a_warning(loss):
    [f] = exploding_gradients(_growing_run(loss))
    assert f.severity.value == "warning"


def _summed_ce(level: float, rows: int = 256, classes: int = 4, outputs: bool = True):
    """A cross-entropy summed over batches of `rows`, its first layer's gradient steady at
    `level` per row; what entered the loss recorded (outputs/numel, outputs/classes)."""
    per = {name: {"norm": noisy(level * rows if name == "l0.weight" else v, i), "numel": [4096] * N}
           for i, (name, v) in enumerate(HEALTHY.items())}
    meta = model_meta(GRAD_LAYERS)
    meta[META_LOSS_FN] = {"type": "CrossEntropyLoss", "reduction": "sum"}
    signals = pd.DataFrame(
        [{"step": s, "split": "train", "name": name, "value": value}
         for s in range(0, N, 10) for name, value in (("outputs/numel", rows * classes),
                                                      ("outputs/classes", classes))])
    frames = {"tensors": tensor_rows("grad", per)}
    if outputs:
        frames["signals"] = signals
    return Run.from_frames(meta, **frames)


def test_a_summed_loss_is_judged_per_term_of_the_sum():
    """300 per row of a 256-row sum is a mean's 300: huge; 2 per row is a mean's 2: fine,
    though the norm (512) is far above what a mean's would be allowed."""
    [f] = exploding_gradients(_summed_ce(300.0))
    assert f.subject == "l0.weight" and f.evidence["peak_norm"] > 256 * 100
    assert exploding_gradients(_summed_ce(2.0)) == []
    # without what entered the loss, its count of terms is unknown: growth alone judges it
    assert exploding_gradients(_summed_ce(300.0, outputs=False)) == []


# -- real tiny trainings: a step past the curvature's stability limit, and one within it -----
torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from _contract_runs import regression, train  # noqa: E402


def _regression(path, step: float, reduction: str = "mean"):
    """Full-batch least squares with SGD at `step` times 1 / (the loss's largest curvature):
    past 2 each step overshoots by more than it corrects, and the gradient grows geometrically."""
    x, y = regression(256)
    scale = len(x) if reduction == "sum" else 1
    curvature = float(torch.linalg.eigvalsh(2 * x.T @ x / len(x)).max()) * scale
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    loss = nn.MSELoss(reduction=reduction)
    train(path, model, (x, y), lambda out, t: loss(out.squeeze(1), t), loss_fn=loss, steps=60,
          batch=len(x), optimizer=torch.optim.SGD(model.parameters(), lr=step / curvature))
    return tracelab.open_run(path)


def test_sgd_past_the_stability_limit_explodes(tmp_path):
    [f] = exploding_gradients(_regression(tmp_path / "past", 2.2))
    assert f.severity.value == "warning" and f.subject == "weight"
    assert f.evidence["growth"] > 1000


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_sgd_within_the_stability_limit_stays_quiet(tmp_path, reduction):
    """A summed loss's gradients are 256x a mean's here, and per row the same."""
    run = _regression(tmp_path / reduction, 1.0, reduction)
    assert exploding_gradients(run) == []
    assert exploding_gradients(run, max_norm=0.01) != []  # per term, the norm is still judged


def _large_targets(path):
    """A healthy regression on targets of size about 100 (Adam, mean squared error): its
    gradients are about 100 times those of the same net on targets of size 1 from the first
    step, and fall as the error falls."""
    x, y = regression(512)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    loss = nn.MSELoss()
    train(path, model, (x, 30 * y), lambda out, t: loss(out.squeeze(1), t), loss_fn=loss,
          steps=150, lr=0.1)
    return tracelab.open_run(path)


def test_a_squared_error_is_judged_per_unit_of_its_error(tmp_path):
    run = _large_targets(tmp_path / "large")
    raw = run.stat("grad", "norm")["2.weight"]
    assert raw.rolling(5).median().max() > 100  # the absolute bound, read raw, would fire
    assert run.loss().iloc[-5:].median() < 0.5 * run.loss().iloc[:5].median()
    assert exploding_gradients(run) == []
    # per unit of the error, the norm is still judged against the bound
    assert exploding_gradients(run, max_norm=0.05) != []


def test_a_norm_largest_at_the_first_steps_then_falling_did_not_grow():
    """A layer whose gradient is large for the first steps and then falls for good (a
    transient of the initialization) has grown from nothing: its start's median is low."""
    falling = np.r_[np.full(4, 50.0), np.full(N - 4, 0.01)]
    assert exploding_gradients(grad_run({**HEALTHY, "l0.weight": falling})) == []
    rising = np.r_[np.full(8, 0.01), np.full(N - 8, 50.0)]
    assert exploding_gradients(grad_run({**HEALTHY, "l0.weight": rising})) != []


def _growing_targets(path, record_targets: bool = True):
    """A ReLU MLP regressing targets that grow 2,000x over the run (a DQN's bootstrapped targets
    grow as its policy improves), Adam at 1e-2, a mean squared error: its gradients grow with
    the targets."""
    torch.manual_seed(0)
    x, w = torch.randn(4096, 8), torch.randn(8)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                          nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(path), model=model, optimizer=opt) as rec:
        for step in range(400):
            scale = 1 + 1999 * step / 400
            i = torch.randint(0, len(x), (32,))
            y = scale * torch.tanh(x[i] @ w).unsqueeze(1)
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x[i]), y)
            loss.backward()
            opt.step()
            rec.step(loss=loss, targets=y if record_targets else None)
    return tracelab.open_run(path)


def test_gradients_that_follow_their_growing_targets_are_no_explosion(tmp_path):
    # without the targets' scale the growth reads as an explosion
    [f] = exploding_gradients(_growing_targets(tmp_path / "blind", record_targets=False))
    assert f.severity.value == "warning" and f.evidence["growth"] >= 100
    assert exploding_gradients(_growing_targets(tmp_path / "seen")) == []


def test_growth_beyond_the_recorded_targets_still_explodes(tmp_path):
    run = _regression(tmp_path / "past", 2.2)
    assert (run.targets["int_frac"] < 1).any()  # real-valued targets were recorded, flat
    [f] = exploding_gradients(run)
    assert f.severity.value == "warning" and "targets' scale" not in f.message


def _levelled_run(loss: np.ndarray):
    """Every layer's grads grow 300x from a tiny start over the first 40 steps, then level off
    and ease down (an LSTM leaving its initialization), beside the given training loss."""
    growing = np.r_[0.01 * np.exp(np.linspace(0, np.log(300), 40)),
                    3.0 * np.linspace(1.0, 0.8, N - 40)]
    per = {name: {"norm": growing * (1 + 0.1 * i), "numel": [4096] * N}
           for i, (name, _) in enumerate(GRAD_LAYERS)}
    return make_run(model_meta(GRAD_LAYERS), scalars=[scalar_rows("loss", loss)],
                    tensors=[tensor_rows("grad", per)])


def test_growth_that_levelled_off_while_the_loss_went_on_to_halve_is_information():
    # At the peak (step 39) the loss is still 1.6 of 2.3; it halves only later.
    [f] = exploding_gradients(_levelled_run(np.linspace(2.3, 0.6, N)))
    assert f.severity.value == "info" and "kept falling" in f.message
    assert f.evidence["growth"] > 100
    # The same growth beside a loss that falls steadily without halving (a high floor) did it
    # no harm either: it never rose above its start and ended below its first steps.
    [f] = exploding_gradients(_levelled_run(np.linspace(2.3, 1.6, N)))
    assert f.severity.value == "info" and "never rose above" in f.message
    # Beside a loss that stalls, or one that rose above its start's noise on the way down,
    # it stays a warning.
    noise = 0.01 * np.random.default_rng(0).standard_normal(N)
    for loss in (np.full(N, 2.3) + noise,
                 np.r_[np.linspace(2.3, 2.2, 30), np.full(10, 2.6), np.linspace(2.2, 1.6, N - 40)]):
        [f] = exploding_gradients(_levelled_run(loss))
        assert f.severity.value == "warning"
    # A loss thrown up by the first steps' explosion (2.3, then 20) that falls back only to
    # about its first value did not halve: a warning, though its first steps' median was 20.
    thrown = np.r_[2.3, np.full(30, 20.0), np.linspace(20.0, 2.0, N - 31)]
    [f] = exploding_gradients(_levelled_run(thrown))
    assert f.severity.value == "warning"


# -- a real tiny GAN (tests/analyzers/_gan_runs.py): a game's growth, and a crossed bound -------

@pytest.fixture(scope="module")
def blind_gan(tmp_path_factory):
    """A GAN whose discriminator starts nearly blind (weights scaled by 1e-3): as it learns to
    tell real from fake, its gradients and those it passes to the generator grow, over 10x in
    500 steps (the rule is called with growth=10: a tiny run grows less than a long one)."""
    from _gan_runs import gan
    from tracelab.core.run import open_run
    torch.set_num_threads(1)
    return open_run(gan(tmp_path_factory.mktemp("gan") / "blind", d_scale=1e-3, steps=500,
                        lr=5e-3))


def test_a_games_growth_below_the_per_term_bound_is_information(blind_gan):
    [f] = exploding_gradients(blind_gan, growth=10)
    assert f.evidence["growth"] > 10 and f.evidence["peak_norm"] < 100
    assert f.severity.value == "info" and "play a game" in f.message


def test_a_game_whose_gradients_cross_the_per_term_bound_is_a_warning(blind_gan):
    # The same run judged against a bound its discriminator crosses (its BCE is a mean).
    [f] = exploding_gradients(blind_gan, growth=10, max_norm=5)
    assert f.severity.value == "warning" and "play a game" not in f.message


# -- a real tiny autoencoder on grey images, its BCE summed (as a VAE's): the loss's floor, the
# targets' entropy, lies far above 0, so a healthy run's loss falls far less than half ---------

def _grey_autoencoder(path, lr: float):
    """A linear autoencoder started near zero (both layers' weights scaled by 0.01), trained
    with SGD on a summed BCE against grey images (sigmoids of 4 patterns, values rarely 0 or
    1): its gradients climb 100x and more from their tiny start as it leaves the saddle at
    the origin. At lr 1e-3 the loss then falls steadily towards its floor; at 8e-3 the updates
    overshoot and the loss is thrown far above its start."""
    import torch.nn.functional as F
    torch.set_num_threads(1)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.sigmoid(torch.randn(512, 4, generator=g) @ torch.randn(4, 64, generator=g))
    model = nn.Sequential(nn.Linear(64, 8), nn.Linear(8, 64), nn.Sigmoid())
    with torch.no_grad():
        for layer in (model[0], model[1]):
            layer.weight.mul_(0.01)
            layer.bias.zero_()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    with tracelab.Recorder(str(path), model=model, optimizer=opt) as rec:
        for step in range(150):
            xb = x[(step * 32) % 480:(step * 32) % 480 + 32]
            out = model(xb)
            loss = F.binary_cross_entropy(out, xb, reduction="sum")
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb, targets=xb, outputs=out)
    from tracelab.core.run import open_run
    return open_run(str(path))


@pytest.mark.usefixtures("one_thread")
def test_growth_beside_a_loss_that_never_rose_and_fell_towards_a_high_floor_is_information(
        tmp_path):
    run = _grey_autoencoder(tmp_path / "calm", lr=1e-3)
    loss = run.loss()
    assert loss.iloc[-15:].median() > 0.8 * loss.iloc[0]  # far from half its start
    [f] = exploding_gradients(run)
    assert f.evidence["growth"] >= 100
    assert f.severity.value == "info" and "never rose above" in f.message


@pytest.mark.usefixtures("one_thread")
def test_growth_that_throws_the_loss_above_its_start_stays_a_warning(tmp_path):
    run = _grey_autoencoder(tmp_path / "thrown", lr=8e-3)
    assert run.loss().max() > 10 * run.loss().iloc[0]
    [f] = exploding_gradients(run)
    assert f.severity.value == "warning"
