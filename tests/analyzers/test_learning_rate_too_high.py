"""learning-rate-too-high: named from the symptoms other rules found, when two of them agree,
and only when the loss shows it; real tiny trainings and synthetic findings."""
import numpy as np
import pandas as pd
import pytest

from tracelab.analyzers.learning_rate_too_high import learning_rate_too_high
from tracelab.core.causes import Chain
from tracelab.core.findings import WARNING, Finding
from tracelab.core.run import Run


def _run(lr=None, updates=None):
    """A run with a train loss, optionally an LR schedule and a layer's update ratio."""
    frames = [pd.DataFrame({"step": range(300), "split": "train", "name": "loss", "value": 1.0})]
    if lr is not None:
        frames.append(pd.DataFrame({"step": range(300), "split": "train", "name": "lr/0",
                                    "value": lr}))
    tensors = None
    if updates is not None:
        n = len(updates)
        rows = [{"step": s, "kind": kind, "name": "0.weight", "norm": value}
                for s in range(n) for kind, value in (("update", updates[s]), ("weight", 1.0))]
        tensors = pd.DataFrame(rows)
    meta = {"model": {"parameters": [{"name": "0.weight", "shape": [4, 4]}]}}
    return Run.from_frames(meta, scalars=pd.concat(frames, ignore_index=True), tensors=tensors)


def _f(rule, steps, evidence, subject="loss"):
    return Finding(rule, "TL999", WARNING, subject, steps, f"{rule}.", evidence, "fix it")


def _alone(*findings):
    return [Chain(f, ()) for f in findings]


def test_fires_when_swings_and_large_updates_agree_and_names_the_factor():
    swings = _f("loss-oscillation", (100, 299), {"p10": 0.9, "p90": 4.7})
    updates = _f("update-ratio", (0, 299), {"worst_ratio": 0.14}, "0.weight")
    [f] = learning_rate_too_high(_run(lr=0.5), _alone(swings, updates))
    assert f.rule == "learning-rate-too-high" and f.code == "TL208"
    assert f.steps == (0, 299) and f.evidence["votes"] == ["oscillation", "updates"]
    assert "peaks at 0.5 in 'lr/0'" in f.message and f.fix.startswith("Lower the learning rate")
    assert f.evidence["symptoms"] == [swings.id, updates.id]


def test_a_spike_right_after_the_lr_rose_points_at_the_schedule():
    rise = _f("loss-spike", (150, 160), {"cause": "lr_increase", "step": 150, "lr_ratio": 10.0})
    dead = _f("dead-units", (150, 299), {"dead_frac": 0.8}, "3")
    [f] = learning_rate_too_high(_run(), _alone(rise, dead))
    assert f.evidence["votes"] == ["dead", "lr_rise"]
    assert f.fix.startswith("Check the learning-rate schedule at step 150: it rose 10x")


def test_the_fastest_layer_s_early_updates_count_without_an_update_ratio_finding():
    swings = _f("loss-oscillation", (100, 299), {"p10": 0.9, "p90": 4.7})
    early = [0.5] * 10 + [1e-3] * 40  # 500x the usual 1e-3 in the first 10 steps
    [f] = learning_rate_too_high(_run(updates=early), _alone(swings))
    assert "updates" in f.evidence["votes"] and "median of the first 10 steps" in f.message
    assert learning_rate_too_high(_run(updates=early), _alone(swings), far_above=1000.0) == []


def test_quiet_on_one_signal_or_on_symptoms_an_input_explains():
    spike = _f("loss-spike", (150, 160), {"cause": "unprofiled", "spikes_total": 1})
    burst = _f("exploding-gradients", (150, 200), {"peak_norm": 40.0}, "0.weight")
    assert learning_rate_too_high(_run(), [Chain(spike, (burst,))]) == []  # no optimization vote
    bad_batch = _f("loss-spike", (150, 160), {"cause": "input_outlier", "spikes_total": 3})
    nan_input = _f("nonfinite-values", (150, 299), {"source": "input"}, "x")
    assert learning_rate_too_high(_run(), _alone(bad_batch, nan_input)) == []
    low = _f("update-ratio", (0, 299), {"worst_ratio": 1e-7}, "0.weight")
    swings = _f("loss-oscillation", (100, 299), {"p10": 0.9, "p90": 4.7})
    assert learning_rate_too_high(_run(), _alone(swings, low)) == []  # tiny updates: no vote
    assert learning_rate_too_high(_run(), []) == []


def _game(loss):
    """A GAN's run: two optimizers (generator, discriminator), one recorded loss."""
    scalars = pd.DataFrame({"step": range(len(loss)), "split": "train", "name": "loss",
                            "value": loss})
    group = {"lr": 0.05, "params": ["D.0.weight"], "n_params": 1}
    meta = {"model": {"parameters": [{"name": "G.0.weight", "shape": [2, 2]},
                                     {"name": "D.0.weight", "shape": [5, 2]}]},
            "optimizers": {"G": {"type": "Adam", "groups": [{**group, "params": ["G.0.weight"]}]},
                           "D": {"type": "Adam", "groups": [group]}}}
    return Run.from_frames(meta, scalars=scalars)


def test_a_game_s_loss_that_swings_and_spikes_within_its_range_is_no_lr_blow_up():
    """d2l's GAN: the generator's loss falls, then swings as the discriminator answers."""
    loss = np.r_[np.linspace(13.0, 6.0, 300), 6.0 + np.sin(np.arange(700)) * 1.0]
    swings = _f("loss-oscillation", (667, 999), {"p10": 5.2, "p90": 7.3})
    spikes = _f("loss-spike", (404, 407), {"cause": "unprofiled", "spikes_total": 2})
    assert learning_rate_too_high(_game(loss), _alone(swings, spikes)) == []
    rise = _f("loss-spike", (500, 510), {"cause": "lr_increase", "step": 500, "lr_ratio": 10.0})
    dead = _f("dead-units", (500, 999), {"dead_frac": 0.8}, "D.0")
    [f] = learning_rate_too_high(_game(loss), _alone(swings, rise, dead))  # a schedule's jump
    assert f.evidence["votes"] == ["dead", "lr_rise"]
    # the same symptoms of one optimizer's loss still name the learning rate
    one = _game(loss)
    one.meta["optimizers"].pop("G")
    [f] = learning_rate_too_high(one, _alone(swings, spikes))
    assert f.evidence["votes"] == ["oscillation", "spikes"]


