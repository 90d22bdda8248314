"""A real training logged the usual TensorBoard way (torch's SummaryWriter, add_histogram of
every parameter and its gradient under `weights/…` and `grads/…`): the gradient rules run on
the imported histograms, and find the vanishing gradients of a deep sigmoid stack."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tensorboard")
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

import tracelab  # noqa: E402
from tracelab.app.sources import open_any  # noqa: E402


def _train(logdir, *, activation, depth: int, steps: int = 40) -> None:
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(16, 16), activation()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(128, 16)
    y = (x[:, 0] > 0).long()
    writer = SummaryWriter(str(logdir))
    for step in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        writer.add_scalar("train/loss", loss.item(), step)
        if step % 2 == 0:
            for name, p in model.named_parameters():
                writer.add_histogram(f"weights/{name}", p, step)
                writer.add_histogram(f"grads/{name}", p.grad, step)
        opt.step()
    writer.close()


GRADIENT_RULES = {"vanishing-gradients", "exploding-gradients", "frozen-parameters"}


@pytest.mark.parametrize("activation, depth, fires", [
    (torch.nn.Sigmoid, 10, True), (torch.nn.ReLU, 3, False)])
def test_gradient_rules_run_on_tensorboard_histograms(tmp_path, activation, depth, fires):
    _train(tmp_path / "log", activation=activation, depth=depth)
    run = open_any(tmp_path / "log")
    assert len(run.names("grad")) == 2 * depth + 2 and run.names("grad") == run.names("weight")
    diagnosis = tracelab.analyze(run)
    assert GRADIENT_RULES <= set(diagnosis.rules_run)
    found = [f for f in diagnosis.findings if f.rule in GRADIENT_RULES]
    if fires:  # the first layers get ~1e-7 of the last one's gradient and never move
        assert any("0.weight" in f.message for f in found)
        plateau = next(f for f in diagnosis.findings if f.rule == "loss-plateau")
        assert "gradients vanish" in plateau.message
    else:
        assert found == []
