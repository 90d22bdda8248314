"""On CUDA, counting backward passes and the resets between them (backward/passes,
backward/resets) makes no host sync, and records what the loop did. Runs only where CUDA
exists."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device: the host-sync check uses torch.cuda.set_sync_debug_mode",
                allow_module_level=True)

from tracelab import open_run  # noqa: E402
from tracelab.recorders.torch_recorder import Recorder  # noqa: E402


@pytest.mark.parametrize("inside", [None, "none", "zeros"])
def test_passes_and_resets_without_a_host_sync(tmp_path, inside):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    x, y = torch.randn(4, 16, 8, device=dev), torch.randn(4, 16, device=dev)
    rec = Recorder(str(tmp_path / "run"), model=model, optimizer=opt, every=1000,
                   weight_every=1000, activation_every=1000, input_every=1000)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(6):
            for i in range(4):
                if inside is not None:
                    opt.zero_grad(set_to_none=inside == "none")
                loss = torch.nn.functional.mse_loss(model(x[i])[:, 0], y[i]) / 4
                loss.backward()
            opt.step()
            if inside is None:
                opt.zero_grad()
            rec.step(loss=loss)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    rec.close()
    run = open_run(tmp_path / "run")
    assert run.signal("backward/passes").tolist() == [4] * 6
    assert run.signal("backward/resets").tolist() == [0 if inside is None else 3] * 6


@pytest.mark.parametrize("d_zero_grad", [True, False])
def test_two_optimizers_judge_the_leftover_without_a_host_sync(tmp_path, d_zero_grad):
    """A GAN's loop: the watched parameter's optimizer (D's) opens a window at each step; what
    its grad held there is judged on the device (a Python zero is clamped, never copied)."""
    torch.manual_seed(0)
    dev = torch.device("cuda")
    g = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8)).to(dev)
    d = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(dev)
    g_opt, d_opt = torch.optim.Adam(g.parameters(), 1e-3), torch.optim.Adam(d.parameters(), 1e-3)
    model = torch.nn.ModuleDict({"G": g, "D": d})
    real, z = torch.randn(32, 8, device=dev), torch.randn(32, 4, device=dev)
    ones, zeros = torch.ones(32, 1, device=dev), torch.zeros(32, 1, device=dev)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    rec = Recorder(str(tmp_path / "run"), model=model, optimizer={"G": g_opt, "D": d_opt},
                   every=1000, weight_every=1000, activation_every=1000, input_every=1000)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(6):
            if d_zero_grad:
                d_opt.zero_grad()
            fake = g(z)
            d_loss = bce(d(real), ones) + bce(d(fake.detach()), zeros)
            d_loss.backward()
            d_opt.step()
            g_opt.zero_grad()
            g_loss = bce(d(fake), ones)
            g_loss.backward()
            g_opt.step()
            rec.step(loss=g_loss)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    rec.close()
    leftover = open_run(tmp_path / "run").signal("grad_leftover")
    assert (leftover.iloc[2:] > 0).all() == (not d_zero_grad)
