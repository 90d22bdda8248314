"""Parameters of unusual layouts (tensor subclasses, tied weights, views of one storage, freed
storage) are recorded as plain torch computes them, and never stop the training."""
from __future__ import annotations


import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")

import tracelab  # noqa: E402
from tracelab.recorders.parameters import ParameterStats  # noqa: E402
from tracelab.recorders.stats import reference_stats  # noqa: E402

from test_recorder_stats import assert_matches  # noqa: E402

class Tagged(torch.Tensor):
    """A subclass that only adds a type, as libraries do to mark their tensors."""


class Oversized(torch.Tensor):
    """A subclass whose numel() claims more than its memory holds, like a DTensor's global size."""

    def numel(self) -> int:
        return super().numel() * 1000


def _record(run_dir, model, steps=3):
    """Train `model` (any module of float parameters) with SGD, recorded; the run and each
    step's reference tensors."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    torch.manual_seed(0)
    x = torch.randn(8, 4)
    refs = []
    with tracelab.Recorder(run_dir, model, opt, activation_every=100) as rec:
        for _ in range(steps):
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            before = {n: p.detach().clone() for n, p in model.named_parameters()}
            opt.step()
            refs.append({"weight": {n: p.detach().clone() for n, p in model.named_parameters()},
                         "grad": {n: p.grad.detach().clone()
                                  for n, p in model.named_parameters()},
                         "update": {n: p.detach() - before[n]
                                    for n, p in model.named_parameters()}})
            rec.step(loss=loss)
    return tracelab.open_run(run_dir), refs


def _assert_recorded(run, refs):
    tn = run.tensors
    for step, ref in enumerate(refs):
        for kind, tensors in ref.items():
            for name, tensor in tensors.items():
                row = tn[(tn.step == step) & (tn.kind == kind) & (tn.name == name)]
                assert len(row) == 1, (step, kind, name)
                assert_matches(row.iloc[0], reference_stats(tensor), rtol=1e-5, atol=1e-10)


class _Linear(torch.nn.Module):
    def __init__(self, weight: torch.nn.Parameter, bias: torch.nn.Parameter,
                 other: torch.nn.Parameter | None = None):
        super().__init__()
        self.weight, self.bias, self.other = weight, bias, other

    def forward(self, x):
        out = torch.nn.functional.linear(x, self.weight, self.bias)
        return out if self.other is None else out * self.other


def test_a_tensor_subclass_parameter_is_recorded_through_torch(tmp_path):
    torch.manual_seed(1)
    weight = torch.nn.Parameter(torch.randn(3, 4).as_subclass(Tagged))
    bias = torch.nn.Parameter(torch.randn(3))
    assert type(weight) is Tagged  # nn.Parameter keeps a subclass's type
    run, refs = _record(tmp_path / "run", _Linear(weight, bias))
    _assert_recorded(run, refs)


def test_a_subclass_that_overstates_its_size_is_copied_as_torch_copies_it():
    lying = torch.nn.Parameter(torch.randn(16).as_subclass(Oversized))
    assert lying.numel() == 16_000  # an address read of this many floats would overrun
    stats = ParameterStats([("w", lying)])
    stats.snapshot()
    assert torch.equal(torch.Tensor(stats._snapshot[0]), torch.Tensor(lying.detach()))


def test_tied_weights_read_in_place_match_torch(tmp_path):
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 4))
    model[2].weight = model[0].weight  # one Parameter in two modules
    params = [p for _, p in model.named_parameters()]
    assert len(params) == 3
    run, refs = _record(tmp_path / "run", model)
    assert run.names("weight") == ["0.weight", "0.bias", "2.bias"]
    _assert_recorded(run, refs)


def test_parameters_viewing_one_storage_read_in_place_match_torch(tmp_path):
    torch.manual_seed(3)
    base = torch.randn(40)
    # The weight starts at an offset, the bias ends exactly at the storage's end, and `other`
    # overlaps the weight, so that the weight's update also moves it.
    weight = torch.nn.Parameter(base[4:16].view(3, 4))
    bias = torch.nn.Parameter(base[37:40])
    other = torch.nn.Parameter(base[14:17])
    assert weight.untyped_storage().data_ptr() == other.untyped_storage().data_ptr()
    model = _Linear(weight, bias, other)
    run, refs = _record(tmp_path / "run", model)
    _assert_recorded(run, refs)


def test_a_parameter_whose_storage_was_freed_never_stops_the_training(tmp_path):
    """FSDP frees an unsharded parameter's memory (the tensor keeps its shape): its statistics
    fail, the recorder warns once, and the loop and the other rows go on."""
    torch.manual_seed(4)
    model = _Linear(torch.nn.Parameter(torch.randn(3, 4)), torch.nn.Parameter(torch.randn(3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 4)
    with tracelab.Recorder(tmp_path / "run", model, opt) as rec:
        for step in range(2):
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            if step == 0:
                rec.step(loss=loss)
                continue
            model.weight.untyped_storage().resize_(0)
            with pytest.warns(RuntimeWarning, match="parameter statistics failed at step 1"):
                rec.step(loss=loss)
    run = tracelab.open_run(tmp_path / "run")
    assert len(run.loss()) == 2
    assert sorted(set(run.tensors.loc[run.tensors.kind == "weight", "step"])) == [0]
