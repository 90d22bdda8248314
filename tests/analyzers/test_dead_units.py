"""dead-units: ReLU layers whose units never fire, judged against the loss of the best constant
prediction; other activations and NaN rows are ignored."""
import numpy as np
import pytest
from dynamics_frames import make_run, model_meta, tensor_rows

from tracelab.analyzers.dead_units import dead_units

STEPS = list(range(0, 300, 10))  # activations every 10 steps
MODULES = [("fc1", "Linear"), ("act1", "ReLU"), ("fc2", "Linear"), ("act2", "LeakyReLU"),
           ("head", "Linear")]


def _frac(level_from, level_to, seed=0):
    rng = np.random.default_rng(seed)
    values = np.linspace(level_from, level_to, len(STEPS)) + 0.02 * rng.standard_normal(len(STEPS))
    return np.clip(values, 0, 1)


def _run(per_module, nan_from=None):
    n = len(STEPS)
    per = {}
    for name, _ in MODULES:
        dead = per_module.get(name, _frac(0.05, 0.05, len(per)))
        nan = np.zeros(n, dtype=np.int64)
        if nan_from is not None:
            nan[nan_from:] = 10
        per[name] = {"dead_frac": dead, "nan_count": nan, "inf_count": [0] * n}
    return make_run(model_meta(modules=MODULES),
                    tensors=[tensor_rows("activation", per, steps=STEPS)])


def test_fires_on_a_relu_layer_that_died_during_training():
    [f] = dead_units(_run({"act1": _frac(0.05, 0.9)}))
    assert f.code == "TL203" and f.severity.value == "warning" and f.subject == "act1"
    assert f.evidence["dead_frac_median"] > 0.75 and f.evidence["dead_frac_first"] < 0.1
    assert 0.5 <= f.evidence["dead_frac"] < f.evidence["dead_frac_median"]  # the least share
    assert "constant-prediction level was not recorded" in f.message
    assert "(ReLU)" in f.message and f.steps[1] == STEPS[-1]


def test_a_fully_dead_layer_is_an_error():
    [f] = dead_units(_run({"act1": np.ones(len(STEPS))}))
    assert f.severity.value == "error" and f.evidence["dead_frac"] == 1.0


def test_quiet_on_healthy_sparsity_and_on_leaky_relu():
    assert dead_units(_run({"act1": _frac(0.1, 0.3)})) == []
    assert dead_units(_run({"act2": np.ones(len(STEPS))})) == []  # LeakyReLU passes negatives


