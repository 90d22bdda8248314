"""The compiled kernels read memory by address: only plain tensors whose storage covers what is
read take that path; subclasses and everything else are asked through torch."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")

import tracelab  # noqa: E402
from tracelab.recorders import kernel_loader  # noqa: E402
from tracelab.recorders.parameters import ParameterStats, host_layout  # noqa: E402
from tracelab.recorders.stats import reference_stats  # noqa: E402

from test_recorder_stats import assert_matches  # noqa: E402

needs_kernels = pytest.mark.skipif(kernel_loader.kernels() is None, reason="numba unavailable")


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


@needs_kernels
def test_a_tensor_subclass_parameter_is_recorded_through_torch(tmp_path):
    torch.manual_seed(1)
    weight = torch.nn.Parameter(torch.randn(3, 4).as_subclass(Tagged))
    bias = torch.nn.Parameter(torch.randn(3))
    assert type(weight) is Tagged  # nn.Parameter keeps a subclass's type
    assert host_layout([weight, bias]) is None
    assert host_layout([bias]) is not None
    run, refs = _record(tmp_path / "run", _Linear(weight, bias))
    _assert_recorded(run, refs)


@needs_kernels
def test_a_subclass_that_overstates_its_size_is_never_read_by_address():
    lying = torch.nn.Parameter(torch.randn(16).as_subclass(Oversized))
    assert lying.numel() == 16_000  # the old layout would have read 16,000 floats
    assert host_layout([lying]) is None
    stats = ParameterStats([("w", lying)])
    stats.snapshot()  # the torch path: a copy, no read past the memory
    assert isinstance(stats._snapshot, list)


@needs_kernels
def test_tied_weights_read_in_place_match_torch(tmp_path):
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 4))
    model[2].weight = model[0].weight  # one Parameter in two modules
    params = [p for _, p in model.named_parameters()]
    assert len(params) == 3 and host_layout(params) is not None  # the address path
    run, refs = _record(tmp_path / "run", model)
    assert run.names("weight") == ["0.weight", "0.bias", "2.bias"]
    _assert_recorded(run, refs)


@needs_kernels
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
    assert host_layout([weight, bias, other]) is not None  # the address path
    run, refs = _record(tmp_path / "run", model)
    _assert_recorded(run, refs)


@needs_kernels
def test_a_tensor_whose_storage_was_freed_is_never_read_by_address():
    weight = torch.nn.Parameter(torch.randn(64))
    stats = ParameterStats([("w", weight)])
    assert stats._param_layout([weight]) is not None
    # FSDP frees an unsharded parameter's memory this way; the tensor keeps its shape.
    weight.untyped_storage().resize_(0)
    assert weight.numel() == 64
    assert host_layout([weight]) is None
    assert stats._param_layout([weight]) is None  # the cached layout was checked again