def test_a_game_s_loss_that_grows_counts_only_with_an_optimization_fact():
    """A game's objective moves with its players: the loss's rise and swings alone tell no
    overshoot (a generator's loss climbs as its discriminator wins); NaN/Inf still does."""
    loss = np.r_[np.full(100, 1.4), np.geomspace(1.4, 300.0, 200)]
    swings = _f("loss-oscillation", (200, 299), {"p10": 50.0, "p90": 250.0})
    spikes = _f("loss-spike", (150, 160), {"cause": "unprofiled", "spikes_total": 3})
    assert learning_rate_too_high(_game(loss), _alone(swings, spikes)) == []
    nan = np.r_[np.full(299, 1.4), np.nan]
    assert learning_rate_too_high(_game(nan), _alone(swings, spikes)) != []


# -- real tiny trainings -----------------------------------------------------------------------
def _relu_regression(path, lr):
    """A 3-layer ReLU MLP fitting a linear target with Adam at `lr`."""
    import torch
    from _contract_runs import regression, train
    from torch import nn
    torch.manual_seed(0)
    layers, width = [], 8
    for _ in range(3):
        layers += [nn.Linear(width, 32), nn.ReLU()]
        width = 32
    x, y = regression(2048)
    mse = nn.MSELoss()
    return train(path, nn.Sequential(*layers, nn.Linear(32, 1)), (x, y.unsqueeze(1)), mse,
                 loss_fn=mse, lr=lr, steps=150, batch=32)


def _bn_regression(path):
    """MorvanZhou's BatchNorm regression net, shrunk to 2 tanh layers: y = x^2 - 5 on
    x in [-7, 10] (targets in the tens, an MSE near 1,000 at the start), weights N(0, 0.1),
    biases -0.2, BatchNorm on the input and after each layer, Adam at lr 0.03, batches of 64."""
    import torch
    from _contract_runs import train
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.bn_input = nn.BatchNorm1d(1, momentum=0.5)
            layers, width = [], 1
            for _ in range(2):
                fc = nn.Linear(width, 10)
                nn.init.normal_(fc.weight, 0, 0.1)
                nn.init.constant_(fc.bias, -0.2)
                layers += [fc, nn.BatchNorm1d(10, momentum=0.5), nn.Tanh()]
                width = 10
            self.body, self.predict = nn.Sequential(*layers), nn.Linear(10, 1)
            nn.init.normal_(self.predict.weight, 0, 0.1)
            nn.init.constant_(self.predict.bias, -0.2)

        def forward(self, x):
            return self.predict(self.body(self.bn_input(x)))

    g = torch.Generator().manual_seed(0)
    x = torch.linspace(-7, 10, 2000)[torch.randperm(2000, generator=g)].unsqueeze(1)
    y = x ** 2 - 5 + 2 * torch.randn(2000, 1, generator=g)
    mse = nn.MSELoss()
    return train(path, Net(), (x, y), mse, loss_fn=mse, lr=0.03, steps=400, batch=64)


def _analyzed(path):
    import tracelab
    diagnosis = tracelab.analyze(path)
    assert not diagnosis.errors, diagnosis.errors
    return diagnosis


@pytest.mark.usefixtures("one_thread")
def test_adam_at_lr_1_fires_and_ranks_first_where_lr_1e_2_stays_quiet(tmp_path):
    diagnosis = _analyzed(_relu_regression(tmp_path / "high", lr=1.0))
    [f] = [f for f in diagnosis.findings if f.rule == "learning-rate-too-high"]
    assert diagnosis.diagnoses[0].finding is f
    assert {"updates", "dead"} <= set(f.evidence["votes"])
    assert f.evidence["loss_end"] > f.evidence["loss_start"] / 4  # the loss barely fell
    assert f.fix.startswith("Lower the learning rate")
    quiet = _analyzed(_relu_regression(tmp_path / "ok", lr=1e-2))
    assert [f for f in quiet.findings if f.rule == "learning-rate-too-high"] == []


@pytest.mark.usefixtures("one_thread")
def test_a_large_scale_mse_whose_loss_falls_tenfold_is_no_lr_too_high(tmp_path):
    """Gradient norms in the hundreds (they scale with the loss) and Adam's updates of 0.1 of
    small weights (lr / |w|) are there, but the loss fell from about 1,100 to under 100: no
    warning at all (the symptoms' rules judge gradients per unit of error, spikes on the log
    scale), and a vote the rule is handed is vetoed by the loss's fall."""
    from tracelab.core.run import open_run
    path = _bn_regression(tmp_path / "r")
    diagnosis = _analyzed(path)
    assert [f.rule for f in diagnosis.findings if f.severity.value != "info"] == []
    run = open_run(path)
    swings = _f("loss-oscillation", (100, 299), {"p10": 0.9, "p90": 4.7})
    updates = _f("update-ratio", (0, 299), {"worst_ratio": 0.14}, "0.weight")
    assert learning_rate_too_high(run, _alone(swings, updates)) == []
    [f] = learning_rate_too_high(run, _alone(swings, updates), fell=float("inf"))
    assert f.evidence["loss_start"] >= 4 * f.evidence["loss_end"]


