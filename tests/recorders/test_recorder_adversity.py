"""What a hostile or unlucky training loop gives the recorder: training goes on unchanged (bit
for bit, against an unrecorded twin), the run opens, and what was recorded matches plain torch."""
import warnings

import numpy as np
import pytest
import torch

import tracelab
from tracelab.core.schema import (BACKWARD_PASSES, BACKWARD_RESETS, GRAD_LEFTOVER,
                                  GRAD_NORM_BACKWARD)
from tracelab.recorders import fingerprints as fingerprints_module
from tracelab.recorders.fingerprints import Fingerprints
from tracelab.recorders.transfer import StepRecord


def _units(fp, x, split="train"):
    record = StepRecord()
    fp.record(0, split, x, record)
    return {cols["input"][0]: cols["hash"] for _, cols in record.seal()()}


def _lazy_model(frozen: bool):
    torch.manual_seed(0)
    last = torch.nn.Linear(8, 1) if frozen else torch.nn.LazyLinear(1)  # else all Lazy
    model = torch.nn.Sequential(torch.nn.LazyLinear(8), torch.nn.ReLU(), last)
    if frozen:  # a Lazy layer frozen before its first forward
        model[0].weight.requires_grad = False
        model[0].bias.requires_grad = False
    return model, torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)


def _train(model, opt, rec, steps=6):
    """Losses and final parameters of a small loop (recorded when `rec`)."""
    seen = []
    for step in range(steps):
        x = torch.randn(16, 4, generator=torch.Generator().manual_seed(step))
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        opt.step()
        if rec is not None:
            rec.step(loss=loss, inputs=x)
        seen += [loss.detach(), torch.cat([g.reshape(-1) for g in grads]).norm()]
    return seen + [p.detach().clone() for p in model.parameters()]


def _same(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def test_a_one_column_batch_is_fingerprinted_whatever_its_strides():
    # A DataFrame's single numeric column comes as an [n, 1] array with stride (1, n); a
    # transposed [1, n] tensor too: both once failed to view their floats' bits.
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"x": np.arange(12.0) % 5, "name": ["a"] * 12})
    plain = torch.tensor((np.arange(12.0) % 5)[:, None])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nor a warning about a read-only NumPy block
        got = _units(Fingerprints(10_000), frame)["input"]
    assert np.array_equal(got, _units(Fingerprints(10_000), plain)["input"])
    assert len(got) == 12 and len(np.unique(got)) == 5  # equal rows hash equal, and only they
    column = torch.randn(1, 10).t()  # stride (1, 10)
    assert column.stride() == (1, 10)
    assert np.array_equal(_units(Fingerprints(10_000), column)["input"],
                          _units(Fingerprints(10_000), column.contiguous())["input"])


def test_a_one_column_frame_is_fingerprinted_by_the_recorder(tmp_path):
    pd = pytest.importorskip("pandas")
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    frame = pd.DataFrame({"x": np.arange(16.0)})
    with tracelab.Recorder(tmp_path / "run", model, opt, input_every=1) as rec:
        for _ in range(3):
            opt.zero_grad()
            loss = model(torch.tensor(frame.to_numpy(), dtype=torch.float32)).pow(2).mean()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=frame)
    fp = tracelab.open_run(tmp_path / "run").fingerprints
    assert sorted(fp["input"].unique()) == ["input"] and len(fp) == 16


def test_float8_rows_hash_by_their_bits_not_a_truncated_value():
    torch.manual_seed(0)
    rows = (torch.randn(64, 6) * 0.4).to(torch.float8_e4m3fn)  # values mostly below 1
    distinct = len(torch.unique(rows.view(torch.uint8), dim=0))
    assert distinct == 64 and len(np.unique(_hashes(rows))) == distinct


def _hashes(x):
    return _units(Fingerprints(10_000), x)["input"]


def test_a_large_batch_hashes_by_pieces_as_it_would_whole(monkeypatch):
    torch.manual_seed(0)
    pair = (torch.randn(37, 2, 5, 5), torch.randn(37, 2, 5, 5))
    expanded = torch.randn(1, 300).expand(37, 300)  # stride 0: hashed without its copy
    whole = [_units(Fingerprints(10_000), x) for x in (pair, expanded)]
    monkeypatch.setattr(fingerprints_module, "_CHUNK", 64)
    pieces = [_units(Fingerprints(10_000), x) for x in (pair, expanded)]
    for a, b in zip(whole, pieces):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert len(np.unique(whole[1]["input"])) == 1


