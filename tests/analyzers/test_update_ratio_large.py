"""update-ratio's high side on real tiny trainings: updates far above 1e-3 of the weights are
named where the loss shows the damage (Adam at lr 1.0: the loss ends above its first value), and
left alone where the loss shows the large steps work (plain SGD at lr 3.0 on separable blobs:
the same size of ratio while the loss falls to near zero)."""
import pytest

from tracelab.analyzers.update_ratio import update_ratio
from tracelab.core.run import open_run

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
nn = torch.nn

from _contract_runs import blobs, train  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _hard(n=2048):
    """Three classes from thresholds of a few features among 20: not separable in 60 steps at
    a learning rate that throws the weights about."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 20, generator=g)
    return x, (x[:, :3].sum(1) > 0).long() + (x[:, 3] > 0.5).long()


def _run(path, data, optimizer):
    torch.manual_seed(0)
    features, classes = data[0].shape[1], int(data[1].max()) + 1
    model = nn.Sequential(nn.Linear(features, 32), nn.ReLU(), nn.Linear(32, classes))
    return open_run(train(path, model, data, nn.functional.cross_entropy,
                          optimizer=optimizer(model.parameters()), steps=60))


def _large(findings):
    return [f for f in findings if f.message.startswith("Updates are too large")]


def test_large_updates_whose_loss_ends_above_its_start_are_named(tmp_path):
    run = _run(tmp_path / "adam", _hard(), lambda p: torch.optim.Adam(p, lr=1.0))
    [f] = _large(update_ratio(run))
    assert f.severity.value == "warning" and f.evidence["worst_ratio"] > 0.1
    loss = run.loss().to_numpy(dtype=float)
    assert loss[-6:].mean() > loss[0]  # the damage the finding rests on


def test_large_updates_whose_loss_falls_stay_quiet(tmp_path):
    run = _run(tmp_path / "sgd", blobs(2048), lambda p: torch.optim.SGD(p, lr=3.0))
    assert _large(update_ratio(run)) == []
    # The ratio alone would name them: only the falling loss keeps the rule quiet.
    [f] = _large(update_ratio(run, min_fall=float("inf")))
    assert f.evidence["worst_ratio"] > 0.1
