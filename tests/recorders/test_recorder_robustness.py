"""Crash safety, exceptions, odd models and values: recording never breaks training."""
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import pyarrow.dataset as ds
import pytest
import torch

import tracelab
from tracelab.core.errors import RunExistsError
from tracelab.core.writer import FLUSH_ITEMS


def _tiny():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.05)


def _fit(rec, model, opt, steps, x=None):
    x = torch.randn(8, 4) if x is None else x
    for _ in range(steps):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        rec.step(loss=loss, inputs=x)


HANG = textwrap.dedent("""
    import sys, time, torch, tracelab
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rec = tracelab.Recorder(sys.argv[1], model, opt, flush_interval=float(sys.argv[3]))
    for step in range(int(sys.argv[2])):
        opt.zero_grad(); loss = model(torch.randn(8, 4)).pow(2).mean(); loss.backward(); opt.step()
        rec.step(loss=loss)
        if step == 10:
            print("FLUSHED" if rec.writer.flush(None) else "FAILED", flush=True)
        elif step > 10 and step % 500 == 0:
            print(step, flush=True)
    print("HANG", flush=True)
    time.sleep(600)  # the loop hangs: step() is never called again
""")


def _hang(run_dir, steps: int, flush_interval: float) -> subprocess.Popen:
    """The HANG loop, once steps 0-10 are on disk."""
    proc = subprocess.Popen([sys.executable, "-c", HANG, str(run_dir), str(steps),
                             str(flush_interval)], stdout=subprocess.PIPE, text=True)
    if proc.stdout.readline().strip() != "FLUSHED":
        proc.kill()
        pytest.fail("the recorded loop did not start")
    return proc


def _kill_when_on_disk(proc: subprocess.Popen, run_dir, steps: int, grads: int = 0) -> None:
    """Wait until the hung loop's recorder has `steps` steps of loss and `grads` grad rows on
    disk, with no step() call after the last, then SIGKILL it: a flush writes its tables one
    after the other, so the loss's table alone can be on disk before the grads' of the same
    flush. The deadline only keeps a broken writer from hanging the test; both loops' timed
    flushes are further away."""
    try:
        assert "HANG\n" in proc.stdout, "the recorded loop ended before it hung"
        deadline = time.monotonic() + 60
        while True:
            run = tracelab.open_run(run_dir)
            if len(run.loss()) >= steps and len(run.tensors[run.tensors.kind == "grad"]) >= grads:
                break
            assert time.monotonic() < deadline, "the hung loop's steps never reached the disk"
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


@pytest.mark.slow
def test_sigkill_while_hung_leaves_every_step_readable(tmp_path):
    run_dir = tmp_path / "run"
    _kill_when_on_disk(_hang(run_dir, 150, flush_interval=0.2), run_dir, 150, grads=150 * 2)
    run = tracelab.open_run(run_dir)
    assert run.status["state"] == "killed"
    assert run.status["last_step"] == 149
    assert list(run.loss().index) == list(range(150))
    assert len(run.tensors[run.tensors.kind == "grad"]) == 150 * 2
    diagnosis = tracelab.analyze(run, select=["run-aborted"])
    assert diagnosis.findings and "killed" in diagnosis.findings[0].message


@pytest.mark.slow
def test_sigkill_loses_fewer_than_flush_items_steps_of_a_hung_fast_loop(tmp_path):
    """Ten minutes between timed flushes: the step count alone puts all but fewer than
    FLUSH_ITEMS of the hung loop's steps on disk."""
    run_dir = tmp_path / "run"
    _kill_when_on_disk(_hang(run_dir, 1000, flush_interval=600), run_dir, 1000 - FLUSH_ITEMS + 1)
    steps = list(tracelab.open_run(run_dir).loss().index)
    assert steps == list(range(len(steps))) and len(steps) > 1000 - FLUSH_ITEMS


@pytest.mark.slow
def test_killed_mid_write_is_readable(tmp_path):
    """Killed mid-run (the writer somewhere between flushes): whatever was on disk reads back,
    nothing raises."""
    run_dir = tmp_path / "run"
    proc = _hang(run_dir, 100000, flush_interval=0.2)  # steps 0-10 on disk
    try:
        for line in proc.stdout:  # and the loop 1000 steps on
            if line.strip() == "1000":
                break
        else:
            pytest.fail("the recorded loop ended before step 1000")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    run = tracelab.open_run(run_dir)
    assert run.status["state"] == "killed"
    loss = run.loss()
    assert len(loss) >= 11 and list(loss.index) == list(range(len(loss)))
    assert run.problems == []


