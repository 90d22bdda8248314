"""loss-plateau on runs that record no gradients: a loop that calls zero_grad() before
Recorder.step() still trains (its weights change, and torch's optimizers skip a parameter whose
.grad is None), so the plateau is not blamed on a missing backward(); a loop without backward()
is. Real tiny trainings on random labels, whose loss cannot fall."""
import pytest

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
import tracelab  # noqa: E402
from tracelab.analyzers.loss_plateau import loss_plateau  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _train(path, *, backward=True, frozen_body=False, steps=60):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 3))
    torch.nn.init.zeros_(net[2].weight)  # logits start at 0: the loss starts at log(3)
    if frozen_body:
        net[0].requires_grad_(False)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    with tracelab.Recorder(str(path), model=net, optimizer=opt) as rec:
        for _ in range(steps):
            x, y = torch.randn(32, 16, generator=g), torch.randint(3, (32,), generator=g)
            loss = torch.nn.functional.cross_entropy(net(x), y)
            if backward:
                loss.backward()
            opt.step()
            opt.zero_grad()  # before the recorder: it reads no gradient
            rec.step(loss=loss, inputs=x, targets=y)
    return tracelab.open_run(str(path))


def test_weights_that_change_without_recorded_gradients_clear_backward(tmp_path):
    [f] = loss_plateau(_train(tmp_path / "r"))
    assert f.severity.value == "warning" and "backward() was never called" not in f.message
    assert "no gradients were recorded at step(), yet 4 trainable parameters change" in \
        f.message and "frozen-parameters" not in f.message
    assert "before optimizer.zero_grad()" in f.fix


def test_a_mostly_frozen_model_is_named_with_its_frozen_share(tmp_path):
    [f] = loss_plateau(_train(tmp_path / "r", frozen_body=True))
    assert "yet 2 trainable parameters change" in f.message
    assert "requires_grad=False" in f.message and "see frozen-parameters" in f.message
    assert f.evidence["frozen_share"] > 0.5


def test_a_loop_without_backward_still_names_it(tmp_path):
    [f] = loss_plateau(_train(tmp_path / "r", backward=False))
    assert f.severity.value == "error" and "backward() was never called" in f.message
