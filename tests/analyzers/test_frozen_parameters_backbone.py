"""frozen-parameters on real tiny trainings where parameters no optimizer holds never change: a
backbone left out of the optimizer on purpose (most of the model, all running before the
trained head, as in linear probing, and pretrained: no fresh random draw) is only info, as
param-not-in-optimizer says; a head left out (a small part, running last), or a backbone left
out at its random init (forgotten when the optimizer was built), is a warning."""
import pytest

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
from torch import nn  # noqa: E402

from _contract_runs import blobs, train  # noqa: E402
from tracelab.analyzers.frozen_parameters import frozen_parameters  # noqa: E402
from tracelab.analyzers.param_not_in_optimizer import param_not_in_optimizer  # noqa: E402
from tracelab.core.run import open_run  # noqa: E402


def _net(pretrain: int = 0):
    """The MLP, after `pretrain` Adam steps on other data (its weights then no fresh draw)."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                        nn.Linear(64, 4))
    x, y = blobs(256, seed=1)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for step in range(pretrain):
        i = slice(step * 32 % 224, step * 32 % 224 + 32)
        opt.zero_grad()
        nn.functional.cross_entropy(net(x[i]), y[i]).backward()
        opt.step()
    return net


def _run(path, net, trained):
    return open_run(train(path, net, blobs(512), nn.functional.cross_entropy, steps=40,
                          optimizer=torch.optim.Adam(trained, lr=1e-2)))


def test_a_backbone_left_out_of_the_optimizer_is_only_info(tmp_path):
    net = _net(pretrain=30)
    run = _run(tmp_path / "probe", net, net[4].parameters())
    [f] = frozen_parameters(run)
    assert f.severity.value == "info" and "0.weight, 0.bias, 2.weight" in f.message
    assert "backbone frozen by leaving it out" in f.message
    assert [g.severity.value for g in param_not_in_optimizer(run)] == ["info"]


def test_a_head_left_out_of_the_optimizer_is_a_warning(tmp_path):
    net = _net()
    run = _run(tmp_path / "head", net, [p for m in (net[0], net[2]) for p in m.parameters()])
    [f] = frozen_parameters(run)
    assert f.severity.value == "warning" and "4.weight, 4.bias" in f.message
    assert "param groups do not hold them." in f.message


def test_a_backbone_left_out_at_its_random_init_is_a_warning(tmp_path):
    net = _net()  # never trained: the optimizer built from the head forgot the layers before
    run = _run(tmp_path / "forgotten", net, net[4].parameters())
    [f] = frozen_parameters(run)
    assert f.severity.value == "warning" and "0.weight, 0.bias, 2.weight" in f.message
    assert "param groups do not hold them." in f.message
    assert [g.severity.value for g in param_not_in_optimizer(run)] == ["warning"]