# -- what ranks above it -----------------------------------------------------------------------
def _vanishing():
    return _f("vanishing-gradients", (0, 299), {"ratio": 3e-12}, "0.weight")


def test_a_cause_that_keeps_the_loss_flat_by_itself_ranks_above_it():
    from tracelab.app.diagnose import diagnose
    swings = _f("loss-oscillation", (100, 299), {"p10": 0.9, "p90": 4.7})
    updates = _f("update-ratio", (0, 299), {"worst_ratio": 0.14}, "0.weight")
    vanish = _vanishing()
    _, [d] = diagnose(_run(lr=0.5), [vanish, swings, updates])
    assert d.finding.rule == "vanishing-gradients"
    assert "learning-rate-too-high" in [f.rule for f in d.explains]
    # a jump right after the LR rose is the schedule's, whatever else keeps the loss high
    rise = _f("loss-spike", (150, 160), {"cause": "lr_increase", "step": 150, "lr_ratio": 10.0})
    _, ranked = diagnose(_run(lr=0.5), [_vanishing(), rise, updates])
    assert ranked[0].finding.rule == "learning-rate-too-high"


def test_units_dead_from_the_start_cast_no_vote_and_rank_above_it():
    swings = _f("loss-oscillation", (100, 299), {"p10": 0.9, "p90": 4.7})
    born_dead = _f("dead-units", (0, 299), {"dead_frac": 0.9, "dead_frac_first": 0.9}, "3")
    assert learning_rate_too_high(_run(), _alone(swings, born_dead)) == []
    died = _f("dead-units", (150, 299), {"dead_frac": 0.9, "dead_frac_first": 0.0}, "3")
    [f] = learning_rate_too_high(_run(), _alone(swings, died))
    assert f.evidence["votes"] == ["dead", "oscillation"]


def test_a_flat_loss_whose_units_died_after_large_first_steps_names_the_lr():
    """Lightning's backbone classifier at Adam lr 1: the first steps move the weights by 0.2
    of their norm, then every weight matrix gets zero gradients and the loss stays at ln 10."""
    early = [0.5] * 10 + [0.0] * 40
    plateau = _f("loss-plateau", (0, 299), {"zero_grad_layers": 2, "start_loss": 2.3,
                                            "end_loss": 2.3})
    [f] = learning_rate_too_high(_run(updates=early), _alone(plateau))
    assert f.evidence["votes"] == ["flat", "updates"] and "stayed flat" in f.message
    # a plateau that names another reason (vanishing gradients, tiny updates) casts no vote
    other = _f("loss-plateau", (0, 299), {"grad_ratio": 1e-5, "start_loss": 2.3,
                                          "end_loss": 2.3})
    assert learning_rate_too_high(_run(updates=early), _alone(other)) == []
    # nor does one after small first steps: the units died of something else
    assert learning_rate_too_high(_run(updates=[1e-3] * 50), _alone(plateau)) == []


# -- an objective that keeps improving -----------------------------------------------------------
def _growing_targets(path, lr, metric):
    """A ReLU MLP regressing targets that grow 40x over the run (a DQN's bootstrapped targets
    grow as its policy improves), with Adam at `lr`; every 10 steps it logs on the val split
    either "episode_reward" (the return the targets follow, rising throughout) or "score"
    (the model's R^2 on held-out inputs)."""
    import torch
    from torch import nn

    import tracelab
    torch.manual_seed(0)
    x, w, xv = torch.randn(4096, 8), torch.randn(8), torch.randn(256, 8)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                          nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    steps = 600
    with tracelab.Recorder(str(path), model=model, optimizer=opt) as rec:
        for step in range(steps):
            scale = 1 + 39 * step / steps
            i = torch.randint(0, len(x), (32,))
            y = scale * torch.tanh(x[i] @ w).unsqueeze(1)
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x[i]), y)
            loss.backward()
            opt.step()
            rec.step(loss=loss, targets=y)
            if step % 10 == 0:
                with torch.no_grad():
                    yv = scale * torch.tanh(xv @ w).unsqueeze(1)
                    score = 1 - ((model(xv) - yv) ** 2).mean() / yv.var()
                value = scale * (1 + 0.1 * torch.randn(()).item()) if metric == \
                    "episode_reward" else score.item()
                rec.log("val", {metric: value})
    return path


@pytest.mark.usefixtures("one_thread")
def test_an_objective_that_keeps_improving_vetoes_the_symptoms(tmp_path):
    from tracelab.core.run import open_run
    path = _growing_targets(tmp_path / "rising", 1e-2, "episode_reward")
    diagnosis = _analyzed(path)
    assert [f for f in diagnosis.findings if f.rule == "learning-rate-too-high"] == []
    # votes it is handed (swings, large updates) are vetoed by the reward alone
    swings = _f("loss-oscillation", (100, 299), {"p10": 0.9, "p90": 4.7})
    updates = _f("update-ratio", (0, 299), {"worst_ratio": 0.14}, "0.weight")
    run = open_run(path)
    assert learning_rate_too_high(run, _alone(swings, updates)) == []
    assert learning_rate_too_high(run, _alone(swings, updates), alpha=0.0) != []


@pytest.mark.usefixtures("one_thread")
def test_a_score_that_climbs_from_its_init_to_chance_vetoes_nothing(tmp_path):
    diagnosis = _analyzed(_growing_targets(tmp_path / "high", 1.0, "score"))
    [f] = [f for f in diagnosis.findings if f.rule == "learning-rate-too-high"]
    assert f.severity.value in ("warning", "error")


# -- the loss's rise under the first updates ---------------------------------------------------
def _loss_run(loss, updates=None):
    """A run with this train loss and, optionally, one layer's update ratio per step."""
    scalars = pd.DataFrame({"step": range(len(loss)), "split": "train", "name": "loss",
                            "value": loss})
    tensors = None
    if updates is not None:
        tensors = pd.DataFrame([{"step": s, "kind": kind, "name": "0.weight", "norm": value}
                                for s in range(len(updates))
                                for kind, value in (("update", updates[s]), ("weight", 1.0))])
    meta = {"model": {"parameters": [{"name": "0.weight", "shape": [4, 4]}]}}
    return Run.from_frames(meta, scalars=scalars, tensors=tensors)


