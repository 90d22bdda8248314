"""shape-broadcast: an (N, 1) prediction against (N,) targets in an element-wise loss; real tiny
regressions."""
import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
nn = torch.nn

import tracelab  # noqa: E402
from _contract_runs import regression, train  # noqa: E402

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.filterwarnings("ignore:Using a target size:UserWarning")]


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))


def _findings(path):
    diagnosis = tracelab.analyze(path)
    assert not diagnosis.errors, diagnosis.errors
    return [f for f in diagnosis.findings if f.rule == "shape-broadcast"]


@pytest.mark.parametrize("loss", [nn.MSELoss(), nn.L1Loss(), nn.HuberLoss()],
                         ids=["mse", "l1", "huber"])
def test_an_unsqueezed_prediction_in_an_element_wise_loss_fires(tmp_path, loss):
    [f] = _findings(train(tmp_path / "r", _mlp(), regression(2048), loss, loss_fn=loss))
    assert f.code == "TL608" and f.severity.value == "error"
    assert "shape [32, 1] and targets of shape [32] broadcast to [32, 32]" in f.message
    assert "squeeze(-1)" in f.fix


def test_a_hand_written_squared_error_that_broadcasts_fires_as_a_warning(tmp_path):
    path = train(tmp_path / "r", _mlp(), regression(2048), lambda out, y: ((out - y) ** 2).mean())
    [f] = _findings(path)
    assert f.severity.value == "warning" and "in the loss: each prediction" in f.message


def test_matching_shapes_stay_quiet(tmp_path):
    mse = nn.MSELoss()
    path = train(tmp_path / "r", _mlp(), regression(2048), lambda out, y: mse(out.squeeze(1), y),
                 loss_fn=mse, outputs_of=lambda out: out.squeeze(1))
    assert _findings(path) == []


def test_a_squeeze_before_mse_with_the_raw_output_recorded_stays_quiet(tmp_path):
    # outputs= is the (N, 1) output, but the loss read it squeezed: its loss falls below the
    # targets' variance, which a broadcast squared error cannot.
    mse = nn.MSELoss()
    path = train(tmp_path / "r", _mlp(), regression(2048), lambda out, y: mse(out.squeeze(1), y),
                 loss_fn=mse)
    assert _findings(path) == []


def _frames(shape, targets_shape, loss_fn=None):
    import pandas as pd
    from tracelab.core.run import Run
    rows = [{"step": s, "split": "train", "name": "outputs/broadcast", "value": 1.0}
            for s in range(0, 50, 10)]
    meta = {"outputs": {"train": {"shape": shape, "targets_shape": targets_shape, "step": 0}}}
    if loss_fn:
        meta["loss_fn"] = {"type": loss_fn, "reduction": "mean"}
    return Run.from_frames(meta, signals=pd.DataFrame(rows))


def test_an_unnamed_loss_on_a_deliberate_pairwise_grid_stays_quiet():
    from tracelab.analyzers.shape_broadcast import shape_broadcast
    assert shape_broadcast(_frames([32, 1, 8], [1, 32, 8])) == []  # pairwise distances
    assert len(shape_broadcast(_frames([32, 1], [32]))) == 1
    assert shape_broadcast(_frames([32, 1], [32], "BCEWithLogitsLoss")) == []


def _bootstrapped(shape_bug: bool):
    """A one-step bootstrapped target, r + 0.9 * Q(x).detach(), as a critic's: with r left
    (N,) against the (N, 1) prediction, the target itself broadcasts to (N, N)."""
    mse = nn.MSELoss()

    def loss_of(out, y):
        r = y if shape_bug else y.unsqueeze(1)
        target = r + 0.9 * out.detach()
        loss_of.targets = target
        return mse(out, target)
    return loss_of, mse


def _train_bootstrapped(path, shape_bug: bool):
    torch.manual_seed(0)
    model, (x, y) = _mlp(), regression(2048)
    loss_of, mse = _bootstrapped(shape_bug)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=mse) as rec:
        for step in range(60):
            i = (step * 32) % (len(x) - 31)
            out = model(x[i:i + 32])
            loss = loss_of(out, y[i:i + 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x[i:i + 32], targets=loss_of.targets, outputs=out)
    return path


def test_a_target_broadcast_before_the_loss_fires(tmp_path):
    [f] = _findings(_train_bootstrapped(tmp_path / "r", shape_bug=True))
    assert f.severity.value == "error" and f.evidence["outputs_expanded"]
    assert "shape [32, 1] and targets of shape [32, 32]" in f.message
    assert "unsqueeze(1)" in f.fix


def test_a_bootstrapped_target_of_the_outputs_shape_stays_quiet(tmp_path):
    assert _findings(_train_bootstrapped(tmp_path / "r", shape_bug=False)) == []


def test_expanded_outputs_need_a_named_loss_and_one_batch_size():
    from tracelab.analyzers.shape_broadcast import shape_broadcast

    def frames(shape, targets_shape, loss_fn="MSELoss"):
        run = _frames(shape, targets_shape, loss_fn)
        run.signals["value"] = 0.0  # the grid is the targets' shape: the fact stays 0
        return run
    assert len(shape_broadcast(frames([32, 1], [32, 32]))) == 1
    assert shape_broadcast(frames([32, 1], [32, 32], None)) == []  # unnamed loss: not judged
    assert shape_broadcast(frames([32, 1], [32, 5])) == []  # 5 samples of each target
    assert shape_broadcast(frames([32, 4], [32, 1])) == []  # ensemble heads, one target each
    assert shape_broadcast(frames([1, 1], [32, 5])) == []  # not one batch
    assert shape_broadcast(frames([32, 1], [32, 5], "CrossEntropyLoss")) == []


def test_k_sampled_returns_per_state_stay_quiet(tmp_path):
    # A value net (N, 1) regressed with MSELoss onto K=8 sampled returns per state (N, 8): the
    # broadcast MSE has the gradient of the MSE against each state's mean return.
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(8, generator=g)
    model = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    mse = nn.MSELoss()
    with tracelab.Recorder(str(tmp_path / "r"), model=model, optimizer=opt, loss_fn=mse) as rec:
        for _ in range(80):
            s = torch.randn(64, 8, generator=g)
            returns = (s @ w).unsqueeze(1) + 0.5 * torch.randn(64, 8, generator=g)
            out = model(s)
            loss = mse(out, returns)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=s, targets=returns, outputs=out)
    assert _findings(tmp_path / "r") == []
