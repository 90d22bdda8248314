"""The frozen parameters' values: requires_grad=False parameters are not tracked, so meta.json
summarizes each once at the start (model.parameters[*].values) and once at the end
(frozen_at_close), from its first 65,536 values; a tensor that is not a float is left out."""
import json

import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
import tracelab  # noqa: E402
from tracelab.recorders.environment import FROZEN_SAMPLE, frozen_values  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def test_frozen_parameters_are_summarized_at_the_start_and_at_the_end(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    net[0].requires_grad_(False)
    net.register_parameter("count", torch.nn.Parameter(torch.zeros(3, dtype=torch.long),
                                                       requires_grad=False))
    start = net[0].weight.detach().double().clone()
    opt = torch.optim.SGD(net[1].parameters(), lr=0.1)
    with tracelab.Recorder(str(tmp_path), model=net, optimizer=opt) as rec:
        for _ in range(3):
            loss = net(torch.randn(5, 4)).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                net[0].weight.mul_(2.0)  # changed by hand: the end differs from the start
            rec.step(loss=loss)
    meta = json.loads((tmp_path / "meta.json").read_text())
    params = {p["name"]: p for p in meta["model"]["parameters"]}
    assert set(meta["frozen_at_close"]) == {"0.weight", "0.bias"}
    assert "values" not in params["1.weight"] and "values" not in params["count"]
    first = params["0.weight"]["values"]
    assert first["numel"] == 32 and first["max"] == pytest.approx(start.max().item())
    assert first["std"] == pytest.approx(start.std().item())
    assert meta["frozen_at_close"]["0.weight"]["max"] == pytest.approx(8 * first["max"])


def test_a_large_frozen_parameter_is_summarized_from_its_first_values():
    big = torch.nn.Embedding(FROZEN_SAMPLE // 16 + 100, 16).requires_grad_(False)
    with torch.no_grad():
        big.weight[FROZEN_SAMPLE // 16:] = 1e6  # past the sample
    values = frozen_values(big)["weight"]
    assert values["numel"] == FROZEN_SAMPLE and values["max"] < 100
