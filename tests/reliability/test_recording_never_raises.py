"""Recording never raises into the training loop, and one odd value never stops it: each odd
value warns once, is recorded as far as it can be, and the rest of the step is recorded."""
from __future__ import annotations

import decimal
import math
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

import tracelab
from tracelab.core.writer import RunWriter

STEPS = 30
INPUT_EVERY = 5


def _train(run_dir, *, loss=None, inputs=None, metrics=None, log=None):
    """Train a tiny model STEPS steps; loss/inputs/metrics/log(step, loss, x) give what each
    step hands the recorder. Returns the run and the tracelab warnings, in order."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    before = [p.detach().clone() for p in model.parameters()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tracelab.Recorder(run_dir, model, opt, input_every=INPUT_EVERY) as rec:
            for step in range(STEPS):
                x = torch.randn(16, 4)
                opt.zero_grad()
                value = model(x).pow(2).mean()
                value.backward()
                opt.step()
                rec.step(loss=loss(step, value, x) if loss else value,
                         inputs=inputs(step, value, x) if inputs else x,
                         metrics=metrics(step, value, x) if metrics else {"acc": step / STEPS})
                if log is not None:
                    log(rec, step, x)
            assert rec.step_index == STEPS  # training finished
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    messages = [str(w.message) for w in caught if str(w.message).startswith("tracelab: ")]
    assert all(w.category is RuntimeWarning for w in caught
               if str(w.message).startswith("tracelab: "))
    return tracelab.open_run(run_dir), messages


def _once(messages, *fragments):
    """The one warning holding every fragment; no other tracelab warning."""
    hits = [m for m in messages if all(f in m for f in fragments)]
    assert len(hits) == 1, messages
    assert len(messages) == 1, messages
    return hits[0]


def _complete(series):
    assert list(series.index) == list(range(STEPS))


def _rest_recorded(run, *, loss=True):
    """The loss (when it was fine), the metrics, lr and the parameter statistics of every step."""
    assert run.status["state"] == "completed" and "recording_stopped" not in run.status
    if loss:
        _complete(run.loss())
    _complete(run.scalar("acc"))
    _complete(run.scalar("lr/0"))
    assert sorted(run.tensors.step.unique()) == list(range(STEPS))


def _input_steps(run, feature):
    return sorted(run.inputs[run.inputs.feature == feature].step.unique())


INPUT_STEPS = list(range(0, STEPS, INPUT_EVERY))


# -- inputs the profile cannot handle: skipped per feature, the scalars go on ----------------------
def test_sparse_input_is_skipped_and_the_dense_one_profiled(tmp_path):
    run, messages = _train(tmp_path / "run", inputs=lambda s, v, x: {
        "dense": x, "sparse": x.to_sparse()})
    _once(messages, "'sparse'", "sparse_coo", "not profiled")
    _rest_recorded(run)
    assert _input_steps(run, "dense[0]") == INPUT_STEPS
    assert not any(run.inputs.feature.str.startswith("sparse"))


def _frame(x, **extra):
    return pd.DataFrame({"a": x[:, 0].numpy(), "b": x[:, 1].numpy(), **extra})


def test_year_3000_datetime_column_is_skipped_and_the_others_profiled(tmp_path):
    when = np.array(["3000-01-01T00:00:00"] * 16, dtype="datetime64[s]")
    run, messages = _train(tmp_path / "run", inputs=lambda s, v, x: _frame(x, t=when))
    _once(messages, "'t'", "datetime64[ns]", "not profiled")
    _rest_recorded(run)
    assert _input_steps(run, "a") == _input_steps(run, "b") == INPUT_STEPS
    assert "t" not in set(run.inputs.feature)


def test_in_range_datetime64_s_column_is_still_profiled(tmp_path):
    when = np.array(["2020-01-01T00:00:00"] * 16, dtype="datetime64[s]")
    run, messages = _train(tmp_path / "run", inputs=lambda s, v, x: _frame(x, t=when))
    assert messages == []
    rows = run.inputs[run.inputs.feature == "t"]
    assert sorted(rows.step) == INPUT_STEPS
    assert rows["min"].iloc[0] == pytest.approx(pd.Timestamp("2020-01-01").timestamp())


def test_dataframe_column_of_lists_is_skipped(tmp_path):
    run, messages = _train(tmp_path / "run", inputs=lambda s, v, x: _frame(
        x, tags=[[1, 2]] * 16))
    _once(messages, "'tags'", "unhashable", "not profiled")
    _rest_recorded(run)
    assert _input_steps(run, "a") == INPUT_STEPS and "tags" not in set(run.inputs.feature)


def test_duplicate_column_names_are_profiled_under_new_names(tmp_path):
    def inputs(step, value, x):
        frame = pd.DataFrame(x[:, :3].numpy(), columns=["x", "x", "y"])
        return frame
    run, messages = _train(tmp_path / "run", inputs=inputs)
    _once(messages, "'x'", "repeated", "x#2")
    _rest_recorded(run)
    for feature in ("x", "x#2", "y"):
        assert _input_steps(run, feature) == INPUT_STEPS
    first = run.inputs[run.inputs.step == 0].set_index("feature")
    assert first.loc["x#2", "mean"] != first.loc["x", "mean"]  # the second column's own values


def test_meta_device_input_is_skipped(tmp_path):
    run, messages = _train(tmp_path / "run", inputs=lambda s, v, x: {
        "x": x, "ghost": torch.empty(16, 4, device="meta")})
    _once(messages, "'ghost'", "meta", "not profiled")
    _rest_recorded(run)
    assert _input_steps(run, "x[0]") == INPUT_STEPS


def test_log_with_an_odd_frame_and_metrics_never_raises(tmp_path):
    def log(rec, step, x):
        if step % 10 == 9:
            rec.log("val", metrics={"loss": 0.5, "note": "n/a"}, inputs=_frame(x, tags=[[1]] * 16))
    run, messages = _train(tmp_path / "run", log=log)
    assert len(messages) == 2 and any("'note'" in m for m in messages) \
        and any("'tags'" in m for m in messages)
    _rest_recorded(run)
    assert list(run.loss("val").index) == [9, 19, 29]
    assert _input_steps(run, "a") == [9, 19, 29]  # only val profiles a frame


# -- odd losses and metrics: warned once, recorded as far as they can be ---------------------------
@pytest.mark.parametrize("make, fragments, expected", [
    (lambda s, v: v.detach().to(torch.complex64), ("'loss'", "complex tensor"), None),
    (lambda s, v: complex(float(v), 1.0), ("'loss'", "complex number"), None),
    (lambda s, v: 10 ** 400, ("'loss'", "does not fit a float", "inf"), math.inf),
    (lambda s, v: -10 ** 400, ("'loss'", "does not fit a float", "-inf"), -math.inf),
    (lambda s, v: torch.empty((), device="meta"), ("'loss'", "meta-device"), None),
    (lambda s, v: str(float(v)), ("'loss'", "a str", "not recorded"), None),
    (lambda s, v: decimal.Decimal(s) / 4, ("'loss'", "Decimal", "float value"), "step/4"),
    (lambda s, v: np.array(s / 4), ("'loss'", "0-d numpy array", "float value"), "step/4"),
], ids=["complex-tensor", "python-complex", "10**400", "-10**400", "meta", "string", "Decimal",
        "numpy-0d"])
def test_odd_loss_warns_once_and_the_rest_is_recorded(tmp_path, make, fragments, expected):
    run, messages = _train(tmp_path / "run", loss=lambda s, v, x: make(s, v))
    _once(messages, "scalar", *fragments)
    _rest_recorded(run, loss=False)
    assert _input_steps(run, "feature[0]") == INPUT_STEPS
    loss = run.loss()
    if expected is None:
        assert loss.empty
    elif expected == "step/4":
        assert list(loss.values) == [s / 4 for s in range(STEPS)]
    else:
        _complete(loss)
        assert (loss == expected).all()


def test_metrics_given_as_a_list_warn_once_and_the_loss_is_recorded(tmp_path):
    run, messages = _train(tmp_path / "run", metrics=lambda s, v, x: [0.5, 0.7])
    _once(messages, "metrics given as a list", "no names")
    assert run.status["state"] == "completed"
    _complete(run.loss())
    _complete(run.scalar("lr/0"))
    assert "acc" not in set(run.scalars.name)


def test_one_odd_metric_leaves_the_others(tmp_path):
    run, messages = _train(tmp_path / "run", metrics=lambda s, v, x: {
        "acc": s / STEPS, "phase": "warmup", "z": torch.tensor(1 + 2j)})
    assert len(messages) == 2, messages
    _rest_recorded(run)
    assert not {"phase", "z"} & set(run.scalars.name)


def test_accumulate_loss_with_odd_values_never_raises(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tracelab.Recorder(tmp_path / "run", model, opt) as rec:
            for step in range(STEPS):
                opt.zero_grad()
                loss = model(torch.randn(8, 4)).pow(2).mean()
                loss.backward()
                opt.step()
                rec.accumulate_loss(loss)
                rec.accumulate_loss("oops")
                rec.accumulate_loss(np.float64(0.0))
                rec.step()
    messages = [str(w.message) for w in caught if str(w.message).startswith("tracelab: ")]
    _once(messages, "accumulate_loss", "a str")
    _complete(tracelab.open_run(tmp_path / "run").loss())


# -- the writer: rows that do not convert are left out, never the whole run ------------------------
def test_rows_that_do_not_convert_leave_the_others_written(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = RunWriter(tmp_path / "run")
        for step in range(STEPS):
            value = "not a number" if step == 7 else float(step)
            writer.write(("scalars", {"step": [step], "split": ["train"], "name": ["loss"],
                                      "value": [value], "wall_time": [1.0e9]}))
        writer.close()
    messages = [str(w.message) for w in caught if str(w.message).startswith("tracelab: ")]
    _once(messages, "scalars rows", "left out")
    run = tracelab.open_run(tmp_path / "run")
    assert "recording_stopped" not in run.status
    assert list(run.loss().index) == [s for s in range(STEPS) if s != 7]


# -- warnings as errors: a warning that cannot be shown is dropped, never raised -------------------
def test_warnings_as_errors_never_raise_from_step_or_a_hook(tmp_path, monkeypatch):
    """Under warnings-as-errors (pytest -W error, warnings.simplefilter("error")) the recorder's
    own warnings (from step(), and from a hook inside backward) would raise into the loop: they
    are dropped, and recording goes on."""
    def failing(tensors):
        raise RuntimeError("a norm that fails")
    monkeypatch.setattr("tracelab.recorders.loop_checks.norms", failing)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with tracelab.Recorder(tmp_path / "run", model, opt, input_every=1) as rec:
            for step in range(STEPS):
                x = torch.randn(8, 4)
                opt.zero_grad()
                loss = model(x).pow(2).mean()
                loss.backward()  # the end-of-backward norm fails and warns, in a hook
                opt.step()
                rec.step(loss=loss, inputs={"x": x, "text": ["a"] * 8},
                         metrics={"acc": step / STEPS, "phase": "warmup"})
    run = tracelab.open_run(tmp_path / "run")
    assert run.status["state"] == "completed" and "recording_stopped" not in run.status
    _complete(run.loss())
    _complete(run.scalar("acc"))


def test_warnings_as_errors_never_raise_from_a_framework_callback(tmp_path):
    """A framework callback that stops recording on its first error warns; under warnings-as-
    errors the warning is dropped and the run is still closed."""
    from tracelab.recorders._callbacks import Guard, guarded

    class Callback(Guard):
        framework = "test"

        @guarded
        def on_step(self):
            raise KeyError("no such field")

    callback = Callback()
    model = torch.nn.Linear(4, 1)
    callback.recorder = tracelab.Recorder(tmp_path / "run", model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert callback.on_step() is None
    assert callback.disabled and callback.recorder is None
    status = tracelab.open_run(tmp_path / "run").status
    assert status["state"] == "completed" and "no such field" in status["note"]
