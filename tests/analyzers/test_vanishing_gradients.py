"""vanishing-gradients: layers starved of gradient against the largest layer, named."""
import numpy as np
import pytest
from dynamics_frames import GRAD_LEVELS, grad_run, noisy

from tracelab.analyzers.vanishing_gradients import vanishing_gradients

N = 100
HEALTHY = GRAD_LEVELS


def test_vanishing_names_the_starved_layers_with_their_ratio():
    [f] = vanishing_gradients(grad_run({**HEALTHY, "l0.weight": 1e-6, "l1.weight": 1e-4}))
    assert f.code == "TL201" and f.severity.value == "warning"
    assert f.subject == "l0.weight (+1 more)" and f.evidence["layers"] == 2
    assert "'l0.weight'" in f.message and "largest layer 'l3.weight'" in f.message
    assert f.evidence["ratio_to_largest"] == pytest.approx(1e-6 / 1.2, rel=0.5)


def test_vanishing_quiet_on_healthy_layers_and_ignores_biases():
    assert vanishing_gradients(grad_run(HEALTHY)) == []
    assert vanishing_gradients(grad_run({**HEALTHY, "l0.bias": 1e-9})) == []


def test_a_starved_head_past_the_largest_layer_is_a_flat_loss_not_a_vanishing_gradient():
    """A word LM at AdamW lr 20: its decoder's weights blew up, the softmax saturated, and
    the decoder, nearest the loss, got 1e-8x the encoder's gradient."""
    assert vanishing_gradients(grad_run({**HEALTHY, "l3.weight": 1e-7})) == []
    [f] = vanishing_gradients(grad_run({**HEALTHY, "l1.weight": 1e-7}))
    assert f.subject == "l1.weight"


def test_vanishing_leaves_exactly_zero_gradients_to_frozen_parameters():
    zeros = np.zeros(N)
    assert vanishing_gradients(grad_run({**HEALTHY, "l0.weight": zeros})) == []


def test_vanishing_without_a_model_summary_uses_names():
    [f] = vanishing_gradients(grad_run({**HEALTHY, "l0.weight": 1e-7}, meta=False))
    assert f.subject == "l0.weight"


def test_quiet_when_the_gap_comes_from_an_exploding_layer():
    exploding = 0.5 * np.exp(np.linspace(0, 30, N))  # 0.5 -> 5e12, then NaN
    exploding[80:] = np.nan
    assert vanishing_gradients(grad_run({**HEALTHY, "l3.weight": exploding,
                                     "l1.weight": 0.01})) == []


def test_judged_up_to_the_first_nonfinite_gradient():
    starved = np.full(N, 1e-7)
    healthy_then_nan = noisy(1.2, 9)
    healthy_then_nan[90:] = np.nan
    [f] = vanishing_gradients(grad_run({**HEALTHY, "l0.weight": starved,
                                    "l3.weight": healthy_then_nan}))
    assert f.subject == "l0.weight" and f.steps == (0, 89)


# -- the contract on real tiny trainings: a deep sigmoid stack and its ReLU twin -------------
torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from _contract_runs import blobs, train  # noqa: E402


def _deep(path, activation, depth=6):
    torch.manual_seed(0)
    layers, width = [], 16
    for _ in range(depth):
        layers += [nn.Linear(width, 32), activation()]
        width = 32
    model = nn.Sequential(*layers, nn.Linear(32, 4))
    train(path, model, blobs(512), nn.functional.cross_entropy,
          loss_fn=nn.CrossEntropyLoss(), steps=40, lr=1e-3)
    return tracelab.open_run(path)


def test_a_deep_sigmoid_stack_under_adam_loses_its_gradient_layer_by_layer(tmp_path):
    [f] = vanishing_gradients(_deep(tmp_path / "sigmoid", nn.Sigmoid))
    assert f.severity.value == "warning" and len(f.evidence["chain"]) >= 4
    assert f.evidence["chain"][-1] in ("10.weight", "12.weight")  # the chain ends at the head
    assert f.subject.startswith(f.evidence["chain"][0])  # the starved end, the input's
    assert f.evidence["fall_per_layer"] >= 2 and f.evidence["ratio_to_largest"] < 1e-3
    assert f.evidence["squashing"] == ["1", "3", "5", "7", "9", "11"]
    assert "6 squashing activation(s)" in f.message and "Sigmoid" in f.message
    assert "on their way back" in f.message


def test_the_same_stack_with_relu_keeps_a_flat_profile_below_its_head(tmp_path):
    assert vanishing_gradients(_deep(tmp_path / "relu", nn.ReLU)) == []