def test_a_loss_far_above_its_first_value_under_large_updates_fires_without_other_findings():
    """Adam at lr 1 on a summed loss: 600 before the first update, 1e5-1e7 over the next
    steps, back near 600 (the best constant prediction's) by the end; no other rule fired."""
    loss = np.r_[600.0, np.geomspace(1e7, 1e3, 150), np.full(150, 590.0)]
    early = [0.3] * 10 + [0.05] * 290
    [f] = learning_rate_too_high(_loss_run(loss, early), [])
    assert f.evidence["votes"] == ["rose", "updates"] and f.evidence["symptoms"] == []
    assert f.steps == (1, 30) and "under the first updates" in f.message
    # a healthy first step (the loss falls) or one outlier batch after it: no vote
    assert learning_rate_too_high(_loss_run(np.r_[600.0, loss[151:]], early), []) == []
    one = np.r_[600.0, 1e6, np.full(298, 590.0)]
    assert learning_rate_too_high(_loss_run(one, early), []) == []
    # one vote is not enough; a rise smaller than `jump` is a `worse` vote, none below `worse`
    assert learning_rate_too_high(_loss_run(loss, [1e-3] * 300), []) == []
    [g] = learning_rate_too_high(_loss_run(loss, early), [], jump=1e5)
    assert g.evidence["votes"] == ["updates", "worse"]
    assert learning_rate_too_high(_loss_run(loss, early), [], jump=1e5, worse=1e5) == []


def _by_hand(path, lr):
    """jcjohnson's two_layer_net_autograd, shrunk: randn weights, no biases, a summed squared
    error, `w -= lr * w.grad` by hand (no optimizer object recorded)."""
    import torch
    from torch import nn

    import tracelab

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Parameter(torch.randn(20, 32))
            self.w2 = nn.Parameter(torch.randn(32, 4))

        def forward(self, x):
            return x.mm(self.w1).clamp(min=0).mm(self.w2)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 20, generator=g)
    y = torch.relu(x @ torch.randn(20, 32, generator=g) / 20 ** .5) \
        @ torch.randn(32, 4, generator=g) / 32 ** .5
    torch.manual_seed(0)
    net = Two()
    with tracelab.Recorder(str(path), model=net) as rec:
        for t in range(200):
            i = (t * 32) % (len(x) - 32)
            xb, yb = x[i:i + 32], y[i:i + 32]
            out = net(xb)
            loss = (out - yb).pow(2).sum()
            loss.backward()
            with torch.no_grad():
                for p in net.parameters():
                    p -= lr * p.grad
                    p.grad.zero_()
            rec.step(loss=loss, inputs=xb, targets=yb, outputs=out)
    return path


@pytest.mark.usefixtures("one_thread")
def test_a_loss_that_climbs_to_inf_under_hand_written_steps_names_them(tmp_path):
    """At lr 1e-3 each step overshoots: the loss climbs 1e4 -> 1e6 -> 1e9 -> 1e19 -> Inf. The
    steps, not a log(0), made it non-finite: the cause ranks first and explains NaN/Inf."""
    diagnosis = _analyzed(_by_hand(tmp_path / "high", 1e-3))
    first = diagnosis.diagnoses[0].finding
    assert first.rule == "learning-rate-too-high"
    assert set(first.evidence["votes"]) == {"nonfinite", "rose"}
    assert first.message.startswith("The steps are too large")
    assert "nonfinite-values" in {f.rule for f in diagnosis.diagnoses[0].explains}
    quiet = _analyzed(_by_hand(tmp_path / "ok", 1e-4))
    assert [f for f in quiet.findings if f.rule == "learning-rate-too-high"] == []


@pytest.mark.usefixtures("one_thread")
def test_the_fastest_layer_is_read_per_optimizer_step_of_an_inner_loop(tmp_path):
    """The updates' vote reads one optimizer step's size, as update-ratio does: 20 healthy
    Adam steps summed into one recorded update are no update of 0.1 of the weights."""
    from _contract_runs import inner_loop

    from tracelab.analyzers.learning_rate_too_high import _fastest
    from tracelab.core.schema import UPDATE, WEIGHT
    run = inner_loop(tmp_path / "inner", lr=3e-3, inner=20)
    recorded = (run.stat(UPDATE, "norm") / run.stat(WEIGHT, "norm")).median()
    assert recorded.max() > 0.1  # read whole, it would reach the vote's bound
    name, ratio, _ = _fastest(run, early=5)
    assert ratio < 0.1 and ratio < recorded.max() / 5
    large = inner_loop(tmp_path / "large", lr=3.0, inner=3)
    assert _fastest(large, early=5)[1] > 0.1  # each of its steps is too large: still read so


def _row_lstm(path, lr):
    """aladdinpersson's row-by-row LSTM classifier, shrunk: 8 rows of 8 features, a 2-layer
    LSTM whose every time step's output is flattened into one linear layer, Adam at `lr`."""
    import torch
    from _contract_runs import blobs, train
    from torch import nn

    class Rows(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, 64, 2, batch_first=True)
            self.fc = nn.Linear(64 * 8, 10)

        def forward(self, x):
            out, _ = self.lstm(x.view(-1, 8, 8))
            return self.fc(out.reshape(len(x), -1))

    torch.manual_seed(0)
    x, y = blobs(4096, features=64, classes=10)
    x = x / 4 + torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    ce = nn.CrossEntropyLoss()
    return train(path, Rows(), (x, y), ce, loss_fn=ce, lr=lr, steps=120, batch=32)


