"""Recording compiled models: the same statistics as an eager run, no recompiles, no graph
breaks from the recorder (compiled.py). Tiny models: compiling takes seconds per graph here."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")

import tracelab  # noqa: E402
from tracelab import open_run  # noqa: E402
from tracelab.recorders import compiled  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

STEPS, EVERY = 7, 3  # activations at steps 0, 3 and 6
STATS = ["numel", "mean", "std", "min", "max", "abs_mean", "norm", "zero_frac", "nan_count",
         "inf_count", "dead_frac", "saturated_frac"]

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(not compiled.stance_available(),
                                 reason="compiled recording needs torch.compiler.set_stance "
                                        "(torch >= 2.6)")]


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                       torch.nn.Linear(16, 16), torch.nn.Tanh(),
                                       torch.nn.Linear(16, 4))

    def forward(self, x):
        return self.net(x)


def _batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(8, 8, generator=g), torch.randint(0, 4, (8,), generator=g))
            for _ in range(STEPS)]


def _train(run_dir, how: str, steps: int = STEPS):
    """Train a fresh MLP `how` (eager, module, inplace, reduce-overhead, optimizer), recording
    into run_dir; return the dynamo counters after warm-up (steps 0 and 1) and at the end."""
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn, step_fn, net = torch.nn.functional.cross_entropy, opt.step, model
    if how == "module":
        net = torch.compile(model)
    elif how == "inplace":
        model.compile(fullgraph=True)
    elif how == "reduce-overhead":
        net = torch.compile(model, mode="reduce-overhead")
    elif how == "optimizer":
        net = torch.compile(model)
        step_fn, loss_fn = torch.compile(opt.step), torch.compile(loss_fn)
    warm = None
    with tracelab.Recorder(str(run_dir), net, opt, activation_every=EVERY) as rec:
        for i, (x, y) in enumerate(_batches()[:steps]):
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            step_fn()
            rec.step(loss=loss)
            if i == 1:
                warm = _graphs()
    return warm, _graphs()


def _graphs() -> dict:
    """Graphs compiled, graph breaks, and frames dynamo compiled or tried to (torch 2.13 counts
    no `recompiles`: a recompile shows as one more graph and one more frame)."""
    return {"graphs": counters["stats"]["unique_graphs"],
            "breaks": sum(counters["graph_break"].values()),
            "frames": counters["frames"]["total"]}


def _tensors(run_dir) -> pd.DataFrame:
    return open_run(run_dir).tensors.set_index(["step", "kind", "name"]).sort_index()


@pytest.fixture(scope="module")
def eager_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("eager")
    _train(run_dir, "eager")
    return _tensors(run_dir)


@pytest.mark.parametrize("how, graphs", [("module", 1), ("inplace", 1),
                                         ("reduce-overhead", 1), ("optimizer", 3)])
def test_compiled_run_records_what_the_eager_run_records(tmp_path, eager_run, how, graphs):
    warm, end = _train(tmp_path, how)
    # One graph per compiled function, as without the recorder; none added by recording
    # steps 3 and 6 after warm-up, and no graph break.
    assert warm == end and (end["graphs"], end["breaks"]) == (graphs, 0)
    got = _tensors(tmp_path)
    assert got.index.equals(eager_run.index)  # same steps, kinds and (plain) names
    kinds = set(got.index.get_level_values("kind"))
    assert kinds == {"weight", "grad", "update", "activation"}
    acts = got.xs("activation", level="kind")
    assert sorted(set(acts.index.get_level_values("step"))) == [0, 3, 6]
    assert "net.1" in set(acts.index.get_level_values("name"))  # no _orig_mod level
    np.testing.assert_allclose(got[STATS].to_numpy(float), eager_run[STATS].to_numpy(float),
                               rtol=1e-4, atol=1e-6)
    meta = open_run(tmp_path).meta
    assert meta["recorder"]["compiled"] is True and "absent" not in meta


def test_recorder_hooks_add_no_graph_break(tmp_path):
    """torch._dynamo.explain of the compiled model and of the compiled optimizer step with a
    recorder attached, against the same without one."""
    torch.manual_seed(0)
    x, y = _batches()[0]

    def explained(record: bool):
        torch._dynamo.reset()
        model = MLP()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        rec = tracelab.Recorder(str(tmp_path / str(record)), model, opt,
                                activation_every=2) if record else None
        if rec is not None:
            rec.step()  # step 1 records no activations: the compiled code runs
        forward = torch._dynamo.explain(model)(x)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        step = torch._dynamo.explain(opt.step)()
        if rec is not None:
            rec.close()
        return forward, step

    plain, recorded = explained(False), explained(True)
    assert recorded[0].graph_break_count == 0 and recorded[0].graph_count == 1
    # torch's own optimizer step breaks its graph (_use_grad); the recorder's hook adds none.
    assert recorded[1].graph_break_count == plain[1].graph_break_count
    assert recorded[1].graph_count == plain[1].graph_count


def test_compiled_autograd_compiles_one_backward_more_and_never_recompiles(tmp_path):
    """Under compiled autograd the backward of a recording step, whose forward ran eagerly, is
    a graph of its own (one graph and one frame more): compiled once, at the first recording
    step, then reused (compiled.py). Nothing else is added, and nothing recompiles."""
    from torch._dynamo import compiled_autograd

    def train(run_dir):
        torch._dynamo.reset()
        counters.clear()
        torch.manual_seed(0)
        model = MLP()
        net = torch.compile(model, backend="aot_eager")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        rec = run_dir and tracelab.Recorder(str(run_dir), net, opt, activation_every=EVERY)
        seen = []
        for x, y in _batches():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(x), y)
            with compiled_autograd._enable(torch.compile(backend="aot_eager")):
                loss.backward()
            opt.step()
            if rec:
                rec.step(loss=loss)
            seen.append(_graphs())
        if rec:
            rec.close()
        return seen

    plain, recorded = train(None), train(tmp_path)
    assert plain[-1]["graphs"] >= 2  # the forward and the captured backward
    after_warm_up = {**plain[-1], "graphs": plain[-1]["graphs"] + 1,
                     "frames": plain[-1]["frames"] + 1}
    assert recorded[1:] == [after_warm_up] * (STEPS - 1)
    acts = open_run(tmp_path).tensors.query("kind == 'activation'")
    assert sorted(acts["step"].unique()) == [0, 3, 6]


@pytest.mark.parametrize("dynamic", [None, True])
def test_batches_of_several_sizes_compile_no_graph_beyond_the_unrecorded_run(tmp_path, dynamic):
    """Batch sizes that change between steps: dynamo compiles what it compiles without the
    recorder (a static graph, then a dynamic one; or the dynamic one at once), and the
    recording steps, uncompiled, add none. The sizes differ from the model's own (8, 16, 4):
    a batch the size of a weight's dimension is specialized under dynamic=True (duck
    sizing), and the recorder's uncompiled step 0 makes step 1's batch the one dynamo sees
    first (compiled.py)."""
    def graphs(record: bool) -> tuple[int, int]:
        torch._dynamo.reset()
        counters.clear()
        torch.manual_seed(0)
        model = MLP()
        net = torch.compile(model, fullgraph=True, dynamic=dynamic)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        rec = tracelab.Recorder(str(tmp_path / f"run-{record}"), net, opt,
                                activation_every=EVERY) if record else None
        for step in range(9):
            x = torch.randn(5 + 2 * (step % 3), 8)  # 5, 7, 9, 5, ...
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), x[:, 0].long().clamp(0, 3)).backward()
            opt.step()
            if rec is not None:
                rec.step(inputs=x)
        if rec is not None:
            rec.close()
        return _graphs()["graphs"], _graphs()["breaks"]

    assert graphs(True) == graphs(False)
    acts = open_run(tmp_path / "run-True").tensors
    acts = acts[acts["kind"] == "activation"]
    assert sorted(acts["step"].unique()) == [0, 3, 6]
    assert sorted(acts.loc[acts["step"] == 3, "numel"].unique()) == [5 * 4, 5 * 16]  # batch 5


def _compiled_after_the_recorder(run_dir, steps: int):
    """torch.compile applied to a model the Recorder was given eager; no break, no recompile."""
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tracelab.Recorder(str(run_dir), model, opt, activation_every=EVERY) as rec:
        net = torch.compile(model)
        for x, y in _batches()[:steps]:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
            rec.step()
    assert _graphs()["breaks"] == 0
    return open_run(run_dir)


def test_hooks_traced_by_compile_record_activations_as_absent(tmp_path, monkeypatch):
    """A torch without set_stance, and a model compiled after the Recorder was given it: the
    traced hooks return without a graph break, and the run says activations are absent."""
    monkeypatch.setattr(compiled, "stance_available", lambda: False)
    run = _compiled_after_the_recorder(tmp_path, steps=4)
    assert "activation" not in set(run.tensors["kind"])
    assert {"weight", "grad", "update"} <= set(run.tensors["kind"])
    assert "traced" in run.meta["absent"]["activations"]
    from tracelab.reports.context import recorded
    rows = dict(recorded(run)["rows"])
    assert "set_stance" in rows["activations (absent)"]


def test_model_compiled_after_the_recorder_was_given_it(tmp_path):
    """The recorder never saw the wrapper: the compiler's stance runs recording steps
    eagerly."""
    run = _compiled_after_the_recorder(tmp_path, steps=STEPS)
    acts = run.tensors.query("kind == 'activation'")
    assert sorted(acts["step"].unique()) == [0, 3, 6]
    assert "absent" not in run.meta


def test_the_stance_is_forced_only_on_recording_steps_and_restored(tmp_path):
    from torch._dynamo import eval_frame

    def stance() -> str:
        return eval_frame._stance.stance

    with torch.compiler.set_stance("eager_on_recompile"):
        model = torch.nn.Linear(2, 2)
        a = tracelab.Recorder(str(tmp_path / "a"), model, activation_every=2)
        b = tracelab.Recorder(str(tmp_path / "b"), torch.nn.Linear(2, 2), activation_every=3)
        assert stance() == "force_eager"  # step 0 records activations
        seen = []
        for _ in range(4):
            a.step()
            b.step()
            seen.append(stance())
        # After steps 0..3 the next steps (1..4) record: 1 none, 2 a, 3 b, 4 a.
        assert seen == ["eager_on_recompile", "force_eager", "force_eager", "force_eager"]
        a.close()
        assert stance() == "eager_on_recompile"  # b's step 4 records nothing
        b.close()
        assert stance() == "eager_on_recompile"
    assert stance() == "default"


def test_activations_compiled_code_kept_from_the_hooks_are_named_absent(tmp_path):
    """The loop calls a second torch.compile wrapper of the model, one the Recorder never saw:
    its graph holds the hooks traced at step 0 and skips them after. No recording step may
    lose its activations without meta.json and the report saying so."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tracelab.Recorder(str(tmp_path), torch.compile(model), opt,
                           activation_every=EVERY) as rec:
        net = torch.compile(model)  # compiled again: the loop's wrapper is another one
        for x, y in _batches():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
            rec.step()
    run = open_run(tmp_path)
    assert "activation" not in set(run.tensors["kind"])
    absent = run.meta["absent"]["activations"]
    assert "1 recording step(s) (0): torch.compile traced" in absent
    assert "2 recording step(s) (3, 6): the recorder's forward hooks did not run" in absent
    from tracelab.reports.context import recorded
    assert "(3, 6)" in dict(recorded(run)["rows"])["activations (absent)"]
    from tracelab.app.engine import analyze
    reasons = {s.rule: s.reason for s in analyze(run).skipped}
    assert "activations (absent: the report's What was recorded says why)" in \
        reasons["saturated-activations"]


