"""Every public entry point of the Recorder, called with each odd value the robustness tests
use, warns and never raises into the training loop; the run still closes and reads back.
(The constructor is the exception: bad arguments raise there, before training begins.)"""
from __future__ import annotations

import decimal
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tracelab  # noqa: E402

# The odd values of test_recording_never_raises.py, with a per-sample loss and a sparse tensor.
ODD = {
    "complex-tensor": lambda: torch.tensor([1 + 2j]),
    "python-complex": lambda: complex(1.0, 1.0),
    "10**400": lambda: 10 ** 400,
    "meta": lambda: torch.empty(8, device="meta"),
    "string": lambda: "oops",
    "Decimal": lambda: decimal.Decimal("0.25"),
    "numpy-0d": lambda: np.array(0.25),
    "per-sample": lambda: torch.rand(8),
    "sparse": lambda: torch.rand(8).to_sparse(),
}
# Values that are no real number: every entry point that takes a number warns about these.
NOT_A_NUMBER = ("complex-tensor", "python-complex", "meta", "string")

ENTRY_POINTS = {
    "step(loss)": lambda rec, v: rec.step(loss=v),
    "step(inputs)": lambda rec, v: rec.step(loss=1.0, inputs=v),
    "step(targets)": lambda rec, v: rec.step(loss=1.0, targets=v),
    "step(metrics)": lambda rec, v: rec.step(loss=1.0, metrics={"m": v}),
    "step(metrics=odd)": lambda rec, v: rec.step(loss=1.0, metrics=v),
    "step(data_time)": lambda rec, v: rec.step(loss=1.0, data_time=v),
    "accumulate_loss": lambda rec, v: (rec.accumulate_loss(v), rec.step()),
    "accumulate_loss(scale)": lambda rec, v: (rec.accumulate_loss(torch.tensor(1.0), scale=v),
                                              rec.step()),
    "log(metrics)": lambda rec, v: rec.log("val", metrics={"m": v}),
    "log(metrics=odd)": lambda rec, v: rec.log("val", metrics=v),
    "log(inputs)": lambda rec, v: rec.log("val", inputs=v),
    "log(targets)": lambda rec, v: rec.log("val", targets=v),
    "log(split)": lambda rec, v: rec.log(v, metrics={"m": 1.0}),
    "watch(scaler)": lambda rec, v: (rec.watch(scaler=v), rec.step(loss=1.0)),
    "feature_names": lambda rec, v: (setattr(rec, "feature_names", v),
                                     rec.step(loss=1.0, inputs=torch.rand(8, 4))),
}
# Entry points that record the value as a number: each value that is none warns.
NUMBERS = ("step(loss)", "step(metrics)", "step(data_time)", "accumulate_loss", "log(metrics)")


def _recorder(run_dir):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    return tracelab.Recorder(run_dir, model, torch.optim.SGD(model.parameters(), lr=0.1))


def _read_properties(rec):
    assert rec.cost["steps"] == rec.step_index
    assert rec.records_inputs in (True, False)
    rec.feature_names  # noqa: B018 (a property: read, never raises)


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_an_entry_point_given_odd_values_warns_and_never_raises(tmp_path, entry):
    call = ENTRY_POINTS[entry]
    for name, make in ODD.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rec = _recorder(tmp_path / name)
            call(rec, make())
            _read_properties(rec)
            rec.step(loss=0.5)  # recording goes on
            rec.close()
        ours = [str(w.message) for w in caught if str(w.message).startswith("tracelab: ")]
        if entry in NUMBERS and name in NOT_A_NUMBER:
            assert ours, (entry, name)
        run = tracelab.open_run(tmp_path / name)
        assert run.status["state"] == "completed", (entry, name, run.status)
        assert run.loss().index[-1] == rec.step_index - 1


@pytest.mark.parametrize("name", list(ODD))
def test_close_and_exit_given_odd_values_warn_and_never_raise(tmp_path, name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = _recorder(tmp_path / "closed")
        rec.step(loss=1.0)
        rec.close(ODD[name]())
        exited = _recorder(tmp_path / "exited")
        exited.step(loss=1.0)
        odd = ODD[name]()
        assert exited.__exit__(type(odd), odd, None) is False
    assert any("close: the status must be a mapping" in str(w.message) for w in caught)
    assert tracelab.open_run(tmp_path / "closed").status["state"] == "completed"
    status = tracelab.open_run(tmp_path / "exited").status
    assert status["state"] == "failed" and status["exception_type"] == type(odd).__name__