def test_first_updates_that_leave_the_model_worse_than_untrained_count_with_large_updates(
        tmp_path):
    """Adam at lr 0.1 throws the LSTM's cross-entropy from ln 10 to 6-8 in its first steps
    (under the 100-fold divergence) while its updates reach 0.2 of the weights per step: two
    votes, no other rule's finding. At lr 5e-3 the loss falls from the first step."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import tracelab
    [f] = learning_rate_too_high(tracelab.open_run(_row_lstm(tmp_path / "high", 0.1)), [])
    assert f.evidence["votes"] == ["updates", "worse"] and f.evidence["symptoms"] == []
    assert "above its first value under the first updates" in f.message
    assert learning_rate_too_high(tracelab.open_run(_row_lstm(tmp_path / "ok", 5e-3)), []) == []


def test_a_rise_across_batches_stepped_on_again_casts_no_vote(tmp_path):
    """PPO-like epochs over each batch whose loss falls on each: the batches' levels differ,
    so a loss above its first value under the first updates is the next batch's, not the
    steps'."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import importlib

    import tracelab
    from _rollouts_and_games import rollouts

    from tracelab.analyzers._learning_rate import descends_per_batch
    _votes = importlib.import_module("tracelab.analyzers.learning_rate_too_high")._votes
    run = tracelab.open_run(rollouts(tmp_path / "ppo", seed=1))
    assert descends_per_batch(run)
    assert "worse" not in _votes(run, [], 100.0, 10, (1, 30, 5.0))
    assert "worse" in _votes(tracelab.open_run(rollouts(tmp_path / "high", lr=1.0, seed=1)), [],
                             100.0, 10, (1, 30, 5.0))


def _mlp_nll(path, lr: float):
    """An MLP of two hidden ReLU layers with dropout, LogSoftmax and nll_loss, trained with Adam
    on 10 blobs of 64 features (the optuna example's shape)."""
    import torch
    from _contract_runs import blobs, train
    from torch import nn

    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 32),
                          nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 10), nn.LogSoftmax(dim=1))
    torch.manual_seed(0)
    x, y = blobs(4096, features=64, classes=10)
    x = x / 4 + torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    nll = nn.NLLLoss()
    return train(path, model, (x, y), nll, loss_fn=nll, lr=lr, steps=120, batch=128)


def test_first_two_updates_each_worse_than_untrained_count_though_the_loss_recovers(tmp_path):
    """Adam at lr 0.3 (a rate meant for SGD): its first steps throw the loss 4-18 times above
    ln 10 before Adam's second moment damps them, and it settles at ln 10, so the median of
    the first tenth is back near the start; each of the first two updates' losses still counts
    as `worse`. At lr 1e-3 the loss falls from the first step."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import importlib

    import tracelab
    _rose = importlib.import_module("tracelab.analyzers.learning_rate_too_high")._rose
    high = tracelab.open_run(_mlp_nll(tmp_path / "high", 0.3))
    rose = _rose(high, 2.0)
    assert rose is not None and rose[3] == "each" and rose[:2] == (1, 2)
    [f] = learning_rate_too_high(high, [])
    assert {"updates", "worse"} <= set(f.evidence["votes"]) and "rose" not in f.evidence["votes"]
    assert "each of steps 1-2" in f.message
    ok = tracelab.open_run(_mlp_nll(tmp_path / "ok", 1e-3))
    assert _rose(ok, 2.0) is None and learning_rate_too_high(ok, []) == []


def test_units_that_died_judged_benign_leave_the_finding_a_warning():
    """Adam at lr 1 on a CNN: 90% of a layer's units die under first steps of 0.5 of the
    weights' norm, and dead-units says info (the live ones still carry the signal): the step
    size is the fault all the same, a warning, not an info inherited from that symptom."""
    from tracelab.core.findings import ERROR, INFO

    early = [0.5] * 10 + [1e-3] * 40
    died = Finding("dead-units", "TL203", INFO, "3", (25, 299),
                   "dead.", {"dead_frac": 0.9, "dead_frac_first": 0.0}, "fix it")
    [f] = learning_rate_too_high(_run(updates=early), _alone(died))
    assert f.evidence["votes"] == ["dead", "updates"] and f.severity == WARNING
    # a symptom that is an error keeps it an error
    worse = Finding("dead-units", "TL203", ERROR, "3", (25, 299),
                    "dead.", {"dead_frac": 0.97, "dead_frac_first": 0.0}, "fix it")
    assert learning_rate_too_high(_run(updates=early), _alone(worse))[0].severity == ERROR
    # the same died units after small first steps: no vote about the step, quiet
    assert learning_rate_too_high(_run(updates=[1e-3] * 50), _alone(died)) == []


def test_a_loss_stuck_at_the_input_free_prediction_under_huge_first_steps_names_the_lr():
    """A loss that settled at the level of the best prediction that ignores the input
    (target-problems' constant-prediction finding) is a vote beside updates 100x the usual in
    the first steps (Adam at lr 0.1 on weights of scale 0.02: a character-level GPT that only
    learns the class shares); the finding then explains target-problems' finding. After
    first steps of the usual size, the targets stay the suspect: quiet. Nor does a
    target-problems note of another kind (a class balance) vote."""
    from tracelab.app.diagnose import link_order
    from tracelab.app.engine import all_rules
    from tracelab.core.causes import link_between
    stuck = _f("target-problems", (0, 299), {"cause": "targets_unaligned",
                                              "late_loss_to_constant": 1.01,
                                              "train_loss_late": 3.12, "constant_loss": 3.07},
               "targets vs inputs")
    early = [0.2] * 10 + [0.03] * 40
    [f] = learning_rate_too_high(_run(updates=early), _alone(stuck))
    assert f.evidence["votes"] == ["constant", "updates"] and "3.07" in f.message
    assert link_between(link_order(all_rules()), f, stuck) is not None
    assert learning_rate_too_high(_run(updates=[1e-3] * 50), _alone(stuck)) == []
    balance = _f("target-problems", (0, 299), {"cause": "imbalance"}, "target")
    assert learning_rate_too_high(_run(updates=early), _alone(balance)) == []


def _blobs_sgd(path, lr: float):
    """An MLP with BatchNorm on 4 noisy blobs, momentum SGD, its validation accuracy logged
    every 15 steps."""
    import torch
    from _contract_runs import blobs
    from torch import nn

    import tracelab
    torch.manual_seed(0)
    x, y = blobs(2048, features=16, classes=4)
    x = x / 3 + torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    xv, yv, x, y = x[-512:], y[-512:], x[:-512], y[:-512]
    model = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    ce = nn.CrossEntropyLoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=ce) as rec:
        for step in range(150):
            i = (step * 32) % (len(x) - 31)
            opt.zero_grad()
            loss = ce(model(x[i:i + 32]), y[i:i + 32])
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x[i:i + 32], targets=y[i:i + 32])
            if (step + 1) % 15 == 0:
                model.eval()
                with torch.no_grad():
                    acc = (model(xv).argmax(1) == yv).float().mean()
                rec.log("val", metrics={"acc": acc})
                model.train()
    return path


@pytest.mark.usefixtures("one_thread")
def test_a_validation_score_that_falls_below_its_first_evaluations_counts_with_large_updates(
        tmp_path):
    """SGD at lr 3 (momentum 0.9): updates near 0.3 of the weights per step, and the val
    accuracy falls from 0.55-0.69 at its first evaluations to 0.24: the steps threw the model
    away from what it found. That vote with the updates fires alone (the first updates' rise
    left out); at lr 0.01 the accuracy climbs to 0.89 and the rule stays quiet."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import tracelab
    high = tracelab.open_run(_blobs_sgd(tmp_path / "high", 3.0))
    [f] = learning_rate_too_high(high, [], worse=float("inf"), jump=float("inf"))
    assert f.evidence["votes"] == ["objective_lost", "updates"]
    assert "val acc fell" in f.message
    ok = tracelab.open_run(_blobs_sgd(tmp_path / "ok", 0.01))
    assert learning_rate_too_high(ok, []) == []


def _growing_sum(path, lr: float):
    """A linear regression whose loss is summed over batches that grow from 8 rows to 256
    (an episode that lasts longer as the policy improves), with Adam; no loss_fn recorded."""
    import torch
    from _contract_runs import regression
    from torch import nn

    import tracelab
    torch.manual_seed(0)
    x, y = regression(4096)
    model = nn.Linear(8, 1)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, input_every=1) as rec:
        start = 0
        for step in range(60):
            rows = min(8 * (step + 1), 256)
            xb, yb = x[start:start + rows], y[start:start + rows]
            start = (start + rows) % (len(x) - 256)
            opt.zero_grad()
            loss = ((model(xb).squeeze(1) - yb) ** 2).sum()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb)
    return path


