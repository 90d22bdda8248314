"""A model whose Lazy modules have no shapes yet when the Recorder is made: recording works, the
statistics taken after the first forward match plain torch, and every rule reads the run."""
import pytest
import torch

import tracelab
from tracelab.app.engine import analyze
from tracelab.core.schema import GRAD, WEIGHT


def test_lazy_parameters_are_recorded_once_materialized(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.LazyLinear(8), torch.nn.LazyBatchNorm1d(),
                                torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    with tracelab.Recorder(tmp_path / "run", model, opt) as rec:
        for _ in range(20):  # the first 20 steps record everything
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            grad = model[0].weight.grad.norm().item()
            opt.step()
            rec.step(loss=loss)
    run = tracelab.open_run(tmp_path / "run")
    assert run.status["state"] == "completed"
    shapes = {p["name"]: p["shape"] for p in run.meta["model"]["parameters"]}
    assert shapes["0.weight"] is None and shapes["3.weight"] == [2, 8]  # lazy at the start
    last = int(run.stat(GRAD, "norm").index[-1])
    assert run.stat(GRAD, "norm").loc[last, "0.weight"] == pytest.approx(grad, rel=1e-5)
    assert run.stat(WEIGHT, "norm").loc[last, "0.weight"] == pytest.approx(
        model[0].weight.norm().item(), rel=1e-5)
    assert not analyze(run).errors
