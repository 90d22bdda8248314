"""loss-plateau on a real tiny least-squares GAN (two optimizers, the generator's loss
recorded): level by design while both players learn, so quiet; with the generator's
optimizer.step() missing (and the discriminator slowed), its parameters never change and the
plateau is reported."""
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from _gan_training import one_optimizer  # noqa: E402
from tracelab.analyzers.loss_plateau import loss_plateau  # noqa: E402
from tracelab.core.run import open_run  # noqa: E402


def _lsgan(run_dir: Path, *, g_steps: bool = True, lr_d: float = 2e-3, steps: int = 400,
           warmup: int = 2000, only_g: bool = False) -> Path:
    """`warmup` steps before recording, near the game's balance (the generator's loss about
    0.25); while recording, the discriminator's learning rate `lr_d`, and the generator's
    optimizer.step() missing when `g_steps` is False; `only_g`: the Recorder is given the
    generator's optimizer only (the discriminator's steps unrecorded)."""
    torch.manual_seed(0)
    data = torch.randn(512, 2) @ torch.tensor([[1.0, 2.0], [-0.1, 0.5]]) + 1
    net_g = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
    net_d = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    opt_d = torch.optim.Adam(net_d.parameters(), lr=2e-3)
    opt_g = torch.optim.Adam(net_g.parameters(), lr=2e-3)
    mse = nn.MSELoss()
    model = nn.ModuleDict({"G": net_g, "D": net_d})

    def play(rec=None, g_steps=True):
        x = data[torch.randint(0, len(data), (32,))]
        ones, zeros = torch.ones(32, 1), torch.zeros(32, 1)
        z = torch.randn(32, 2)
        opt_g.zero_grad()
        loss_g = mse(net_d(net_g(z)), ones)
        loss_g.backward()
        if g_steps:
            opt_g.step()
        opt_d.zero_grad()
        loss_d = (mse(net_d(x), ones) + mse(net_d(net_g(z).detach()), zeros)) / 2
        loss_d.backward()
        opt_d.step()
        if rec is not None:
            rec.step(loss=loss_g)

    for _ in range(warmup):
        play()
    opt_d.param_groups[0]["lr"] = lr_d
    optimizer = opt_g if only_g else {"G": opt_g, "D": opt_d}
    with tracelab.Recorder(str(run_dir), model=model, optimizer=optimizer, loss_fn=mse) as rec:
        for _ in range(steps):
            play(rec, g_steps)
    return run_dir


def test_quiet_on_a_game_whose_players_both_learn(tmp_path):
    path = _lsgan(tmp_path / "lsgan")
    # the same losses, recorded as a run of one optimizer, are a plateau
    assert len(loss_plateau(open_run(one_optimizer(path, tmp_path / "one")))) == 1
    assert loss_plateau(open_run(path)) == []


def test_a_player_whose_optimizer_never_steps_is_reported(tmp_path):
    run = open_run(_lsgan(tmp_path / "lsgan_g", g_steps=False, lr_d=2e-5))
    [f] = loss_plateau(run)
    assert "optimizer 'G' never change" in f.message and f.evidence["players_still"] == 1


def test_a_player_the_recorder_was_not_given_still_counts(tmp_path):
    # only the generator's optimizer recorded: the discriminator's weights, held by no recorded
    # optimizer, change, so another optimizer plays: level by design, quiet
    assert loss_plateau(open_run(_lsgan(tmp_path / "only_g", only_g=True))) == []
    # the same, with the recorded generator's optimizer.step() missing: reported
    run = open_run(_lsgan(tmp_path / "only_g_still", only_g=True, g_steps=False, lr_d=2e-5))
    [f] = loss_plateau(run)
    assert f.evidence["players_still"] == 1
