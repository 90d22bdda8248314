"""datetime-units: datetimes built from epoch seconds without their unit (read as nanoseconds)
or from zeros are named; datetimes converted with their unit stay quiet. Tiny real trainings
record the DataFrames they train on."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")

import tracelab  # noqa: E402
from tracelab.analyzers.datetime_units import datetime_units  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _events(n, seed):
    """Events of 2021 as integer epoch seconds (as a CSV or a database export holds them)."""
    rng = np.random.default_rng(seed)
    seconds = 1_609_459_200 + np.sort(rng.integers(0, 365 * 86_400, n))
    amount = rng.lognormal(3, 1, n)
    label = (rng.random(n) < 0.3).astype(np.int64)
    return pd.DataFrame({"created": seconds, "amount": amount}), label


def _train(run_dir, to_datetime, steps=30):
    """A logistic regression on log(amount) and the hour; the recorded inputs are the table."""
    frames = {}
    for split, seed, n in (("train", 0, 800), ("val", 1, 200)):
        raw, y = _events(n, seed)
        frame = raw.assign(created=to_datetime(raw["created"]))
        hour = frame["created"].dt.hour.to_numpy() / 23.0
        x = np.stack([np.log(frame["amount"].to_numpy()) / 5, hour], axis=1)
        frames[split] = (frame, torch.tensor(x, dtype=torch.float32), torch.tensor(y))
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    frame, xt, yt = frames["train"]
    gen = np.random.default_rng(0)
    with tracelab.Recorder(str(run_dir), model, opt, input_every=1, flush_interval=0.2) as rec:
        for step in range(steps):
            idx = gen.integers(0, len(xt), 64)
            loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=frame.iloc[idx].reset_index(drop=True), targets=yt[idx])
            if (step + 1) % 10 == 0:
                vframe, xv, yv = frames["val"]
                with torch.no_grad():
                    rec.log("val", metrics={"loss": torch.nn.functional.cross_entropy(
                        model(xv), yv)}, inputs=vframe, targets=yv)
    return tracelab.analyze(run_dir)


def test_epoch_seconds_read_as_nanoseconds_are_named(tmp_path):
    d = _train(tmp_path / "run", pd.to_datetime)  # no unit: nanoseconds
    found = [f for f in d.findings if f.rule == "datetime-units"]
    assert found and found[0].code == "TL305" and found[0].severity.value == "error"
    f = found[0]
    assert "created" in f.subject and "read as seconds since the epoch are 2021-01-01" in f.message
    assert f.evidence["unit"] == "s" and 'unit="s"' in f.fix
    assert d.diagnoses[0].finding.rule == "datetime-units", [x.message for x in d.findings]


def test_datetimes_converted_with_their_unit_stay_quiet(tmp_path):
    d = _train(tmp_path / "run", lambda s: pd.to_datetime(s, unit="s"))
    assert [f for f in d.findings if f.rule == "datetime-units"] == []


def test_zeros_turned_into_datetimes_are_a_warning(tmp_path):
    d = _train(tmp_path / "run", lambda s: pd.to_datetime(s * 0, unit="s"), steps=10)
    [f] = [f for f in d.findings if f.rule == "datetime-units"]
    assert f.severity.value == "warning" and "exactly 1970-01-01 00:00:00" in f.message


def test_empty_run():
    assert datetime_units(tracelab.Run.from_frames(None)) == []
