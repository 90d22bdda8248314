"""A module called several times per forward pass: every call is read and pooled into its row,
meta.json names the module with its calls and keeps each call's shapes; collapsed-outputs judges
a decoder by all its calls, not by the first one."""
import json

import numpy as np
import pytest
import torch

import tracelab
from tracelab.analyzers.collapsed_outputs import collapsed_outputs
from tracelab.core.run import open_run
from tracelab.recorders.activations import pool_calls

STEPS = 16


class Decoder(torch.nn.Module):
    """One Linear head applied at each of 16 time steps (teacher forcing); its first call reads
    the start token, the same for every input, so that call alone gives one output."""

    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Linear(4, 8)
        self.cell = torch.nn.GRUCell(8, 8)
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x):
        h = torch.zeros(x.shape[0], 8)
        outs = []
        start = torch.zeros_like(x[:, :1])
        tokens = torch.cat([start, x[:, :-1]], 1)
        for t in range(STEPS):
            h = self.cell(self.enc(tokens[:, t]), h)
            outs.append(self.head(h))
        return torch.cat(outs, 1)


def _train(run_dir, steps=40, lr=0.05, collapse=False):
    torch.manual_seed(0)
    model = Decoder()
    if collapse:  # a head that gives one value whatever its input, and never learns
        with torch.no_grad():
            model.head.weight.zero_()
        model.head.weight.requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)
    heads = []
    hook = model.head.register_forward_hook(lambda m, a, out: heads.append(out.detach().clone()))
    with tracelab.Recorder(str(run_dir), model, opt, activation_every=5) as rec:
        for step in range(steps):
            heads.clear()
            x = torch.randn(32, STEPS, 4)
            loss = (model(x) - x[:, :, 0]).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            recorded = rec.step_index % 5 == 0
            rec.step(loss)
            if recorded and step == 0:
                first = list(heads)
    hook.remove()
    return first


def test_every_call_of_a_module_is_pooled_into_its_row(tmp_path):
    calls = _train(tmp_path, steps=1)
    assert len(calls) == STEPS
    run = open_run(str(tmp_path))
    rows = run.tensors[(run.tensors["kind"] == "activation") & (run.tensors["name"] == "head")]
    [row] = rows.to_dict("records")
    pooled = torch.cat(calls).double()
    assert row["numel"] == pooled.numel()
    assert row["mean"] == pytest.approx(float(pooled.mean()))
    assert row["std"] == pytest.approx(float(pooled.std()))
    assert row["max"] == pytest.approx(float(pooled.max()))
    assert row["min"] == pytest.approx(float(pooled.min()))
    assert row["norm"] == pytest.approx(float(pooled.norm()))
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["activation_calls"] == {"head": STEPS, "cell": STEPS, "enc": STEPS}
    assert rows_order(run) == ["enc", "cell", "head"]  # by last call: the head ran last
    shapes = meta["module_shapes"]["head"]
    assert len(shapes) == STEPS
    assert shapes[0] == {"inputs": [[32, 8]], "output": [32, 1]}
    assert meta["module_shapes"]["cell"][0] == {"inputs": [[32, 8], [32, 8]], "output": [32, 8]}


def rows_order(run):
    acts = run.tensors[run.tensors["kind"] == "activation"]
    return list(acts["name"])


def test_pooling_keeps_single_calls_as_they_are_and_dead_units_dead_in_every_call():
    raw = np.arange(20, dtype=float).reshape(2, 10)
    names, numel, out = pool_calls(["a", "b"], np.array([3, 4]), raw)
    assert names == ["a", "b"] and (out == raw).all()
    raw = np.array([[1, 2, 3, 4, 5, 6, 0, 0, 0.5, 0.2], [2, 2, 1, 1, 9, 1, 1, 0, 0.25, 0.6]])
    names, numel, out = pool_calls(["a", "a"], np.array([10, 30]), raw)
    assert names == ["a"] and list(numel) == [40]
    assert pool_calls(["a", "b", "a"], np.array([1, 1, 1]), np.zeros((3, 10)))[0] == ["b", "a"]
    assert out[0, 0] == 3 and out[0, 1] == pytest.approx(np.sqrt(8)) and out[0, 4] == 9
    assert out[0, 5] == 6 and out[0, 6] == 1 and out[0, 8] == 0.25
    assert out[0, 9] == pytest.approx((0.2 * 10 + 0.6 * 30) / 40)


def test_collapsed_outputs_quiet_on_a_healthy_decoder_whose_first_call_is_constant(tmp_path):
    calls = _train(tmp_path)
    assert float(calls[0].max() - calls[0].min()) == 0  # the first call alone looks collapsed
    assert collapsed_outputs(open_run(str(tmp_path))) == []


def test_collapsed_outputs_fires_on_a_decoder_collapsed_at_every_call(tmp_path):
    _train(tmp_path, collapse=True)
    [finding] = collapsed_outputs(open_run(str(tmp_path)))
    assert finding.subject == "head"