@pytest.mark.usefixtures("one_thread")
def test_a_summed_loss_that_rises_with_its_rows_casts_no_rise_vote(tmp_path):
    """A loss summed over batches that grow 32-fold rises with its rows under the first
    updates, though each row's error falls: with swings handed to it, the rule stays quiet
    (the rise is below `worse` times the rows' spread). Told the loss is a mean, that rise
    is one (the rule does not know the rows' sum then)."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import importlib

    import tracelab
    module = importlib.import_module("tracelab.analyzers.learning_rate_too_high")
    run = tracelab.open_run(_growing_sum(tmp_path / "sum", 1e-2))
    assert module._rose(run, 2.0) is not None and module._rows_spread(run) >= 30
    swings = _f("loss-oscillation", (10, 59), {"p10": 50.0, "p90": 400.0})
    assert learning_rate_too_high(run, _alone(swings)) == []
    meta = {**run.meta, "loss_fn": {"type": "MSELoss", "reduction": "mean"}}
    told = Run.from_frames(meta, scalars=run.scalars, tensors=run.tensors, inputs=run.inputs)
    assert module._rows_spread(told) == 1.0
    [f] = learning_rate_too_high(told, _alone(swings))
    assert {"worse", "rose"} & set(f.evidence["votes"]) and "loss rose" in f.message


def _scaled_batches(path, lr: float, spread: float):
    """A linear regression whose batches come in units 10 ** U(-spread, spread) apart (inputs
    and targets scaled together, so one weight vector fits all), the first batch the smallest:
    its mean squared error jumps 100-fold from one step to the next by design. Adam."""
    import torch
    from torch import nn

    import tracelab
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    x = torch.randn(4096, 8, generator=g)
    y = x @ torch.randn(8, generator=g)
    scales = 10 ** (spread * (2 * torch.rand(60, generator=g) - 1))
    scales[0] = 10 ** -spread
    model = nn.Linear(8, 1)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    mse = nn.MSELoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=mse,
                           input_every=5) as rec:
        for step in range(60):
            xb, yb = x[32 * step:32 * step + 32] * scales[step], y[32 * step:32 * step + 32] * \
                scales[step]
            opt.zero_grad()
            out = model(xb).squeeze(1)
            loss = mse(out, yb)
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb, targets=yb, outputs=out)
    return path


@pytest.mark.usefixtures("one_thread")
def test_a_rise_within_the_loss_s_own_step_to_step_spread_casts_no_vote(tmp_path):
    """Batches two decades apart in scale, the first the smallest: the loss's next steps lie
    13x above its first value, as they lie above many another step's, so with updates of 0.1
    of the weights beside it the rule stays quiet; the LSTM thrown from ln 10 to 6-8 by Adam
    at lr 0.1 rises far beyond its own steps' spread, and fires."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import importlib

    import tracelab
    module = importlib.import_module("tracelab.analyzers.learning_rate_too_high")
    noisy = tracelab.open_run(_scaled_batches(tmp_path / "noisy", 0.1, 1.0))
    rose = module._rose(noisy, 2.0)
    assert rose is not None and 2.0 <= rose[2] < module._loss_tail(noisy)
    assert {"worse", "updates"} <= set(module._votes(noisy, [], 100.0, 10, rose))
    assert learning_rate_too_high(noisy, []) == []
    lstm = tracelab.open_run(_row_lstm(tmp_path / "lstm", 0.1))
    rose = module._rose(lstm, 2.0)
    assert rose is not None and rose[2] >= max(2.0, module._loss_tail(lstm))
    assert "worse" in learning_rate_too_high(lstm, [])[0].evidence["votes"]