def test_a_lazy_layer_frozen_before_its_first_forward_neither_stops_the_recorder(tmp_path):
    model, opt = _lazy_model(frozen=True)
    with tracelab.Recorder(tmp_path / "run", model, opt) as rec:  # raised ValueError
        recorded = _train(model, opt, rec)
    twin, twin_opt = _lazy_model(frozen=True)
    assert _same(recorded, _train(twin, twin_opt, None))
    run = tracelab.open_run(tmp_path / "run")
    params = {p["name"]: p for p in run.meta["model"]["parameters"]}
    assert params["0.weight"]["shape"] is None and "values" not in params["0.weight"]
    at_close = run.meta["frozen_at_close"]["0.weight"]
    weight = model[0].weight.detach().double().reshape(-1)
    assert at_close["numel"] == 32
    assert at_close["mean"] == pytest.approx(weight.mean().item(), rel=1e-12)
    assert at_close["std"] == pytest.approx(weight.std().item(), rel=1e-12)
    assert at_close["max"] == weight.max().item()


def test_a_lazy_model_s_backward_passes_and_norms_are_recorded_once_materialized(tmp_path):
    model, opt = _lazy_model(frozen=False)
    with tracelab.Recorder(tmp_path / "run", model, opt) as rec:
        recorded = _train(model, opt, rec)
    twin, twin_opt = _lazy_model(frozen=False)
    assert _same(recorded, _train(twin, twin_opt, None))
    signals = tracelab.open_run(tmp_path / "run").signals
    table = signals.pivot_table(index="step", columns="name", values="value")
    # The first step materializes the model; from the second on each backward pass is seen.
    assert (table.loc[1:, BACKWARD_PASSES] == 1).all() and len(table.loc[1:]) == 5
    assert (table.loc[1:, BACKWARD_RESETS] == 0).all()
    norms = table[GRAD_NORM_BACKWARD].dropna()
    assert len(norms) >= 5
    for step, norm in norms.items():
        assert norm == pytest.approx(recorded[2 * step + 1].item(), rel=1e-5)


class _SparseSmallest(torch.nn.Module):
    """A model whose smallest parameter (the one the gradient-reset hook watches) is an
    Embedding's with sparse grads."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(2, 2, sparse=True)
        self.hidden = torch.nn.Linear(2, 8, bias=False)
        self.out = torch.nn.Linear(8, 1, bias=False)

    def forward(self, ids):
        return self.out(self.hidden(self.embed(ids)))


def _sparse_loop(run_dir, reset_inside: bool, zero_grad: bool = True):
    """Two backward passes per optimizer step; zero_grad() between them when `reset_inside`,
    none at all unless `zero_grad`; recorded into `run_dir` unless None. Returns the losses and
    final parameters, and the embedding's held grad before each step's first pass."""
    torch.manual_seed(0)
    model = _SparseSmallest()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = None if run_dir is None else tracelab.Recorder(run_dir, model, opt)
    seen, held = [], []
    for step in range(4):
        if zero_grad:
            opt.zero_grad()
        grad = model.embed.weight.grad
        held.append(0.0 if grad is None else grad.to_dense().abs().max().item())
        for micro in range(2):
            if micro and reset_inside:
                opt.zero_grad()
            ids = torch.randint(0, 2, (8,), generator=torch.Generator().manual_seed(10 * step
                                                                                     + micro))
            loss = model(ids).pow(2).mean()
            loss.backward()  # the recorder's hook raised NotImplementedError (sparse amax)
            seen.append(loss.detach())
        opt.step()
        if rec is not None:
            rec.step(loss=loss)
    if rec is not None:
        rec.close()
    return seen + [p.detach().clone() for p in model.parameters()], held


@pytest.mark.parametrize("reset_inside,zero_grad", [(True, True), (False, True), (False, False)])
def test_a_sparse_grad_on_the_watched_parameter_is_read_not_raised(tmp_path, reset_inside,
                                                                   zero_grad):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the recorder warns of nothing either
        recorded, held = _sparse_loop(tmp_path / "run", reset_inside, zero_grad)
    assert _same(recorded, _sparse_loop(None, reset_inside, zero_grad)[0])
    table = tracelab.open_run(tmp_path / "run").signals.pivot_table(
        index="step", columns="name", values="value")
    assert (table[BACKWARD_PASSES] == 2).all() and len(table) == 4
    assert (table[BACKWARD_RESETS] == (1 if reset_inside else 0)).all()
    assert np.allclose(table[GRAD_LEFTOVER].to_numpy(), held, rtol=1e-6)
    assert (table[GRAD_LEFTOVER].iloc[1:] > 0).all() == (not zero_grad)
