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


def _lbfgs(path, optimizer):
    """A small regression fitted with closures, 12 steps: each LBFGS step runs 20 inner
    iterations, so its change per step is a whole optimization's."""
    import tracelab
    from _contract_runs import regression
    torch.manual_seed(0)
    x, y = regression(256)
    y = 5 * torch.sin(y)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = optimizer(model.parameters())
    loss_fn = nn.MSELoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=loss_fn) as rec:
        for _ in range(12):
            def closure():
                opt.zero_grad()
                loss = loss_fn(model(x)[:, 0], y)
                loss.backward()
                return loss
            rec.step(loss=opt.step(closure), inputs=x, targets=y)
    return open_run(path)


def test_an_lbfgs_step_is_not_judged_as_one_update(tmp_path):
    from tracelab.core.schema import UPDATE, WEIGHT
    run = _lbfgs(tmp_path / "lbfgs", lambda p: torch.optim.LBFGS(p, lr=1.0, max_iter=20))
    ratio = (run.stat(UPDATE, "norm") / run.stat(WEIGHT, "norm")).median()
    assert ratio["0.weight"] > 0.1  # a first-order step this large would be named
    assert update_ratio(run, min_fall=float("inf")) == []