@pytest.mark.usefixtures("one_thread")
def test_a_mean_loss_s_partial_last_batch_does_not_raise_the_rise_bar(tmp_path):
    """The LSTM thrown from ln 10 to 6-8 by Adam at lr 0.1, its loss's reduction not told and
    its last profiled batch a quarter of the others (drop_last=False): its mean loss does not
    follow its rows (no `sums_over_batch`), so the rows' spread stays 1 and the rise still
    votes; the summed loss over lengthening batches keeps its spread (first steps only)."""
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import importlib

    import tracelab
    module = importlib.import_module("tracelab.analyzers.learning_rate_too_high")
    lstm = tracelab.open_run(_row_lstm(tmp_path / "lstm", 0.1))
    meta = {k: v for k, v in lstm.meta.items() if k != "loss_fn"}
    inputs = lstm.inputs.copy()
    last = inputs["step"] == inputs["step"].max()
    inputs.loc[last, "count"] = inputs.loc[last, "count"] // 4
    untold = Run.from_frames(meta, scalars=lstm.scalars, tensors=lstm.tensors, inputs=inputs)
    assert module._rows_spread(untold) == 1.0
    assert "worse" in learning_rate_too_high(untold, [])[0].evidence["votes"]
    summed = tracelab.open_run(_growing_sum(tmp_path / "sum", 1e-2))
    rose = module._rose(summed, 2.0)
    assert rose is not None and module._rows_spread(summed, rose[1]) > rose[2] / 2.0


def test_labels_that_carry_no_signal_cast_one_vote_for_a_constant_and_a_lost_score():
    """A model at the prediction that ignores the input (shuffled labels) scores worse than
    its first evaluations' luck too: that is one fact, so beside it the rule needs another
    primary vote, and the two appear as one."""
    n = 40
    steps = np.arange(n)
    scalars = pd.concat([
        pd.DataFrame({"step": steps, "split": "train", "name": "loss",
                      "value": np.full(n, 2.3)}),
        pd.DataFrame({"step": steps[::4], "split": "val", "name": "acc",
                      "value": np.r_[[0.16, 0.15, 0.14], np.full(7, 0.02)]})])
    run = Run.from_frames({"run_id": "shuffled"}, scalars=scalars)
    constant = _f("target-problems", (0, n - 1),
                  {"train_loss_late": 2.3, "constant_loss": 2.3})
    import importlib
    module = importlib.import_module("tracelab.analyzers.learning_rate_too_high")
    lost = module._objective_lost(run)
    assert lost is not None
    votes = module._votes(run, [constant], 100.0, 10, None, 100.0, lost)
    assert "objective_lost" not in votes and "acc fell" in votes["constant"][0]


def test_a_score_that_never_beat_the_largest_class_loses_nothing():
    """Accuracy falling from .16 to .02 over ten classes of about a tenth each is a lost
    score; falling from .09 to .06 never beat the largest class (12%) alone: luck, no vote."""
    import importlib
    module = importlib.import_module("tracelab.analyzers.learning_rate_too_high")
    shares = np.r_[[12], np.full(9, 11)]
    classes = pd.DataFrame({"step": 0, "split": "train", "target": "target",
                            "label": np.arange(10), "count": shares})
    loss = pd.DataFrame({"step": np.arange(40), "split": "train", "name": "loss",
                         "value": np.full(40, 2.3)})

    def run(first, late):
        acc = pd.DataFrame({"step": np.arange(0, 40, 4), "split": "val", "name": "acc",
                            "value": np.r_[[first] * 3, [late] * 7]})
        return Run.from_frames({"run_id": "acc"}, scalars=pd.concat([loss, acc]),
                               classes=classes)
    assert module._objective_lost(run(0.16, 0.02)) is not None
    assert module._objective_lost(run(0.09, 0.06)) is None


@pytest.mark.usefixtures("one_thread")
def test_a_loss_against_keys_of_a_momentum_copy_casts_no_vote_on_its_level(tmp_path,
                                                                          monkeypatch):
    # MoCo: the first step's loss is against a queue of random keys, far below the level the
    # key encoder's real keys set, and the loss swings as its momentum copy moves: its rise and
    # swings are the objective's, not an overshoot, where no optimization fact shows one. A key
    # encoder that never moves (m = 1) leaves a fixed objective, whose rise and swings count.
    pytest.importorskip("torch")
    import sys

    from _moco_run import moco

    def lr_findings(path):
        return [f for f in _analyzed(path).findings if f.rule == "learning-rate-too-high"]

    kw = dict(lr=0.003, batch=8, noise=2.0, queue=64)
    moving = moco(tmp_path / "moco", m=0.99, **kw)
    assert lr_findings(moving) == []
    [f] = lr_findings(moco(tmp_path / "fixed", m=1.0, **kw))
    assert "oscillation" in f.evidence["votes"]
    # the moving copy is what quiets it: judged without that fact, the same run fires
    for name in ("learning_rate_too_high", "loss_oscillation"):
        monkeypatch.setattr(sys.modules[f"tracelab.analyzers.{name}"],
                            "copy_level_uninformative", lambda run: False)
    assert len(lr_findings(moving)) == 1


