"""On CUDA the Recorder never makes the training thread wait for the device.

Promises checked here, with CUDA's own sync detector (`torch.cuda.set_sync_debug_mode`):
- the training thread makes no host sync on any step, recording or not (mode "error" raises
  at the first one);
- a step that records nothing makes no sync at all, and one that records waits at most once,
  on the writer thread, for the single packed device-to-host copy of that step. That wait is an
  event sync, which the sync detector does not see, so it is counted separately.

Runs only where CUDA exists.
"""
from __future__ import annotations

import threading
import warnings
from contextlib import contextmanager

import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device: the host-sync checks use torch.cuda.set_sync_debug_mode",
                allow_module_level=True)

from torch import nn  # noqa: E402

from tracelab import open_run  # noqa: E402
from tracelab.recorders.cadence import DENSE_STEPS  # noqa: E402
from tracelab.recorders.torch_recorder import Recorder  # noqa: E402

EVERY = 4  # weights/grads/updates, activations and inputs every 4 steps


@contextmanager
def syncs_per_thread():
    """Count the host syncs CUDA's detector reports, per thread, and the event waits."""
    counts = {"main": 0, "other": 0, "events": 0}
    main = threading.main_thread()
    event_sync = torch.cuda.Event.synchronize

    def show(message, category, filename, lineno, file=None, line=None):
        if "synchroniz" in str(message):
            counts["main" if threading.current_thread() is main else "other"] += 1

    def counted_event_sync(self):
        counts["events"] += 1
        return event_sync(self)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        torch.cuda.Event.synchronize = counted_event_sync
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield counts
        finally:
            torch.cuda.set_sync_debug_mode("default")
            torch.cuda.Event.synchronize = event_sync


def _setup(tmp_path):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(),
                          nn.Linear(64, 4)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    # 512 x 64 activations: more than the activation subsample, so its path is checked too.
    x = torch.randn(512, 16, device=dev)
    y = torch.randn(512, 4, device=dev)
    return model, opt, x, y


def _train_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def test_the_counter_sees_a_sync():
    # A control: without it, a counter that never counts would pass every test below.
    with syncs_per_thread() as counts:
        torch.ones(1, device="cuda").item()
    assert counts["main"] == 1


def test_training_thread_never_syncs_in_error_mode(tmp_path):
    model, opt, x, y = _setup(tmp_path)
    for _ in range(3):
        _train_step(model, opt, x, y)
    torch.cuda.set_sync_debug_mode("error")
    try:  # the user's own loop is sync-free: otherwise this test would prove nothing
        _train_step(model, opt, x, y)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    with Recorder(str(tmp_path / "run"), model=model, optimizer=opt, every=EVERY,
                  activation_every=EVERY, input_every=EVERY) as rec:
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(3 * EVERY):
                loss = _train_step(model, opt, x, y)
                rec.step(loss=loss, inputs=x, metrics={"mse": loss})
                rec.log("val", metrics={"loss": loss}, inputs=y)
            # The writer thread shares the process-wide mode: a sync there would fail it.
            assert rec.writer.flush() and not rec.writer.failed
        finally:
            torch.cuda.set_sync_debug_mode("default")
    run = open_run(tmp_path / "run")
    assert set(run.tensors["kind"]) == {"weight", "grad", "update", "activation"}
    assert len(run.loss()) == 3 * EVERY and len(run.inputs)


def test_syncs_per_step(tmp_path):
    model, opt, x, y = _setup(tmp_path)
    # The grads' norms at the same cadence: off it, a step hands over only what it is given.
    with Recorder(str(tmp_path / "run"), model=model, optimizer=opt, every=EVERY,
                  grad_norm_every=EVERY, weight_every=EVERY, activation_every=EVERY,
                  input_every=EVERY, flush_interval=3600) as rec:

        def measure(steps: int, **record):
            with syncs_per_thread() as counts:
                for _ in range(steps):
                    loss = _train_step(model, opt, x, y)
                    rec.step(loss=loss if record else None, inputs=x if record else None)
                assert rec.writer.flush()  # the writer's waits for these steps happen here
            return counts

        # Warm-up: every code path once, CUDA's lazy init, past the dense start.
        measure(DENSE_STEPS + EVERY, record=True)
        assert rec.step_index % EVERY == 0
        # A recording step: weights, grads, updates, activations, inputs and the loss.
        full = measure(1, record=True)
        assert (full["main"], full["other"]) == (0, 0) and full["events"] <= 1
        # Off-cadence steps that hand over only the loss: at most one small copy each.
        scalars = measure(EVERY - 1, record=True)
        assert (scalars["main"], scalars["other"]) == (0, 0) and scalars["events"] <= EVERY - 1
        measure(1)
        # Off-cadence steps that hand over no tensor: nothing at all.
        assert measure(EVERY - 1) == {"main": 0, "other": 0, "events": 0}
    assert not rec.writer.failed
