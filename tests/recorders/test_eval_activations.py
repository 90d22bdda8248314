"""Activations of evaluation passes: on recording steps, the first evaluation forward pass is
read into rows of its own split ("val" from the next log(), "eval" without one), checked against
plain torch; the training rows, all that rules read, stay those of the training pass; runs
recorded before the split column existed still open."""
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import tracelab
from tracelab.core.run import Run, open_run
from tracelab.core.schema import ACTIVATION, ARROW_SCHEMAS, TENSORS

EVERY = 5
pytestmark = pytest.mark.usefixtures("one_thread")


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def _outputs(model, x):
    """Each leaf module's output for `x`, as plain torch computes it, and the model's."""
    seen = {}
    handles = [m.register_forward_hook(
        lambda m, a, out, n=n: seen.__setitem__(n, out.detach().clone()))
        for n, m in model.named_children()]
    out = model(x)
    for h in handles:
        h.remove()
    return seen, out


def _train(run_dir, steps=12, log=True, train_mode_eval=False):
    """A tiny classifier; after steps 4 and 9 (just before the recording steps 5 and 10) two
    evaluation batches, then log("val") when `log`. Returns the plain-torch outputs of each
    recording step's training pass and of each evaluation's first batch, by step."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    train, evals = {}, {}
    with tracelab.Recorder(str(run_dir), model, opt, activation_every=EVERY) as rec:
        for step in range(steps):
            x, y = torch.randn(16, 4, generator=g), torch.randint(0, 3, (16,), generator=g)
            train[step], logits = _outputs(model, x)  # the training pass itself
            loss = torch.nn.functional.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss)
            if step % EVERY == EVERY - 1:
                first, second = 3 * torch.randn(10, 4, generator=g), torch.randn(7, 4)
                if not train_mode_eval:
                    model.eval()
                with torch.no_grad():
                    evals[step + 1], _ = _outputs(model, first)
                    model(first)
                    model(100 * second)  # a later batch: not read
                model.train()
                if log:
                    rec.log("val", metrics={"loss": 1.0})
    return train, evals


def _check(rows, outputs):
    """Recorded rows (one per module) against the modules' outputs."""
    assert list(rows["name"]) == list(outputs)
    for (_, row), out in zip(rows.iterrows(), outputs.values()):
        x = out.double()
        assert row["numel"] == x.numel()
        assert row["mean"] == pytest.approx(float(x.mean()), rel=1e-6, abs=1e-9)
        assert row["min"] == pytest.approx(float(x.min()), rel=1e-6)
        assert row["max"] == pytest.approx(float(x.max()), rel=1e-6)
        assert row["norm"] == pytest.approx(float(x.norm()), rel=1e-6)


def test_val_activations_match_torch_at_the_recording_step(tmp_path):
    train, evals = _train(tmp_path / "run")
    run = open_run(tmp_path / "run")
    val = run.tensors_of("val")
    assert sorted(set(val["step"])) == [5, 10]
    assert set(val["kind"]) == {ACTIVATION} and set(val["split"]) == {"val"}
    for step in (5, 10):
        _check(val[val["step"] == step], evals[step])
    # The training rows are the training passes' alone, at the same steps.
    acts = run.tensors[run.tensors["kind"] == ACTIVATION]
    assert set(acts["split"]) == {"train"}
    assert sorted(set(acts["step"])) == [0, 5, 10]
    for step in (0, 5, 10):
        _check(acts[acts["step"] == step], train[step])
    # What the rules read (a step x name grid) holds the training values.
    grid = run.stat(ACTIVATION, "max")
    assert list(grid.index) == [0, 5, 10]
    for step in (0, 5, 10):
        assert grid.loc[step, "0"] == pytest.approx(float(train[step]["0"].max()), rel=1e-6)
    assert len(run.tensors_of(None)) == len(run.tensors) + len(val)


def test_without_log_the_evaluation_is_recorded_as_eval(tmp_path):
    _, evals = _train(tmp_path / "run", log=False)
    run = open_run(tmp_path / "run")
    assert run.tensors_of("val").empty
    found = run.tensors_of("eval")
    assert sorted(set(found["step"])) == [5, 10]  # the last one written at close
    for step in (5, 10):
        _check(found[found["step"] == step], evals[step])


def test_a_no_grad_pass_in_train_mode_is_an_evaluation(tmp_path):
    _, evals = _train(tmp_path / "run", train_mode_eval=True)
    val = open_run(tmp_path / "run").tensors_of("val")
    for step in (5, 10):
        _check(val[val["step"] == step], evals[step])


def test_evaluations_between_other_steps_are_not_read(tmp_path):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tracelab.Recorder(str(tmp_path / "run"), model, opt, activation_every=EVERY) as rec:
        for step in range(8):
            loss = model(torch.randn(8, 4)).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss)
            model.eval()
            with torch.no_grad():
                model(torch.randn(8, 4))
            model.train()
            rec.log("val", metrics={"loss": 1.0})
    # Only the evaluation after step 4, in the window of the recording step 5, was read.
    found = open_run(tmp_path / "run").tensors_of(None)
    assert sorted(set(found.loc[found["split"] != "train", "step"])) == [5]
    assert set(found.loc[found["split"] != "train", "split"]) == {"val"}