def _three_steps(run_dir, model: torch.nn.Module, activation_every: int) -> dict:
    """Train `model` (4 input features) eagerly for 3 steps; the run's meta.json."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tracelab.Recorder(str(run_dir), model, opt, activation_every=activation_every) as rec:
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(3, 4)).sum().backward()
            opt.step()
            rec.step()
    return open_run(run_dir).meta


def test_a_model_in_eval_mode_throughout_is_not_called_absent(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()  # frozen norms
    assert "absent" not in _three_steps(tmp_path, model, activation_every=1)


class Direct(torch.nn.Module):
    """A model whose one leaf module (its ParameterList) is never called."""

    def __init__(self):
        super().__init__()
        self.ps = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(4, 2))])

    def forward(self, x):
        return x @ self.ps[0]


def test_a_model_that_calls_no_leaf_module_is_said_to_have_no_activations(tmp_path):
    absent = _three_steps(tmp_path, Direct(), activation_every=2)["absent"]["activations"]
    assert absent.startswith("not recorded at 2 recording step(s) (0, 2): ")
    assert "none of the model's leaf modules ran" in absent


class DropoutMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                       torch.nn.Dropout(0.5), torch.nn.Linear(16, 4))

    def forward(self, x):
        return self.net(x)


@pytest.mark.parametrize("how", ["module", "inplace", "wrapper"])
def test_evaluations_of_a_compiled_model_record_the_modes_they_ran_in(tmp_path, how):
    """The first evaluation is the model's first compiled call in eval mode (step 0 ran
    uncompiled to record activations): its modes are those of the pass, not of `log()`.
    "wrapper": torch.compile of a DataParallel, whose outermost module is hooked
    (compiled.compiles_a_wrapper)."""
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = DropoutMLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    net = torch.compile(model) if how == "module" else model
    if how == "wrapper":
        net = torch.compile(torch.nn.DataParallel(model))
    if how == "inplace":
        model.compile()
    forgot = {1, 2, 3}  # the evaluations after these steps run in training mode
    with tracelab.Recorder(str(tmp_path), net, opt) as rec:
        for step, (x, y) in enumerate(_batches()[:5]):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
            rec.step()
            model.train(step in forgot)
            with torch.no_grad():
                net(x)
            model.train()
            rec.log("val", {"loss": 1.0})
    assert _graphs()["breaks"] == 0
    run = open_run(tmp_path)
    assert run.signal("train_mode/dropout", "val").tolist() == [0, 1, 1, 1, 0]
    from tracelab.app.engine import analyze
    found = [f for f in analyze(run).findings if f.rule == "eval-in-train-mode"]
    assert len(found) == 1 and "3 of 5 evaluations" in found[0].message


def test_a_compiled_wrapper_of_a_wrapper_is_told_apart():
    model = MLP()
    parallel = torch.nn.DataParallel
    assert compiled.compiles_a_wrapper(torch.compile(parallel(model)))
    assert compiled.compiles_a_wrapper(parallel(torch.compile(parallel(model))))
    assert not compiled.compiles_a_wrapper(parallel(torch.compile(model)))
    assert not compiled.compiles_a_wrapper(torch.compile(model))
    assert not compiled.compiles_a_wrapper(parallel(model))
    assert not compiled.compiles_a_wrapper(model)


@pytest.mark.parametrize("how", ["module", "inplace", "sequential"])
def test_an_evaluation_just_before_a_recording_step_runs_compiled(tmp_path, how):
    """The model is held uncompiled from the end of the step before a recording step; an
    evaluation in between (no autograd) still runs the compiled code, and adds no graph to
    the unrecorded run's. "sequential": a torch.compile'd nn.Sequential, whose hooks dynamo
    guards on (the recorder adds none while the model is held)."""
    eager = []

    def train(run_dir):
        torch._dynamo.reset()
        counters.clear()
        eager.clear()
        torch.manual_seed(0)
        if how == "sequential":
            model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.2),
                                        torch.nn.ReLU(), torch.nn.Linear(16, 4))
        else:
            model = DropoutMLP()
            model.register_forward_pre_hook(
                lambda m, a: eager.append(not compiled.is_compiling()) if not m.training else None)
        net = model if how == "inplace" else torch.compile(model, backend="aot_eager")
        if how == "inplace":
            model.compile(backend="aot_eager")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        rec = run_dir and tracelab.Recorder(str(run_dir), net, opt, activation_every=EVERY)
        for step, (x, y) in enumerate(_batches()):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
            if rec:
                rec.step()
            # After every step: just before a recording step (steps 2 and 5) and not.
            model.eval()
            with torch.no_grad():
                net(x)
            model.train()
            if rec:
                rec.log("val", {"loss": 1.0})
        if rec:
            rec.close()
        # Graphs and breaks, not frames: the test's own pre-hook (a Python frame when the model
        # runs compiled) compiles in another order when step 0 runs uncompiled.
        graphs = _graphs()
        return graphs["graphs"], graphs["breaks"]

    assert train(tmp_path) == train(None)
    assert eager == ([] if how == "sequential" else [False] * STEPS)  # all ran traced code
    acts = open_run(tmp_path).tensors.query("kind == 'activation'")
    assert sorted(acts["step"].unique()) == [0, 3, 6]


@pytest.mark.parametrize("how", ["module", "inplace"])
def test_a_recorder_attached_after_warm_up_compiles_nothing_new(tmp_path, how):
    """Under set_stance("fail_on_recompile") a new frame to compile raises: the recorder's
    hooks on the model never are one (hook_refs)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = MLP()
    net = torch.compile(model, backend="aot_eager") if how == "module" else model
    if how == "inplace":
        model.compile(backend="aot_eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    x, y = _batches()[0]
    for _ in range(2):  # warm-up: the training and the evaluation graphs
        step()
        with torch.no_grad():
            net(x)
    with torch.compiler.set_stance("fail_on_recompile"):
        with tracelab.Recorder(str(tmp_path), net, opt, activation_every=2) as rec:
            for _ in range(4):
                step()
                rec.step()
                with torch.no_grad():
                    net(x)
    acts = open_run(tmp_path).tensors.query("kind == 'activation'")
    assert sorted(acts["step"].unique()) == [0, 2]


def test_two_recorders_of_one_compiled_model_leave_it_compiled(tmp_path):
    torch._dynamo.reset()
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    net = torch.compile(model)
    compiled_forward = net.__dict__["forward"]
    with pytest.warns(RuntimeWarning, match="another Recorder of this model") as caught:
        a = tracelab.Recorder(str(tmp_path / "a"), net, opt, activation_every=3)
        b = tracelab.Recorder(str(tmp_path / "b"), net, opt, activation_every=2)
        for x, y in _batches()[:5]:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
            a.step()
            b.step()
        a.close()
        b.close()
    assert len([w for w in caught if "another Recorder" in str(w.message)]) == 1
    assert net.__dict__["forward"] is compiled_forward
    for name, steps in (("a", [0, 3]), ("b", [0, 2, 4])):
        acts = open_run(tmp_path / name).tensors.query("kind == 'activation'")
        assert sorted(acts["step"].unique()) == steps


def test_a_stance_the_user_sets_on_a_recording_step_is_kept(tmp_path):
    """The model is compiled after the Recorder was given it: recording steps hold the stance
    at force_eager. One the user sets meanwhile replaces the hold for that step (whose
    activations are then named absent) and stays set after it."""
    from torch._dynamo import eval_frame
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tracelab.Recorder(str(tmp_path), model, opt, activation_every=2) as rec:
        net = torch.compile(model)
        for step, (x, y) in enumerate(_batches()[:5]):
            if step == 2:
                torch.compiler.set_stance("fail_on_recompile")
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
            rec.step()
            if step == 2:
                assert eval_frame._stance.stance == "fail_on_recompile"
    assert eval_frame._stance.stance == "fail_on_recompile"
    torch.compiler.set_stance("default")
    run = open_run(tmp_path)
    assert sorted(run.tensors.query("kind == 'activation'")["step"].unique()) == [0, 4]
    assert "1 recording step(s) (2): the recorder's forward hooks did not run" in \
        run.meta["absent"]["activations"]


def _stance_steps(run_dir):
    """A Recorder of a model compiled after it was given it (activations every 2nd step: the
    stance is held at force_eager from the end of step 2k-1 to the end of step 2k), and
    `step()`, one training step of it."""
    model = torch.nn.Linear(4, 1)
    rec = tracelab.Recorder(str(run_dir), model, activation_every=2)
    net = torch.compile(model)

    def step():
        net(torch.randn(3, 4)).sum().backward()
        rec.step()
    return rec, step


def _stance_now() -> str:
    from torch._dynamo import eval_frame
    return eval_frame._stance.stance


@pytest.mark.parametrize("close", ["after the block", "inside it"])
def test_a_stance_block_around_a_hold_end_leaves_no_eager_stance_behind(tmp_path, close):
    """The user's block begins while the stance is held (force_eager) and outlasts the hold:
    its end restores the stance it found, which must not be the recorder's force_eager."""
    rec, step = _stance_steps(tmp_path)  # step 0 records: held from the start
    with torch.compiler.set_stance("eager_on_recompile"):
        step()  # the hold ends under the user's stance
        assert _stance_now() == "eager_on_recompile"
        step()  # held again for step 2, then
        if close == "inside it":
            rec.close()
            assert _stance_now() == "eager_on_recompile"
    # The block's end restores what it found: the held stance object, which now says what
    # was before the hold (it also ends the hold begun inside the block, for step 2).
    assert _stance_now() == "default"
    rec.close()
    assert _stance_now() == "default"


def test_a_force_eager_stance_the_user_sets_during_a_hold_is_kept(tmp_path):
    rec, step = _stance_steps(tmp_path)
    torch.compiler.set_stance("force_eager")  # on purpose, during the hold for step 0
    try:
        for _ in range(3):
            step()
            assert _stance_now() == "force_eager"
        rec.close()
        assert _stance_now() == "force_eager"
    finally:
        torch.compiler.set_stance("default")


def test_a_recorder_given_what_is_not_a_module_says_so(tmp_path):
    twice = torch.compile(torch.compile(MLP()))  # a function, not a module
    with pytest.raises(TypeError, match="^tracelab: the model must be a torch.nn.Module, got a "
                                        "function .*torch.compile wrapper$"):
        tracelab.Recorder(str(tmp_path / "run"), twice)
    assert not (tmp_path / "run").exists()  # refused before anything is written: try again


def test_lightning_module_compiling_its_network(tmp_path):
    L = pytest.importorskip("lightning", reason="PyTorch Lightning is not installed "
                                                "(extra 'lightning')")
    from tracelab.recorders.lightning import TracelabCallback

    class Compiled(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.compile(MLP())

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    x, y = (torch.cat(t) for t in zip(*_batches()))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False,
                        callbacks=[TracelabCallback(str(tmp_path), activation_every=EVERY)])
    trainer.fit(Compiled(), loader)
    assert (_graphs()["graphs"], _graphs()["breaks"]) == (1, 0)
    acts = open_run(tmp_path).tensors.query("kind == 'activation'")
    assert sorted(acts["step"].unique()) == [0, 3, 6]
    assert "net.net.1" in set(acts["name"])
    types = open_run(tmp_path).module_types()  # the model summary names them alike
    assert types["net.net.1"] == "ReLU" and types["net"] == "MLP"


def test_hf_trainer_with_torch_compile(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed "
                                                              "(extra 'hf')")
    pytest.importorskip("accelerate", reason="the Trainer needs accelerate (extra 'hf')")
    from tracelab.recorders.hf import TracelabCallback
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")

    class Data(torch.utils.data.Dataset):
        def __init__(self):
            self.rows = [(x, y) for xb, yb in _batches() for x, y in zip(xb, yb)]

        def __len__(self):
            return len(self.rows)

        def __getitem__(self, i):
            return {"x": self.rows[i][0], "labels": self.rows[i][1]}

    class Model(MLP):
        def forward(self, x, labels=None):
            out = self.net(x)
            return {"loss": torch.nn.functional.cross_entropy(out, labels), "logits": out}

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "trainer"), per_device_train_batch_size=8, max_steps=STEPS,
        learning_rate=1e-2, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, logging_strategy="no", torch_compile=True)
    trainer = transformers.Trainer(model=Model(), args=args, train_dataset=Data(),
                                   callbacks=[TracelabCallback(str(tmp_path / "run"),
                                                               activation_every=EVERY)])
    trainer.train()
    graphs = _graphs()
    assert graphs["breaks"] == 0 and graphs["graphs"] == 1, (graphs, list(counters["graph_break"]))
    run = open_run(tmp_path / "run")
    acts = run.tensors.query("kind == 'activation'")
    assert sorted(acts["step"].unique()) == [0, 3, 6]
    assert "net.1" in set(acts["name"])
    assert len(run.loss()) == STEPS