def _bootstrapped_rmsprop(path, lr):
    """A tiny Q regression on bootstrapped targets r + 0.9 max Q(s') under RMSprop, its head
    scaled by 1e-3 at init (DeepRL's layer_init(w_scale=1e-3))."""
    import torch
    import torch.nn as nn

    import tracelab
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    q = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    with torch.no_grad():
        q[2].weight.mul_(1e-3)
        q[2].bias.zero_()
    opt = torch.optim.RMSprop(q.parameters(), lr=lr)
    with tracelab.Recorder(str(path), model=q, optimizer=opt, loss_fn=nn.MSELoss()) as rec:
        for _ in range(300):
            s, s2 = torch.randn(32, 4, generator=g), torch.randn(32, 4, generator=g)
            with torch.no_grad():
                target = 5.0 + 0.9 * q(s2).max(1, keepdim=True)[0]
            out = q(s)[:, :1]
            loss = nn.functional.mse_loss(out, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=s, targets=target, outputs=out)
    return tracelab.open_run(path)


@pytest.mark.usefixtures("one_thread")
def test_a_small_head_s_first_rmsprop_steps_are_no_overshoot_of_bootstrapped_targets(
        tmp_path):
    # RMSprop moves each weight by about lr / sqrt(1 - alpha) at first, whatever the gradient:
    # a head initialized at 1e-3 scale shows updates far above 1e-3 of its norm by design, and
    # the moving targets' loss level still abstains. A learning rate that is itself a tenth of
    # the weights' usual size or more is an overshoot, and the loss's level counts again.
    pytest.importorskip("torch")
    from tracelab.analyzers._learning_rate import moving_targets, overshoot_facts
    from tracelab.analyzers._moving_copy import kind_overshoot, targets_level_uninformative

    small = _bootstrapped_rmsprop(tmp_path / "small", 1e-3)
    assert moving_targets(small) and overshoot_facts(small)  # the weight-relative reading
    assert not kind_overshoot(small) and targets_level_uninformative(small)
    large = _bootstrapped_rmsprop(tmp_path / "large", 0.3)
    assert kind_overshoot(large) and not targets_level_uninformative(large)


# -- units that died right after a step that rewrote their weights ------------------------------
def _died_after(ratio, severity=WARNING, subject="3", first=0.05, usual=1e-3):
    """A dead-units finding whose units died at step 25 (or, `first` at 0.5 or more, were half
    dead from step 0), holding the largest update the layer before them took up to then and
    the median of that layer's updates over the same steps (dead-units'
    `update_ratio_before_onset`, `update_ratio_median_before_onset`)."""
    onset = 25 if first < 0.5 else 0
    return Finding("dead-units", "TL203", severity, subject, (onset, 299), "dead-units.",
                   {"dead_frac": 1.0 if first < 0.5 else 0.75, "dead_frac_first": first,
                    "update_ratio_before_onset": ratio, "update_ratio_weight": "2.weight",
                    "update_ratio_step": 0, "onset_step": onset,
                    "update_ratio_median_before_onset": usual}, "fix it")


def test_units_that_died_after_an_oversized_step_name_the_lr_the_median_hides():
    """A WGAN's generator at RMSprop lr 100x its script's: its first step moves a layer by half
    its norm, the units after it die and its updates stop, so the median over the run and over
    its first steps is 0; the order in time (the step, then the death) is the vote."""
    hidden = _run(updates=[0.5] + [0.0] * 49)
    [f] = learning_rate_too_high(hidden, _alone(_died_after(0.5)))
    assert f.evidence["votes"] == ["dead", "updates"] and f.evidence["burst_before_death"]
    assert "'2.weight' changed by 0.5 of its norm in one step (step 0), 500x" in f.message
    # an ordinary step before the death, or a death the live units make up for: no vote
    assert learning_rate_too_high(hidden, _alone(_died_after(5e-3))) == []
    from tracelab.core.findings import INFO
    assert learning_rate_too_high(hidden, _alone(_died_after(0.5, INFO))) == []


def test_a_layer_whose_every_step_is_large_for_its_norm_holds_no_burst_before_a_death():
    """Adam moves each weight by about lr per step, so a layer initialized at N(0, 0.01) shows
    updates far above 1e-3 of its norm from step 0 on, falling smoothly (0.114 to 0.047) as
    it grows: its largest step is no burst unless 10x its median up to the death or more."""
    hidden = _run(updates=[0.5] + [0.0] * 49)
    assert learning_rate_too_high(hidden, _alone(_died_after(0.114, usual=0.047))) == []
    [f] = learning_rate_too_high(hidden, _alone(_died_after(0.5, usual=0.047)))
    assert f.evidence["burst_before_death"]
    # no median recorded (or a malformed one): no vote
    for usual in (None, float("nan"), "0.01"):
        assert learning_rate_too_high(hidden, _alone(_died_after(0.5, usual=usual))) == []


def test_the_step_that_killed_units_ranks_above_them_and_above_units_dead_from_the_start():
    from tracelab.app.diagnose import diagnose
    hidden = _run(updates=[0.5] + [0.0] * 49)
    born = _died_after(5e-3, subject="5", first=0.5)  # half its units silent from the start
    _, ranked = diagnose(hidden, [_died_after(0.5), born])
    assert ranked[0].finding.rule == "learning-rate-too-high"
    assert [f.subject for f in ranked[0].explains if f.rule == "dead-units"] == ["3"]
    # units that died after ordinary steps: the death itself ranks first, nothing names the LR
    _, ranked = diagnose(_run(updates=[1e-3] * 50), [_died_after(5e-3)])
    assert [d.finding.rule for d in ranked] == ["dead-units"]
