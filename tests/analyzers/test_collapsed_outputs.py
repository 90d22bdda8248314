"""collapsed-outputs: the final module's outputs span a tiny range."""
import numpy as np
from dynamics_frames import make_run, tensor_rows

from tracelab.analyzers.collapsed_outputs import collapsed_outputs

STEPS = list(range(0, 300, 10))


def _run(head_range, hidden_range=3.0):
    n = len(STEPS)
    half = np.asarray(head_range, dtype=float) / 2
    per = {"fc1": {"min": [-hidden_range / 2] * n, "max": [hidden_range / 2] * n},
           "head": {"min": 0.3 - half * np.ones(n), "max": 0.3 + half * np.ones(n)}}
    return make_run(tensors=[tensor_rows("activation", per, steps=STEPS)])


def test_fires_when_the_logits_collapse():
    ranges = np.concatenate([np.linspace(2.0, 0.01, 10), np.full(len(STEPS) - 10, 0.004)])
    [f] = collapsed_outputs(_run(ranges))
    assert f.code == "TL207" and f.severity.value == "warning" and f.subject == "head"
    assert f.evidence["range"] < 0.1 and f.evidence["range_start"] == 2.0
    assert "final module 'head'" in f.message


def test_outputs_that_do_not_vary_at_all_read_in_words():
    ranges = np.concatenate([np.linspace(2.0, 0.5, 10), np.zeros(len(STEPS) - 10)])
    [f] = collapsed_outputs(_run(ranges))
    assert "do not vary at all" in f.message and "the same output for every input" in f.message
    assert "span only" not in f.message


def test_quiet_on_spread_outputs_even_if_a_hidden_layer_is_narrow():
    assert collapsed_outputs(_run(np.full(len(STEPS), 4.0), hidden_range=0.001)) == []


def test_quiet_on_a_zero_initialized_head_that_learns():
    assert collapsed_outputs(_run(np.linspace(0.0, 3.0, len(STEPS)))) == []


def test_threshold_is_configurable():
    assert collapsed_outputs(_run(np.full(len(STEPS), 0.05)), min_range=0.01) == []


def _small_targets(path, *, frozen_head: bool):
    """A real tiny regression whose targets span about 0.06 over a batch (units far below the
    rule's `min_range`), its outputs (N, 1) against targets (N, 1); `frozen_head`: the linear
    head's weight zeroed and frozen, so the model outputs its bias whatever the input."""
    import pytest
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import torch
    from torch import nn
    from _contract_runs import regression, train
    from tracelab.core.run import open_run

    torch.manual_seed(0)
    x, y = regression(512)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    if frozen_head:
        nn.init.zeros_(model[2].weight)
        model[2].weight.requires_grad_(False)
    train(path, model, (x, 0.005 * y.unsqueeze(1)), nn.functional.mse_loss, steps=300)
    return open_run(path)


def test_outputs_that_span_their_recorded_targets_range_are_no_collapse(tmp_path):
    run = _small_targets(tmp_path / "fit", frozen_head=False)
    assert collapsed_outputs(run) == []
    # without the targets' range to compare with, the same outputs fall under min_range
    run.meta.pop("outputs", None)
    assert len(collapsed_outputs(run)) == 1


def test_outputs_far_narrower_than_their_targets_still_fire(tmp_path):
    [f] = collapsed_outputs(_small_targets(tmp_path / "frozen", frozen_head=True))
    assert f.evidence["range"] < 0.01