def test_exception_is_recorded_then_reraised(tmp_path):
    model, opt = _tiny()
    with pytest.raises(FloatingPointError, match="loss diverged"):
        with tracelab.Recorder(tmp_path / "run", model, opt) as rec:
            _fit(rec, model, opt, 5)
            raise FloatingPointError("loss diverged")
    status = tracelab.open_run(tmp_path / "run").status
    assert status["state"] == "failed"
    assert status["exception_type"] == "FloatingPointError"
    assert status["exception_message"] == "loss diverged"
    assert status["step"] == 4 and "raise FloatingPointError" in status["traceback"]


def test_existing_run_is_never_overwritten(tmp_path):
    with tracelab.Recorder(tmp_path / "run") as rec:
        rec.step(loss=1.0)
    before = (tmp_path / "run" / "meta.json").read_bytes()
    with pytest.raises(RunExistsError, match="already holds a run"):
        tracelab.Recorder(tmp_path / "run")
    assert (tmp_path / "run" / "meta.json").read_bytes() == before


def test_nan_and_inf_are_counted_never_raised(tmp_path):
    model, opt = _tiny()
    with tracelab.Recorder(tmp_path / "run", model, opt, activation_every=1, input_every=1) as rec:
        _fit(rec, model, opt, 2)
        with torch.no_grad():
            model[0].weight[0, 0] = float("nan")
        x = torch.randn(8, 4)
        x[0, 1] = float("inf")
        _fit(rec, model, opt, 2, x)
    run = tracelab.open_run(tmp_path / "run")
    tn = run.tensors
    w = tn[(tn.kind == "weight") & (tn.name == "0.weight")].set_index("step")
    assert w.loc[2, "nan_count"] >= 1 and w.loc[0, "nan_count"] == 0
    assert run.inputs.set_index(["step", "feature"]).loc[(2, "feature[1]"), "inf_count"] == 1
    assert run.loss().isna().iloc[-1]


def test_wrapped_models_frozen_and_gradless_parameters(tmp_path):
    torch.manual_seed(0)
    inner = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    unused = torch.nn.Linear(4, 4)  # in the model, never used in forward: grad stays None
    inner.add_module("unused", unused)
    inner[0].bias.requires_grad_(False)
    model = torch.nn.DataParallel(inner)
    opt = torch.optim.Adam([p for p in inner.parameters() if p.requires_grad], lr=0.01)
    with tracelab.Recorder(tmp_path / "run", model, opt) as rec:
        for _ in range(3):
            opt.zero_grad()
            loss = inner[2](inner[1](inner[0](torch.randn(8, 4)))).pow(2).mean()
            loss.backward()
            opt.step()
            rec.step(loss=loss)
    run = tracelab.open_run(tmp_path / "run")
    names = set(run.tensors["name"])
    assert "0.weight" in names and not any(n.startswith("module.") for n in names)
    assert "0.bias" not in names  # requires_grad=False is intentional: not tracked
    grads = set(run.tensors.loc[run.tensors.kind == "grad", "name"])
    assert "unused.weight" not in grads
    params = {p["name"]: p for p in run.meta["model"]["parameters"]}
    assert params["0.bias"]["requires_grad"] is False
    assert params["unused.weight"]["in_optimizer"] is True