def test_activations_off_keeps_a_compiled_run_bit_for_bit(tmp_path):
    """Recorder(activations=False): no step leaves the compiled graph, so the weights end
    bit for bit as those of the same compiled run without a Recorder, with the same graphs."""
    def train(record: bool):
        torch._dynamo.reset()
        counters.clear()
        torch.manual_seed(0)
        model = MLP()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        net = torch.compile(model)
        rec = tracelab.Recorder(str(tmp_path / "run"), net, opt, activations=False) \
            if record else None
        for x, y in _batches():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            if rec is not None:
                rec.step(loss=loss)
        if rec is not None:
            rec.close()
        return [p.detach().clone() for p in model.parameters()], _graphs()

    (plain, plain_graphs), (recorded, recorded_graphs) = train(False), train(True)
    assert all(torch.equal(a, b) for a, b in zip(plain, recorded))
    assert recorded_graphs == plain_graphs
    run = open_run(tmp_path / "run")
    assert "Recorder(activations=False)" in run.meta["absent"]["activations"]
    assert run.meta["recorder"]["activations"] is False
    assert "activation" not in set(run.tensors.kind)
    assert sorted(run.tensors[run.tensors.kind == "grad"].step.unique()) == list(range(STEPS))


@pytest.mark.parametrize("inside", [None, "none", "zeros"])
def test_compiled_autograd_counts_passes_and_resets_as_the_eager_backward_does(tmp_path, inside):
    """Gradient accumulation (4 passes per step) with the backward under compiled autograd:
    the recorder's gradient hook is traced into the captured backward, and records the same
    backward/passes, backward/resets and grad_leftover as the eager backward, with no graph
    break, and no graph compiled after the last variant's first recording step (step 3: a
    recording step whose first pass finds the grad held, as zero_grad(set_to_none=False)
    leaves it)."""
    from torch._dynamo import compiled_autograd

    def train(run_dir, captured: bool):
        torch._dynamo.reset()
        counters.clear()
        torch.manual_seed(0)
        model = MLP()
        net = torch.compile(model, backend="aot_eager")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        rec = tracelab.Recorder(str(run_dir), net, opt, activation_every=EVERY)
        seen = []
        for x, y in _batches():
            for i in range(4):
                if inside is not None:
                    opt.zero_grad(set_to_none=inside == "none")
                loss = torch.nn.functional.cross_entropy(net(x[2 * i:2 * i + 2]),
                                                         y[2 * i:2 * i + 2]) / 4
                if captured:
                    with compiled_autograd._enable(torch.compile(backend="aot_eager")):
                        loss.backward()
                else:
                    loss.backward()
            opt.step()
            if inside is None:
                opt.zero_grad()
            rec.step(loss=loss)
            seen.append(_graphs())
        rec.close()
        return seen, open_run(run_dir).signals.pivot_table(index="step", columns="name",
                                                           values="value")

    names = ["backward/passes", "backward/resets", "grad_leftover", "backward/weights_moved"]
    seen, got = train(tmp_path / "captured", True)
    want = train(tmp_path / "eager", False)[1]
    assert (got["backward/passes"] == 4).all() and len(got) == STEPS
    assert (got["backward/resets"] == (0 if inside is None else 3)).all()
    assert (got["backward/weights_moved"] == 0).all()
    pd.testing.assert_frame_equal(got[names], want[names], rtol=1e-6)
    assert seen[-1]["breaks"] == 0 and seen[3:] == [seen[-1]] * (STEPS - 3)


