"""dead-units from the gradients: a hand-written ReLU (no module, so no activations to read)
whose every unit is dead leaves the weight matrices around it with exactly zero gradients
while the output bias still gets some; named first, above frozen-parameters."""
import pytest

pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")

import torch  # noqa: E402

import tracelab  # noqa: E402
from tracelab.analyzers.dead_units import dead_units  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


class Scratch(torch.nn.Module):
    """d2l's MLP from scratch: plain parameters, matmul and a relu of its own."""

    def __init__(self, b1: float):
        super().__init__()
        self.W1 = torch.nn.Parameter(0.01 * torch.randn(8, 32))
        self.b1 = torch.nn.Parameter(torch.full((32,), b1))
        self.W2 = torch.nn.Parameter(0.01 * torch.randn(32, 3))
        self.b2 = torch.nn.Parameter(torch.zeros(3))

    def forward(self, x):
        h = torch.max(x @ self.W1 + self.b1, torch.zeros(()))
        return h @ self.W2 + self.b2


def _train(run_dir, *, b1: float, reset_before_recording: bool = False, steps: int = 60):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    net, w = Scratch(b1), torch.randn(8, 3, generator=g)
    with tracelab.Recorder(str(run_dir), model=net, activations=False) as rec:
        for _ in range(steps):
            x = torch.rand(32, 8, generator=g)
            y = (x @ w).argmax(1)
            loss = torch.nn.functional.cross_entropy(net(x), y)
            net.zero_grad(set_to_none=False)
            loss.backward()
            with torch.no_grad():
                for p in net.parameters():
                    p -= 0.5 * p.grad
            if reset_before_recording:
                net.zero_grad(set_to_none=False)
            rec.step(loss=loss, targets=y)
    return tracelab.open_run(str(run_dir))


def test_every_unit_dead_behind_a_hand_written_relu_is_named_from_the_gradients(tmp_path):
    run = _train(tmp_path / "r", b1=-1.0)
    [f] = dead_units(run)
    assert f.severity.value == "error" and f.evidence["source"] == "gradients"
    assert f.evidence["zero_grad_parameters"] == ["W1", "b1", "W2"]
    assert "exactly zero" in f.message and "bias" in f.fix
    first = tracelab.analyze(run).diagnoses[0]
    assert first.finding.rule == "dead-units"
    assert "frozen-parameters" in {e.rule for e in first.explains}


def test_live_units_and_gradients_reset_before_recording_stay_quiet(tmp_path):
    assert dead_units(_train(tmp_path / "live", b1=0.0)) == []
    # every gradient zero at step(): nothing says the loss had gradient elsewhere
    assert dead_units(_train(tmp_path / "reset", b1=0.0, reset_before_recording=True)) == []


def test_a_head_weighted_by_zero_in_a_model_that_learns_is_information(tmp_path):
    """DDP's idiom for an unused module (`loss + 0 * head(x).sum()`): its gradient is exactly
    zero from the start while the model beats the constant prediction: a note, not an alarm."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    body, head = torch.nn.Linear(8, 3), torch.nn.Linear(8, 4)
    model = torch.nn.ModuleDict({"body": body, "head": head})
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    w = torch.randn(8, 3, generator=g)
    with tracelab.Recorder(str(tmp_path / "r"), model=model, optimizer=opt,
                           loss_fn=torch.nn.CrossEntropyLoss(), activations=False) as rec:
        for _ in range(60):
            x = torch.rand(32, 8, generator=g)
            y = (x @ w).argmax(1)
            loss = torch.nn.functional.cross_entropy(body(x), y)
            opt.zero_grad()
            (loss + 0 * head(x).sum()).backward()
            opt.step()
            rec.step(loss=loss, targets=y)
    run = tracelab.open_run(str(tmp_path / "r"))
    [f] = dead_units(run)
    assert f.evidence["zero_grad_parameters"] == ["head.weight", "head.bias"]
    assert f.evidence["loss_mean"] < f.evidence["constant_loss"]
    assert f.severity.value == "info"