def test_a_submodule_named_module_is_not_taken_for_a_wrapper(tmp_path):
    """DDP and DataParallel wrap one child, `module`; a model of one's own may name a
    submodule so beside others: every parameter is recorded under its own name."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.module = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
            self.head = torch.nn.Linear(8, 1)

        def forward(self, x):
            return self.head(self.module(x))

    for model, prefix in ((Net(), ""), (torch.nn.DataParallel(Net()), "")):
        run_dir = tmp_path / str(id(model))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with tracelab.Recorder(run_dir, model, opt) as rec:
            opt.zero_grad()
            model(torch.randn(4, 4)).sum().backward()
            opt.step()
            rec.step()
        tn = tracelab.open_run(run_dir).tensors
        assert sorted(tn.loc[tn.kind == "grad", "name"].unique()) == \
            ["head.bias", "head.weight", "module.0.bias", "module.0.weight"]
        assert sorted(tn.loc[tn.kind == "activation", "name"].unique()) == \
            ["head", "module.0", "module.1"]


@pytest.mark.parametrize("due", [True, False], ids=["recording-step", "other-step"])
def test_a_hooked_model_copies_and_pickles_without_the_recorder(tmp_path, due):
    """copy.deepcopy(model) (an EMA or teacher copy) and torch.save(model), on a step that
    records activations (its leaf hooks on) and on one that does not: both work, and the
    copies carry no hook that records. The pickle loads without tracelab's hooks."""
    import copy
    import io
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tracelab.Recorder(tmp_path / "run", model, opt, activation_every=1 if due else 5) as rec:
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(4, 4)).sum().backward()
            opt.step()
            rec.step()
        assert bool(model[0]._forward_hooks) is due
        twin = copy.deepcopy(model)
        buffer = io.BytesIO()
        torch.save(model, buffer)
        loaded = torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)
        if not due:  # the always-on hooks pickle as `{}.get`: loading needs no tracelab
            assert b"tracelab" not in buffer.getvalue()
        for other in (twin, loaded):
            torch.testing.assert_close(other(torch.ones(2, 4)), model(torch.ones(2, 4)))
            other(torch.ones(2, 4)).sum().backward()  # its grad hook does nothing either
        steps = rec._step
    acts = tracelab.open_run(tmp_path / "run").tensors.query("kind == 'activation'")
    assert acts["step"].max() < steps  # the copies' forward passes recorded nothing


def test_an_evaluation_in_train_mode_gives_no_step_its_activations(tmp_path):
    """An evaluation that forgot model.eval() (the model called without autograd, in train
    mode) just before a recording step: the step's activations are its training batch's. A
    frozen part run without autograd inside the training forward is still recorded."""
    class Probe(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = torch.nn.Linear(4, 8)
            self.head = torch.nn.Linear(8, 1)

        def forward(self, x):
            with torch.no_grad():
                features = self.backbone(x)
            return self.head(features)

    torch.manual_seed(0)
    model = Probe()
    opt = torch.optim.SGD(model.head.parameters(), lr=1e-3)
    with tracelab.Recorder(tmp_path / "run", model, opt, activation_every=3) as rec:
        for step in range(7):
            opt.zero_grad()
            model(torch.randn(16, 4)).pow(2).mean().backward()  # values about N(0, 1)
            opt.step()
            rec.step()
            if step % 3 == 2:
                with torch.no_grad():
                    model(torch.randn(16, 4) * 1000)  # the validation batch, in train mode
                rec.log("val", {"loss": 1.0})
    acts = tracelab.open_run(tmp_path / "run").tensors.query("kind == 'activation'")
    backbone = acts[acts["name"] == "backbone"].set_index("step")
    assert backbone.index.tolist() == [0, 3, 6]
    assert (backbone["abs_mean"] < 10).all(), backbone["abs_mean"]  # not the 1000x batch
    assert set(acts["name"]) == {"backbone", "head"}


def test_a_frozen_module_and_a_failed_pass_in_the_activations(tmp_path):
    """A BatchNorm frozen in eval mode inside the training model is recorded; a forward pass
    that raised halfway on a recording step (caught, the step retried) gives none of its
    outputs to the step."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 8)
            self.norm = torch.nn.BatchNorm1d(8)
            self.c = torch.nn.Linear(8, 1)

        def forward(self, x, bad=False):
            h = self.norm(self.a(x))
            return self.c(h.view(3, -1) if bad else h)  # bad: a shape error after a and norm

    torch.manual_seed(0)
    model = Net()
    model.norm.eval()  # frozen statistics, a common fine-tuning set-up
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with tracelab.Recorder(tmp_path / "run", model, opt, activation_every=3) as rec:
        for step in range(7):
            opt.zero_grad()
            if step == 3:
                with pytest.raises(RuntimeError):
                    model(torch.randn(8, 4) * 1000, bad=True)
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
            rec.step()
    acts = tracelab.open_run(tmp_path / "run").tensors.query("kind == 'activation'")
    assert sorted(acts["name"].unique()) == ["a", "c", "norm"]
    a = acts[acts["name"] == "a"].set_index("step")["abs_mean"]
    assert a.index.tolist() == [0, 3, 6]
    assert a.max() < 10, a  # step 3's rows are the retried batch's, not the 1000x one


@pytest.mark.parametrize("how", ["method", "checkpointed", "wrapped"])
def test_activations_of_passes_the_model_call_does_not_begin(tmp_path, how):
    """Training through a method of the model (not its call) after an evaluation through its
    call; the whole model under non-reentrant activation checkpointing (its backward calls it
    again); an evaluation in train mode that calls the module inside torch.compile(
    DataParallel(model)) directly. Every recording step has every leaf's training outputs."""
    from torch.utils.checkpoint import checkpoint

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 8)
            self.c = torch.nn.Linear(8, 1)

        def forward(self, x):
            return self.c(torch.relu(self.a(x)))

        def loss(self, x):
            return self.forward(x).pow(2).mean()

    torch.manual_seed(0)
    model = Net()
    net = torch.compile(torch.nn.DataParallel(model), backend="eager") if how == "wrapped" \
        else model
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with tracelab.Recorder(tmp_path / "run", net, opt, activation_every=2) as rec:
        for step in range(6):
            x = torch.randn(8, 4, requires_grad=how == "checkpointed")
            opt.zero_grad()
            if how == "method":
                loss = model.loss(x)
            elif how == "checkpointed":
                loss = checkpoint(model, x, use_reentrant=False).pow(2).mean()
            else:
                loss = net(x).pow(2).mean()
            loss.backward()
            opt.step()
            rec.step()
            if step == 0 or how == "wrapped":
                with torch.no_grad():
                    if how == "method":
                        model.eval()
                    model(torch.randn(8, 4) * 1000)
                    model.train()
    acts = tracelab.open_run(tmp_path / "run").tensors.query("kind == 'activation'")
    assert acts.groupby("step")["name"].apply(sorted).to_dict() == \
        {0: ["a", "c"], 2: ["a", "c"], 4: ["a", "c"]}
    assert acts["abs_mean"].max() < 10  # no evaluation's 1000x batch