def _normalized_first_layer(path):
    """A regression net whose first layer (one input feature) a BatchNorm normalizes right
    after, as in Morvan's BatchNorm tutorial: the norm divides out that layer's weights, so
    its gradient is zero up to the norm's eps."""
    torch.manual_seed(0)
    x = torch.linspace(-7, 10, 512)[torch.randperm(512, generator=torch.Generator().manual_seed(0))]
    x, y = x.unsqueeze(1), (x ** 2 - 5) / 10
    model = nn.Sequential(nn.BatchNorm1d(1), nn.Linear(1, 16), nn.BatchNorm1d(16), nn.ReLU(),
                          nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
    loss = nn.MSELoss()
    train(path, model, (x, y), lambda out, t: loss(out.squeeze(1), t), loss_fn=loss, steps=60,
          lr=0.03)
    return tracelab.open_run(path)


def test_a_layer_a_batchnorm_normalizes_has_no_gradient_scale_to_judge(tmp_path):
    run = _normalized_first_layer(tmp_path / "bn")
    norms = run.stat("grad", "norm").iloc[30:].median()
    per_element = {n: norms[n] / np.sqrt(w) for n, w in
                   {"1.weight": 16, "4.weight": 256, "6.weight": 16}.items()}
    # the size test alone would flag it: far below the largest layer and the median one
    assert per_element["1.weight"] < 1e-3 * max(per_element.values())
    assert vanishing_gradients(run) == []


def _actor_critic(path, actor: nn.Module, actor_scale: float = 1.0, steps: int = 40):
    """An actor and a critic, each stepped by its own Adam on its own loss (spinningup's VPG):
    the actor's cross-entropy scaled by `actor_scale`, the critic's squared error."""
    torch.manual_seed(0)
    x, y = blobs(512)
    critic = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
    model = nn.ModuleDict({"pi": actor, "v": critic})
    pi_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    v_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
    with tracelab.Recorder(str(path), model=model, optimizer={"pi": pi_opt, "v": v_opt},
                           every=1) as rec:
        for step in range(steps):
            i = (step * 32) % (len(x) - 32)
            xb, yb = x[i:i + 32], y[i:i + 32]
            pi_opt.zero_grad()
            loss = actor_scale * nn.functional.cross_entropy(actor(xb), yb)
            loss.backward()
            pi_opt.step()
            v_opt.zero_grad()
            ((critic(xb)[:, 0] - yb.float()) ** 2).mean().backward()
            v_opt.step()
            rec.step(loss=loss)
    return tracelab.open_run(path)


def test_two_optimizers_grads_are_not_one_stack(tmp_path):
    from tracelab.core.schema import GRAD
    actor = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    run = _actor_critic(tmp_path / "ac", actor, actor_scale=1e-6)
    rms = run.stat(GRAD, "norm").median() / run.numel(GRAD) ** 0.5
    assert rms["pi.0.weight"] < 1e-3 * rms["v.0.weight"]  # one stack would be starved
    assert vanishing_gradients(run) == []


def test_a_deep_sigmoid_actor_beside_its_critic_still_loses_its_gradient(tmp_path):
    layers, width = [], 16
    for _ in range(6):
        layers += [nn.Linear(width, 32), nn.Sigmoid()]
        width = 32
    run = _actor_critic(tmp_path / "deep", nn.Sequential(*layers, nn.Linear(32, 4)))
    [f] = vanishing_gradients(run)
    assert all(n.startswith("pi.") for n in f.evidence["chain"])
    assert f.evidence["fall_per_layer"] >= 2


def _one_loss_actor_critic(path, actor: nn.Module, actor_scale: float = 1.0, steps: int = 40):
    """A policy net and a value net over the same inputs, one Adam stepping both on one loss
    (nikhilbarhate99's PPO: the surrogate plus the value loss): the actor's cross-entropy
    scaled by `actor_scale`, the critic's squared error."""
    torch.manual_seed(0)
    x, y = blobs(512)
    critic = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                           nn.Linear(32, 1))
    model = nn.ModuleDict({"actor": actor, "critic": critic})
    opt = torch.optim.Adam([{"params": actor.parameters()}, {"params": critic.parameters()}],
                           lr=1e-3)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, every=1) as rec:
        for step in range(steps):
            i = (step * 32) % (len(x) - 32)
            xb, yb = x[i:i + 32], y[i:i + 32]
            opt.zero_grad()
            loss = (actor_scale * nn.functional.cross_entropy(actor(xb), yb)
                    + ((critic(xb)[:, 0] - yb.float()) ** 2).mean())
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb, targets=yb)
    return tracelab.open_run(path)


def test_a_policy_and_a_value_net_on_one_loss_are_parallel_branches_not_one_stack(tmp_path):
    from tracelab.core.schema import GRAD
    actor = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                          nn.Linear(32, 4))
    run = _one_loss_actor_critic(tmp_path / "ppo", actor, actor_scale=1e-6)
    rms = run.stat(GRAD, "norm").iloc[20:].median() / run.numel(GRAD) ** 0.5
    # one stack in the model's order would starve the actor's first layer
    assert rms["actor.0.weight"] < 1e-3 * rms["critic.4.weight"]
    assert vanishing_gradients(run) == []


def test_a_deep_sigmoid_policy_beside_its_value_net_on_one_loss_still_loses_its_gradient(
        tmp_path):
    layers, width = [], 16
    for _ in range(6):
        layers += [nn.Linear(width, 32), nn.Sigmoid()]
        width = 32
    run = _one_loss_actor_critic(tmp_path / "deep", nn.Sequential(*layers, nn.Linear(32, 4)))
    [f] = vanishing_gradients(run)
    assert all(n.startswith("actor.") for n in f.evidence["chain"])