def test_compiled_autograd_sees_the_weights_move_between_sam_passes_as_eager_does(tmp_path):
    """Sharpness-aware minimization with the backward under compiled autograd: the weights,
    perturbed between the step's two passes, are recorded as moved (backward/weights_moved),
    as the eager backward records them, with no graph break and no graph after step 3."""
    from torch._dynamo import compiled_autograd

    def train(run_dir, captured: bool):
        torch._dynamo.reset()
        counters.clear()
        torch.manual_seed(0)
        model = MLP()
        net = torch.compile(model, backend="aot_eager")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        rec = tracelab.Recorder(str(run_dir), net, opt, activation_every=EVERY)
        seen = []
        for x, y in _batches():
            eps = []
            for i in range(2):
                loss = torch.nn.functional.cross_entropy(net(x), y)
                if captured:
                    with compiled_autograd._enable(torch.compile(backend="aot_eager")):
                        loss.backward()
                else:
                    loss.backward()
                with torch.no_grad():
                    for p in model.parameters():
                        if i == 0:
                            eps.append(0.05 * p.grad.sign())
                            p.add_(eps[-1])
                        else:
                            p.sub_(eps.pop(0))
                if i == 0:
                    opt.zero_grad()
            opt.step()
            opt.zero_grad()
            rec.step(loss=loss)
            seen.append(_graphs())
        rec.close()
        return seen, open_run(run_dir).signals.pivot_table(index="step", columns="name",
                                                           values="value")

    names = ["backward/passes", "backward/resets", "grad_leftover", "backward/weights_moved"]
    seen, got = train(tmp_path / "captured", True)
    want = train(tmp_path / "eager", False)[1]
    assert len(got) == STEPS and (got["backward/passes"] == 2).all()
    assert (got["backward/weights_moved"] == 1).all()
    pd.testing.assert_frame_equal(got[names], want[names], rtol=1e-6)
    assert seen[-1]["breaks"] == 0 and seen[3:] == [seen[-1]] * (STEPS - 3)