def _old_part(path, rows):
    """A tensors part as schema version 1 wrote it: no split column."""
    old = pa.schema([f for f in ARROW_SCHEMAS[TENSORS] if f.name != "split"])
    (path / TENSORS).mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(rows, schema=old, preserve_index=False),
                   path / TENSORS / "r0-000000.parquet")
    with pa.ipc.new_stream(path / TENSORS / "r0-000001.arrows", old) as tail:
        tail.write_table(pa.Table.from_pandas(rows.assign(step=rows["step"] + 1), schema=old,
                                              preserve_index=False))


def test_a_run_without_the_split_column_opens(tmp_path):
    path = tmp_path / "old"
    rows = pd.DataFrame({"step": [0, 0], "kind": ["weight", "activation"], "name": ["w", "a"],
                         **{c: [1.0, 2.0] for c in ("mean", "std", "min", "max", "abs_mean",
                                                    "norm", "zero_frac", "dead_frac",
                                                    "saturated_frac")},
                         **{c: [4, 4] if c == "numel" else [0, 0]
                            for c in ("numel", "nan_count", "inf_count")}})
    _old_part(path, rows)
    (path / "meta.json").write_text('{"schema_version": 1, "status": {"state": "completed"}}')
    run = open_run(path)
    assert len(run.tensors) == 4 and set(run.tensors["split"]) == {"train"}
    assert run.tensor_index.names[ACTIVATION] == ["a"]
    assert list(run.tensor_index.steps[ACTIVATION]) == [0, 1]
    assert run.tensors_of("val").empty
    assert len(run.tensors_of(None)) == 4
    assert not run.problems


def test_a_run_in_memory_reads_its_train_rows():
    rows = pd.DataFrame({"step": [0, 0, 0], "kind": [ACTIVATION] * 3, "name": ["a"] * 3,
                         "mean": [1.0, 2.0, 3.0], "split": [None, "val", "train"]})
    run = Run.from_frames(tensors=rows)
    assert list(run.tensors["mean"]) == [1.0, 3.0]
    assert list(run.tensors_of("val")["mean"]) == [2.0]
    assert np.array_equal(run.tensor_index.steps[ACTIVATION], [0])


def test_an_evaluation_before_step_is_named_by_the_log_after_it(tmp_path):
    """A loop that evaluates after its optimizer step and calls rec.step() before rec.log():
    the evaluation of the recording step's window still gets log()'s split."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    evals = {}
    with tracelab.Recorder(str(tmp_path / "run"), model, opt, activation_every=EVERY) as rec:
        for step in range(7):
            loss = model(torch.randn(8, 4)).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            model.eval()
            with torch.no_grad():
                evals[step], _ = _outputs(model, torch.randn(6, 4))
            model.train()
            rec.step(loss)
            rec.log("test", metrics={"loss": 1.0})
    found = open_run(tmp_path / "run").tensors_of(None)
    named = found[found["split"] != "train"]
    assert set(named["split"]) == {"test"} and sorted(set(named["step"])) == [0, 5]
    for step in (0, 5):
        _check(named[named["step"] == step], evals[step])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_evaluation_activations_never_sync_the_host_on_cuda(tmp_path):
    """On CUDA the evaluation's statistics ride the log() call's packed copy: no host sync on
    the training thread (CUDA's sync detector in "error" mode raises at the first one)."""
    dev = torch.device("cuda")
    model = _model().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(64, 4, device=dev), torch.randn(64, 3, device=dev)
    xv = torch.randn(4096, 4, device=dev)  # outputs larger than the activation subsample
    evals = {}
    with tracelab.Recorder(str(tmp_path / "run"), model, opt, activation_every=EVERY) as rec:
        torch.cuda.set_sync_debug_mode("error")
        try:
            for step in range(2 * EVERY):
                loss = torch.nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                rec.step(loss)
                model.eval()
                with torch.no_grad():
                    evals[step + 1], val = _outputs(model, xv)
                model.train()
                rec.log("val", metrics={"loss": val.square().mean()})
            assert rec.writer.flush() and not rec.writer.failed
        finally:
            torch.cuda.set_sync_debug_mode("default")
    val = open_run(tmp_path / "run").tensors_of("val")
    assert sorted(set(val["step"])) == [EVERY, 2 * EVERY]
    rows = val[val["step"] == EVERY].set_index("name")
    for name, out in evals[EVERY].items():
        assert rows.loc[name, "mean"] == pytest.approx(float(out.double().mean()), rel=1e-5,
                                                       abs=1e-7)
        assert rows.loc[name, "max"] == pytest.approx(float(out.max()), rel=1e-5)
