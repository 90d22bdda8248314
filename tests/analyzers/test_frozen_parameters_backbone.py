"""frozen-parameters on real tiny trainings where parameters no optimizer holds never change: a
backbone left out of the optimizer on purpose (most of the model, all running before the
trained head, as in linear probing) is only info, as param-not-in-optimizer says; a head left
out (a small part, running last) is a warning."""
import pytest

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
from torch import nn  # noqa: E402

from _contract_runs import blobs, train  # noqa: E402
from tracelab.analyzers.frozen_parameters import frozen_parameters  # noqa: E402
from tracelab.analyzers.param_not_in_optimizer import param_not_in_optimizer  # noqa: E402
from tracelab.core.run import open_run  # noqa: E402


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 4))


def _run(path, net, trained):
    return open_run(train(path, net, blobs(512), nn.functional.cross_entropy, steps=40,
                          optimizer=torch.optim.Adam(trained, lr=1e-2)))


def test_a_backbone_left_out_of_the_optimizer_is_only_info(tmp_path):
    net = _net()
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
