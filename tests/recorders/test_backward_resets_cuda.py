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
