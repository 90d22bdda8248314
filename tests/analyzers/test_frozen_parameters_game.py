"""frozen-parameters on a real tiny WGAN (two optimizers): the critic's output bias cancels in
its own loss -mean(D(real)) + mean(D(fake)), so its optimizer never moves it, while the
generator's backward leaves it a non-zero gradient at step(): only info. A param group with a
zero learning rate in the same game is still a warning, and so is a player whose optimizer
never steps."""
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from tracelab.analyzers.frozen_parameters import frozen_parameters  # noqa: E402
from tracelab.core.run import open_run  # noqa: E402


def _wgan(run_dir: Path, *, frozen_group: bool = False, d_steps: bool = True,
          steps: int = 60) -> Path:
    torch.manual_seed(0)
    data = torch.randn(256, 2) @ torch.tensor([[1.0, 2.0], [-0.1, 0.5]]) + 1
    net_g = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
    net_d = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    if frozen_group:  # the critic's first layer in a group whose learning rate is zero
        opt_d = torch.optim.Adam([{"params": net_d[0].parameters(), "lr": 0.0},
                                  {"params": net_d[2].parameters()}], lr=1e-3)
    else:
        opt_d = torch.optim.Adam(net_d.parameters(), lr=1e-3)
    opt_g = torch.optim.Adam(net_g.parameters(), lr=1e-3)
    model = nn.ModuleDict({"G": net_g, "D": net_d})
    with tracelab.Recorder(str(run_dir), model=model, optimizer={"G": opt_g, "D": opt_d}) as rec:
        for step in range(steps):
            x = data[torch.randint(0, len(data), (16,))]
            z = torch.randn(16, 2)
            opt_d.zero_grad()
            loss_d = -net_d(x).mean() + net_d(net_g(z).detach()).mean()
            loss_d.backward()
            if d_steps:
                opt_d.step()
            opt_g.zero_grad()
            loss_g = -net_d(net_g(z)).mean()
            loss_g.backward()
            opt_g.step()
            rec.step(loss=loss_g)
    return run_dir


def test_a_critic_bias_that_cancels_in_its_own_loss_is_only_info(tmp_path):
    findings = frozen_parameters(open_run(_wgan(tmp_path / "wgan")))
    [f] = findings
    assert f.severity.value == "info" and "D.2.bias" in f.message
    assert "need not be the ones their own optimizer used" in f.message


def test_a_zero_learning_rate_group_in_a_game_is_still_a_warning(tmp_path):
    findings = frozen_parameters(open_run(_wgan(tmp_path / "wgan0", frozen_group=True)))
    warned = [f for f in findings if f.severity.value == "warning"]
    assert len(warned) == 1 and "D.0.weight" in warned[0].message
    assert "learning rate is zero" in warned[0].message


def test_a_player_whose_optimizer_never_steps_is_still_a_warning(tmp_path):
    findings = frozen_parameters(open_run(_wgan(tmp_path / "wgan_nod", d_steps=False)))
    [f] = findings
    assert f.severity.value == "warning" and "D.0.weight" in f.message
    assert "learning rate is zero or the optimizer skips" in f.message