def _actor_critic(path, *, dead_policy: bool):
    """A real tiny actor-critic on a two-armed contextual bandit: a shared Linear + ReLU, an
    action head (2 logits) and a value head (1 value, recorded last), run on one state at a
    time, one update per episode of 8 states. `dead_policy`: the action head zeroed and frozen,
    so its logits are 0 for every state."""
    import pytest
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import torch
    from torch import nn
    from torch.nn import functional as F
    import tracelab
    from tracelab.core.run import open_run

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 16)
            self.action_head = nn.Linear(16, 2)
            self.value_head = nn.Linear(16, 1)

        def forward(self, s):
            h = F.relu(self.fc1(s))
            return F.softmax(self.action_head(h), dim=-1), self.value_head(h)

    torch.manual_seed(0)
    model = Policy()
    if dead_policy:
        for p in model.action_head.parameters():
            nn.init.zeros_(p)
            p.requires_grad_(False)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    g = torch.Generator().manual_seed(0)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, activation_every=5) as rec:
        for _ in range(60):
            states, losses = torch.randn(8, 4, generator=g), []
            for s in states:
                probs, value = model(s)
                m = torch.distributions.Categorical(probs)
                action = m.sample()
                reward = float(int(action) == int(s[0] > 0))
                losses.append(-m.log_prob(action) * (reward - value.item())
                              + F.smooth_l1_loss(value, torch.tensor([reward])))
            opt.zero_grad()
            loss = torch.stack(losses).sum()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=states)
    return open_run(path)


def test_a_value_head_of_one_element_is_no_collapse(tmp_path):
    # V(s) on one state spans 0 by construction; the policy head beside it is read instead
    assert collapsed_outputs(_actor_critic(tmp_path / "ac", dead_policy=False)) == []


def test_a_policy_head_that_outputs_one_value_for_every_state_fires(tmp_path):
    [f] = collapsed_outputs(_actor_critic(tmp_path / "dead", dead_policy=True))
    assert f.subject == "action_head" and f.evidence["range"] < 0.1


def _wgan(path, *, dead_critic: bool):
    """A real tiny WGAN on 2-D points as martinarjovsky/WassersteinGAN trains it: the critic's
    weights clamped to [-0.01, 0.01] before each of its five steps, RMSprop for both players,
    no loss_fn; the critic (recorded last) outputs one score per sample, in hundredths.
    `dead_critic`: its last layer's weight zeroed and frozen, so it scores every sample alike."""
    import pytest
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import torch
    from torch import nn
    import tracelab
    from tracelab.core.run import open_run

    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    D = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1))
    if dead_critic:
        nn.init.zeros_(D[2].weight)
        D[2].weight.requires_grad_(False)
    opt_g = torch.optim.RMSprop(G.parameters(), lr=5e-4)
    opt_d = torch.optim.RMSprop([p for p in D.parameters() if p.requires_grad], lr=5e-4)
    g = torch.Generator().manual_seed(0)
    with tracelab.Recorder(str(path), nn.ModuleDict({"G": G, "D": D}), {"G": opt_g, "D": opt_d},
                           activation_every=10) as rec:
        for _ in range(100):
            for _ in range(5):
                for p in D.parameters():
                    if p.requires_grad:
                        p.data.clamp_(-0.01, 0.01)
                opt_d.zero_grad()
                real = torch.randn(64, 2, generator=g) * 0.5 + torch.tensor([2.0, -1.0])
                with torch.no_grad():
                    fake = G(torch.randn(64, 4, generator=g))
                (D(fake).mean() - D(real).mean()).backward()
                opt_d.step()
            opt_g.zero_grad()
            loss = -D(G(torch.randn(64, 4, generator=g))).mean()
            loss.backward()
            opt_g.step()
            rec.step(loss=loss)
    return open_run(path)


def test_a_weight_clipped_critics_small_scores_are_no_collapse(tmp_path):
    # its scores span hundredths, far below min_range, as its clipped weights make them (t06)
    run = _wgan(tmp_path / "wgan", dead_critic=False)
    assert collapsed_outputs(run) == []


def test_a_critic_that_scores_every_sample_alike_fires(tmp_path):
    [f] = collapsed_outputs(_wgan(tmp_path / "dead", dead_critic=True))
    assert f.subject == "D.2" and f.evidence["range"] <= 1e-6