def test_a_recorder_dropped_unclosed_lets_go_of_a_compiled_model(tmp_path):
    """A notebook interrupted while the model is held uncompiled (the next step records
    activations), the Recorder deleted unclosed: the model runs compiled again."""
    import gc
    from tracelab.recorders import compiled
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    net = torch.compile(model, backend="eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = tracelab.Recorder(tmp_path / "run", net, opt, activation_every=3)
    eager = []
    model.register_forward_pre_hook(lambda m, a: eager.append(not compiled.is_compiling()))

    def step():
        opt.zero_grad()
        net(torch.randn(4, 4)).sum().backward()
        opt.step()
    for _ in range(3):
        step()
        rec.step()
    del rec
    gc.collect()
    eager.clear()
    step()
    assert eager == [False]  # the pre-hook ran traced: compiled code


def test_a_recorder_dropped_unclosed_closes_its_run(tmp_path):
    """Nothing but the Recorder's user holds it: dropped and collected, it closes its writer
    (the thread ends, the run is finished, every step reads back)."""
    import gc
    import weakref
    model, opt = _tiny()
    rec = tracelab.Recorder(tmp_path / "run", model, opt, activation_every=1, input_every=1)
    _fit(rec, model, opt, 5)
    assert rec.writer.flush()  # no queued item of this Recorder's left on the writer
    thread, dropped = rec.writer._thread, weakref.ref(rec)
    del rec
    gc.collect()
    assert dropped() is None
    thread.join(60)
    assert not thread.is_alive()
    run = tracelab.open_run(tmp_path / "run")
    assert run.status["state"] == "completed"
    assert run.status["note"] == "closed when the Recorder was dropped"
    assert list(run.loss().index) == [0, 1, 2, 3, 4]


EXIT_UNCLOSED = textwrap.dedent("""
    import gc, sys, tracelab
    kept, dropped = (tracelab.Recorder(d) for d in sys.argv[1:3])
    for step in range(300):
        kept.step(loss=float(step))
        dropped.step(loss=float(step))
    del dropped
    gc.collect()  # its close asked for: the interpreter exits while its writer may be at it
""")


def test_recorders_left_at_interpreter_exit_keep_every_step(tmp_path):
    subprocess.run([sys.executable, "-c", EXIT_UNCLOSED, str(tmp_path / "kept"),
                    str(tmp_path / "dropped")], check=True, timeout=300)
    for name, note in (("kept", "closed at interpreter exit"),
                       ("dropped", "closed when the Recorder was dropped")):
        run = tracelab.open_run(tmp_path / name)
        assert run.status["state"] == "completed" and run.status["note"] == note
        assert run.loss().tolist() == [float(step) for step in range(300)]
        assert run.problems == []


def test_disk_error_warns_once_and_training_continues(tmp_path, monkeypatch):
    model, opt = _tiny()
    rec = tracelab.Recorder(tmp_path / "run", model, opt, flush_interval=0.05)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(rec.writer, "_flush", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(5):
            _fit(rec, model, opt, 4)
            time.sleep(0.06)
        rec.close()
    messages = [str(w.message) for w in caught if "tracelab" in str(w.message)]
    assert len(messages) == 1 and "No space left" in messages[0]
    assert rec.writer.failed


def test_run_reads_without_tracelab_through_pyarrow_dataset(tmp_path):
    model, opt = _tiny()
    with tracelab.Recorder(tmp_path / "run", model, opt) as rec:
        _fit(rec, model, opt, 10)
    scalars = ds.dataset(tmp_path / "run" / "scalars", format="parquet").to_table().to_pandas()
    assert len(scalars[scalars.name == "loss"]) == 10
    tensors = ds.dataset(tmp_path / "run" / "tensors", format="parquet").to_table()
    assert tensors.num_rows == len(tracelab.open_run(tmp_path / "run").tensors)


def _train_cnn(run_dir, steps=12):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8),
                                torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rec = tracelab.Recorder(run_dir, model, opt, activation_every=2, input_every=1) \
        if run_dir is not None else None
    for _ in range(steps):
        x, y = torch.rand(16, 3, 16, 16), torch.randint(0, 4, (16,))
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if rec is not None:
            rec.step(loss=loss, inputs=x)
    if rec is not None:
        rec.close()
    return torch.rand(3), [p.detach().clone() for p in model.parameters()]


def test_recording_never_changes_the_training_random_stream(tmp_path):
    plain_draw, plain_params = _train_cnn(None)
    draw, params = _train_cnn(tmp_path / "run")
    assert torch.equal(plain_draw, draw)
    assert all(torch.equal(a, b) for a, b in zip(plain_params, params))
    assert len(tracelab.open_run(tmp_path / "run").inputs) == 12 * 3


def test_forward_hooks_exist_only_for_steps_that_record_activations(tmp_path):
    model, opt = _tiny()

    def hooked() -> int:
        return sum(len(m._forward_hooks) for m in model.modules())
    rec = tracelab.Recorder(tmp_path / "run", model, opt, activation_every=3)
    seen = []
    for _ in range(7):
        seen.append(hooked())
        _fit(rec, model, opt, 1)
    rec.close()
    assert seen == [3, 0, 0, 3, 0, 0, 3]  # the three leaf modules, at steps 0, 3 and 6
    assert hooked() == 0
    acts = tracelab.open_run(tmp_path / "run").tensors.query("kind == 'activation'")
    assert sorted(set(acts.step)) == [0, 3, 6]


def test_cost_of_recording_is_kept_in_meta(tmp_path):
    _train_cnn(tmp_path / "run", steps=6)
    meta = tracelab.open_run(tmp_path / "run").meta
    cost = meta["recorder"]["cost"]
    assert cost["steps"] == 6 and meta["recorder"]["input_every"] == 1
    seconds = [cost.pop(k) for k in ("training_thread_s", "writer_cpu_s")]
    assert cost == {"steps": 6}
    assert all(isinstance(s, float) and s >= 0 for s in seconds), seconds


RACE = textwrap.dedent("""
    import os, sys, tracelab
    run_dir, barrier, tag = sys.argv[1], sys.argv[2], sys.argv[3]
    open(os.path.join(barrier, tag), "w").close()
    while len(os.listdir(barrier)) < 2:  # both past their imports, then released together
        pass
    try:
        rec = tracelab.Recorder(run_dir, config={"tag": tag})
    except tracelab.RunExistsError:
        print("refused")
        sys.exit()
    for step in range(50):
        rec.step(loss=float(tag))
    rec.close()
    print("recorded")
""")


def test_two_processes_starting_on_one_new_directory_get_one_run_between_them(tmp_path):
    script = tmp_path / "race.py"
    script.write_text(RACE)
    for trial in range(2):
        run_dir, barrier = tmp_path / f"run{trial}", tmp_path / f"barrier{trial}"
        barrier.mkdir()
        procs = [subprocess.Popen([sys.executable, str(script), str(run_dir), str(barrier), tag],
                                  stdout=subprocess.PIPE, text=True) for tag in ("1", "2")]
        said = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
        assert said == ["recorded", "refused"], said
        run = tracelab.open_run(run_dir)
        tag = run.meta["config"]["tag"]
        assert run.loss().tolist() == [float(tag)] * 50  # the winner's run, whole


def test_a_relative_run_dir_stays_where_it_was_when_the_script_changes_directory(
        tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    with tracelab.Recorder("run") as rec:
        for step in range(20):
            if step == 10:
                os.chdir(tmp_path / "b")
            rec.step(loss=float(step))
    run = tracelab.open_run(tmp_path / "a" / "run")
    assert run.status["state"] == "completed" and run.step_range == (0, 19)
    assert not (tmp_path / "b" / "run").exists()


def test_a_replaced_module_is_recorded_from_its_new_parameters(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    head = torch.nn.Linear(2, 2)
    want = {}
    first = opt
    with tracelab.Recorder(tmp_path / "run", model, opt) as rec:
        for step in range(8):
            if step == 3:  # a new layer and a new optimizer for it, given to the recorder
                model[2] = torch.nn.Linear(8, 2)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                rec.watch(optimizer=opt)
                assert not first._optimizer_step_pre_hooks  # the replaced one is let go
            if step == 5:  # a module added with add_param_group, nothing said to the recorder
                model.append(head)
                opt.add_param_group({"params": head.parameters()})
            opt.zero_grad()
            model(torch.randn(5, 4)).pow(2).mean().backward()
            want[step] = float(model[2].weight.grad.norm())
            opt.step()
            rec.step(loss=1.0)
        assert len(opt._optimizer_step_pre_hooks) == 1  # hooked once, however often watched
    tensors = tracelab.open_run(tmp_path / "run").tensors
    grads = tensors[(tensors.kind == "grad") & (tensors.name == "2.weight")]
    assert grads.norm.tolist() == pytest.approx([want[s] for s in range(8)], rel=1e-5)
    # From the step that added it, its update included (the optimizer's pre-step hook sees it).
    added = tensors[tensors.name.isin(["3.weight", "3.bias"])]
    assert added.step.min() == 5
    assert set(added[added.step == 5].kind) >= {"grad", "weight", "update"}


def test_a_metric_named_like_a_recorded_scalar_is_kept_under_its_own_name(tmp_path):
    model, opt = _tiny()
    with pytest.warns(RuntimeWarning, match="recorded as 'metric/loss'"):
        with tracelab.Recorder(tmp_path / "run", model, opt) as rec:
            for step in range(3):
                opt.zero_grad()
                loss = model(torch.randn(8, 4)).pow(2).mean()
                loss.backward()
                opt.step()
                rec.step(loss=loss, metrics={"loss": 5.0, "lr/0": 7.0, "acc": 0.5,
                                             "step_time": 9.0})
    run = tracelab.open_run(tmp_path / "run")
    assert 5.0 not in run.loss().tolist()
    # Renamed from the first step on, where the recorder has no step time of its own yet.
    assert run.scalar("metric/step_time").tolist() == [9.0] * 3
    assert 9.0 not in run.scalar("step_time").tolist()
    assert run.scalar("lr/0").tolist() == [0.05] * 3
    assert run.scalar("metric/loss").tolist() == [5.0] * 3
    assert run.scalar("metric/lr/0").tolist() == [7.0] * 3
    assert run.scalar("acc").tolist() == [0.5] * 3


def test_steps_after_close_are_not_counted(tmp_path):
    rec = tracelab.Recorder(tmp_path / "run")
    for _ in range(4):
        rec.step(loss=1.0)
    rec.close()
    rec.step(loss=1.0)
    assert rec.cost["steps"] == 4