def test_a_share_that_drops_below_on_some_recording_is_quiet():
    # Units silent for one batch and firing on the next are alive: the least share decides.
    dead = np.tile([0.75, 0.25], len(STEPS) // 2)
    assert np.median(dead[-10:]) >= 0.5 and dead_units(_run({"act1": dead})) == []


def test_recordings_holding_nan_are_ignored():
    # After a NaN every output reads as "not > 0": that is nonfinite-values' business.
    dead = _frac(0.05, 0.05)
    dead[15:] = 1.0
    assert dead_units(_run({"act1": dead}, nan_from=15)) == []


def test_quiet_without_enough_recordings():
    run = make_run(model_meta(modules=[("act", "ReLU")]), tensors=[tensor_rows(
        "activation", {"act": {"dead_frac": [1.0, 1.0]}}, steps=[0, 10])])
    assert dead_units(run) == []


# -- real tiny trainings -------------------------------------------------------------------------
def _train(run_dir, *, kill=None, target="linear", loss="mse", widths=(16, 8), batch=32,
           steps=150, lr=1e-2, sgd=False, seed=0, record_loss_fn=True):
    """An MLP on fresh Gaussian batches of 8 features. `kill`: "all" sets every hidden bias to
    -50 (no unit ever fires), "half" the first half of the last hidden layer's biases.
    `target`: "linear" (a linear function of the inputs plus noise), "noise" (3 + N(0, 1), not
    a function of the inputs), "classes" (the argmax of 3 linear scores), "random classes" (3
    classes drawn independently of the inputs). Classifiers log their batch accuracy.
    `record_loss_fn=False` leaves the loss unknown to the Recorder, as a hand-written loss is."""
    torch = pytest.importorskip("torch")
    import tracelab
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    layers, width = [], 8
    for w in widths:
        layers += [torch.nn.Linear(width, w), torch.nn.ReLU()]
        width = w
    classes = target in ("classes", "random classes")
    net = torch.nn.Sequential(*layers, torch.nn.Linear(width, 3 if classes else 1))
    hidden = [m for m in net[:-1] if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        if kill == "all":
            for m in hidden:
                m.bias.fill_(-50.0)
        elif kill == "half":
            hidden[-1].bias[:widths[-1] // 2] = -50.0
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1) if classes else torch.nn.MSELoss()
    opt = (torch.optim.SGD if sgd else torch.optim.Adam)(net.parameters(), lr=lr)
    w = torch.randn(8, 3, generator=g)
    with tracelab.Recorder(str(run_dir), model=net, optimizer=opt,
                           loss_fn=loss_fn if record_loss_fn else None,
                           activation_every=10, input_every=10) as rec:
        for _ in range(steps):
            x = torch.randn(batch, 8, generator=g)
            if target == "random classes":
                y = torch.randint(0, 3, (batch,), generator=g)
            elif classes:
                y = (x @ w).argmax(1)
            elif target == "noise":
                y = 3 + torch.randn(batch, generator=g)
            else:
                y = x @ w[:, 0] + 0.1 * torch.randn(batch, generator=g)
            out = net(x)
            value = loss_fn(out if classes else out[:, 0], y)
            opt.zero_grad()
            value.backward()
            opt.step()
            rec.step(loss=value, targets=y)
            if classes:
                rec.log("train", {"accuracy": (out.argmax(1) == y).float().mean().item()})
    return tracelab.open_run(str(run_dir))


@pytest.mark.usefixtures("one_thread")
def test_a_net_whose_biases_kill_every_unit_is_an_error(tmp_path):
    found = dead_units(_train(tmp_path / "r", kill="all", sgd=True, lr=1e-3))
    assert {f.subject for f in found} == {"1", "3"}
    assert all(f.severity.value == "error" and f.evidence["dead_frac"] == 1.0 for f in found)
    assert "All of the units of '1' (ReLU)" in found[0].message
    assert "nothing after it depends on the input" in found[0].message


@pytest.mark.usefixtures("one_thread")
def test_a_half_dead_layer_in_a_model_no_better_than_a_constant_is_a_warning(tmp_path):
    # The targets do not depend on the inputs and the small steps have not yet found their
    # mean: the loss stays above the targets' variance, what the best constant would reach.
    [f] = dead_units(_train(tmp_path / "r", kill="half", target="noise", sgd=True, lr=1e-3))
    assert f.subject == "3" and f.severity.value == "warning"
    assert f.evidence["dead_frac"] >= 0.5 and f.evidence["loss_mean"] > f.evidence["constant_loss"]
    assert 0.5 < f.evidence["constant_loss"] < 2  # the variance of N(0, 1) targets
    assert "no better than" in f.message


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("target", ["linear", "classes"])
def test_a_half_dead_layer_in_a_model_that_learns_is_info_only(tmp_path, target):
    [f] = dead_units(_train(tmp_path / "r", kill="half", target=target))
    assert f.subject == "3" and f.severity.value == "info"
    assert f.evidence["loss_mean"] < f.evidence["constant_loss"]
    if target == "classes":  # label smoothing 0.1 raises the constant's loss above ln 3 ~ 1.10
        assert 1.0 < f.evidence["constant_loss"] < 1.1


@pytest.mark.usefixtures("one_thread")
def test_a_small_tabular_mlp_with_batches_of_8_raises_no_warning(tmp_path):
    # A last hidden layer of 4 units seen on 8 samples: one batch often leaves half of them
    # silent while every one fires on other batches, and the loss falls as it should.
    run = _train(tmp_path / "r", widths=(8, 4), batch=8, steps=300, sgd=True, lr=1e-2, seed=1)
    recent = run.stat("activation", "dead_frac")["3"].iloc[-10:]
    assert recent.median() >= 0.5  # what a median over the recordings read as dead
    assert [f for f in dead_units(run) if f.severity.value != "info"] == []
    assert run.loss().iloc[-50:].mean() < 0.5 * run.loss().iloc[:10].mean()


@pytest.mark.usefixtures("one_thread")
def test_without_a_constant_level_an_objective_that_improves_makes_a_half_dead_layer_info(
        tmp_path):
    # A hand-written loss (nothing recorded of it) has no constant-prediction level; the
    # logged accuracy that keeps rising says the live units carry the signal.
    run = _train(tmp_path / "r", kill="half", target="classes", steps=300, seed=1, lr=1e-3,
                 record_loss_fn=False)
    [f] = dead_units(run)
    assert f.subject == "3" and f.severity.value == "info"
    assert f.evidence["constant_loss"] is None and f.evidence["objective_improved"] is True
    assert "kept improving" in f.message


@pytest.mark.usefixtures("one_thread")
def test_without_a_constant_level_an_objective_that_does_not_improve_keeps_the_warning(
        tmp_path):
    # Labels drawn independently of the inputs: the accuracy stays at chance.
    run = _train(tmp_path / "r", kill="half", target="random classes", steps=300, seed=1, lr=1e-3,
                 record_loss_fn=False)
    [f] = dead_units(run)
    assert f.subject == "3" and f.severity.value == "warning"
    assert f.evidence["constant_loss"] is None and f.evidence["objective_improved"] is False


@pytest.mark.usefixtures("one_thread")
def test_without_a_constant_level_a_loss_still_falling_makes_a_half_dead_layer_info(tmp_path):
    # A hand-written regression loss and no logged objective: the loss itself, still falling in
    # the last quarter of the run, says the live units carry the signal.
    run = _train(tmp_path / "r", kill="half", steps=300, lr=1e-3, record_loss_fn=False)
    [f] = dead_units(run)
    assert f.subject == "3" and f.severity.value == "info"
    assert f.evidence["constant_loss"] is None and f.evidence["objective_improved"] is True
    # Targets that do not depend on the inputs, their mean found early: the loss stops falling.
    run = _train(tmp_path / "n", kill="half", target="noise", steps=300, lr=1e-2,
                 record_loss_fn=False)
    [f] = dead_units(run)
    assert f.subject == "3" and f.severity.value == "warning"


# -- what the optimizer did to the layer before the dead units, up to their death ---------------
def _blob_mlp(path, *, lr, steps, bias=None):
    """A 16-32-32-4 ReLU classifier of Gaussian blobs under plain SGD at `lr`; `bias`, if given,
    fills the second Linear's bias (a negative one silences the ReLU after it from the start)."""
    import torch
    from _contract_runs import blobs, train
    from torch import nn

    from tracelab.core.run import open_run
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                          nn.Linear(32, 4))
    if bias is not None:
        with torch.no_grad():
            model[2].bias.fill_(bias)
    ce = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    return open_run(train(path, model, blobs(2048), ce, loss_fn=ce, steps=steps, optimizer=opt))


@pytest.mark.usefixtures("one_thread")
def test_units_killed_by_oversized_steps_hold_the_update_that_preceded_their_death(tmp_path):
    # SGD at lr 2: the layer feeding ReLU '3' moves by about its own norm in a step, then every
    # unit after it is dead and its updates stop.
    [f] = dead_units(_blob_mlp(tmp_path / "high", lr=2.0, steps=100))
    ev = f.evidence
    assert f.subject == "3" and ev["dead_frac"] == 1.0 and ev["dead_frac_first"] < 0.5
    assert ev["update_ratio_weight"] == "2.weight"  # the Linear before the ReLU
    assert ev["update_ratio_before_onset"] >= 0.1  # 100x the usual 1e-3 or more
    assert 0 < ev["update_ratio_median_before_onset"] <= ev["update_ratio_before_onset"]
    assert ev["update_ratio_step"] <= ev["onset_step"] == f.steps[0]


@pytest.mark.usefixtures("one_thread")
def test_units_silenced_by_a_negative_bias_hold_ordinary_updates_and_rank_first(tmp_path):
    import tracelab
    run = _blob_mlp(tmp_path / "bias", lr=0.05, steps=60, bias=-3.0)
    [f] = dead_units(run)
    assert f.subject == "3" and f.severity.value == "error"
    assert f.evidence["update_ratio_before_onset"] < 0.1  # no step rewrote the weights
    diagnosis = tracelab.analyze(run)
    assert diagnosis.diagnoses[0].finding.rule == "dead-units"
    assert not [g for g in diagnosis.findings if g.rule == "learning-rate-too-high"]


@pytest.mark.usefixtures("one_thread")
def test_units_killed_by_an_unreachable_output_range_under_adam_on_a_small_init_rank_first(
        tmp_path):
    # Mostly negative regression targets and a ReLU after the output layer (the cause), with a
    # N(0, 0.01) init under Adam at 1e-3: Adam moves each weight by about lr per step, so the
    # small output layer changes by a tenth of its norm at step 0 and by a little less at each
    # step after; no step stands out of the others, and no step size killed the units.
    torch = pytest.importorskip("torch")
    import tracelab
    from torch import nn
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 8, generator=g)
    y = (x @ torch.randn(8, generator=g) * 0.5 - 2.0).unsqueeze(1)
    model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 1), nn.ReLU())
    for layer in model:
        if isinstance(layer, nn.Linear):
            nn.init.normal_(layer.weight, 0, 0.01)
            nn.init.constant_(layer.bias, 0.1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with tracelab.Recorder(str(tmp_path / "r"), model=model, optimizer=opt,
                           loss_fn=nn.MSELoss()) as rec:
        for step in range(300):
            i = (step * 32) % (2048 - 32)
            xb, yb = x[i:i + 32], y[i:i + 32]
            out = model(xb)
            loss = nn.functional.mse_loss(out, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb, targets=yb, outputs=out)
    run = tracelab.open_run(str(tmp_path / "r"))
    [f] = [f for f in dead_units(run) if f.subject == "5"]
    ev = f.evidence
    assert f.severity.value == "error" and ev["update_ratio_weight"] == "4.weight"
    assert ev["update_ratio_before_onset"] >= 0.01  # 10x the usual 1e-3 or more ...
    assert ev["update_ratio_before_onset"] < 10 * ev["update_ratio_median_before_onset"]
    diagnosis = tracelab.analyze(run)  # ... but no burst: the death ranks first
    assert diagnosis.diagnoses[0].finding.rule == "dead-units"
    assert not [g for g in diagnosis.findings if g.rule == "learning-rate-too-high"
                and g.evidence.get("burst_before_death")]
