"""A writer that fails (a full disk) stops recording, never training, and the run still tells
its story: completed, recording stopped after step N, and why."""
from __future__ import annotations

import errno
import warnings

import pytest

torch = pytest.importorskip("torch")

import tracelab  # noqa: E402
from tracelab.app.cli import main  # noqa: E402
from tracelab.core import writer as writer_module  # noqa: E402


def test_disk_full_mid_run_then_freed(tmp_path, monkeypatch, capsys):
    flush = writer_module._Table.flush
    disk = {"full": False}

    def flaky(self):
        if disk["full"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        flush(self)
    monkeypatch.setattr(writer_module._Table, "flush", flaky)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    trained = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tracelab.Recorder(tmp_path / "run", model, opt, flush_interval=0.05) as rec:
            for step in range(400):
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                rec.step(loss=loss)
                trained += 1
                if step == 100:
                    assert rec.writer.flush()
                    disk["full"] = True
                if step == 300:
                    disk["full"] = False  # space freed before close()
    assert trained == 400
    assert sum("recording stopped" in str(w.message) for w in caught) == 1
    run = tracelab.open_run(tmp_path / "run")
    status = run.status
    assert status["state"] == "completed"
    stopped = status["recording_stopped"]
    assert 100 <= stopped["after_step"] <= 110 and "No space left" in stopped["reason"]
    assert run.last_step == stopped["after_step"]
    assert main(["analyze", str(tmp_path / "run"), "--no-html"]) == 0
    out = capsys.readouterr().out
    assert f"completed, steps 0-{stopped['after_step']}; recording stopped after step " in out
    assert "run-aborted" not in out
