"""loss-spike on a real tiny least-squares regression (noise sd 2 on its targets) where one
batch's target noise is larger. Sd 6: the batch's MSE is about nine times the median while its
gradient (linear in the residuals) only about three times its usual norm, and the next step is
back: one excursion that did nothing to the run, a note. Sd 12: the gradient bursts past five
times its recent median with the loss, and the step moved the weights that far: a warning."""
import pytest

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from tracelab.analyzers.loss_spike import loss_spike  # noqa: E402

BAD = 300


def _regression(path, bad_sd):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(8, generator=g)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    with tracelab.Recorder(str(path), model=model, optimizer=opt) as rec:
        for step in range(400):
            xb = torch.randn(256, 8, generator=g)
            sd = bad_sd if step == BAD else 2.0
            yb = xb @ w + sd * torch.randn(256, generator=g)
            opt.zero_grad()
            loss = ((model(xb)[:, 0] - yb) ** 2).mean()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb, targets=yb)
    return tracelab.open_run(path)


def test_a_spike_the_run_passed_at_once_is_a_note(tmp_path):
    [f] = loss_spike(_regression(tmp_path / "passed", 6.0))
    assert f.steps == (BAD, BAD) and f.severity.value == "info"
    assert f.evidence["loss"] > 5 * f.evidence["rolling_median"]
    assert "came back at once" in f.message


def test_a_spike_with_a_gradient_burst_is_a_warning(tmp_path):
    [f] = loss_spike(_regression(tmp_path / "burst", 12.0))
    assert f.steps == (BAD, BAD) and f.severity.value == "warning"
    assert f.evidence["cause"] == "grad_spike" and f.evidence["grad_ratio"] > 5
