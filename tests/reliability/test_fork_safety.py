"""A process forked mid-run leaves the parent's run alone: a child that exits (os._exit,
sys.exit through the Recorder's with block, or leaving the block and the interpreter's normal
exit with its atexit handlers) writes nothing, and one that goes on training records nothing
into the parent's run. Killed later, the parent's run reads
'killed' at its own last step, with its own rows only."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

import tracelab  # noqa: E402

pytestmark = [pytest.mark.slow,  # a training subprocess per case
              pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")]

# The parent records 100 steps, forks, waits for the child, checks that no byte of its run
# changed meanwhile, records 100 steps more and is SIGKILLed: its run must read killed at 199.
SCRIPT = r"""
import os, sys, warnings
from pathlib import Path
import torch, tracelab

run_dir, mode = Path(sys.argv[1]), sys.argv[2]
torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def train(rec, steps):
    for _ in range(steps):
        opt.zero_grad()
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        opt.step()
        rec.step(loss=loss, inputs=torch.randn(8, 4))


def files():
    return {p: p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


with tracelab.Recorder(run_dir, model, opt, flush_interval=0.05) as rec:
    train(rec, 100)
    assert rec.writer.flush()
    before = files()
    if os.fork() == 0:
        if mode == "os_exit":
            os._exit(0)
        if mode == "exit":  # SystemExit through the with: the Recorder closes as failed
            sys.exit(0)
        if mode == "train":
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                train(rec, 300)
                assert not rec.writer.flush()
            forked = [w for w in caught if "records nothing into that run" in str(w.message)]
            print("CHILD WARNINGS", len(forked), len(caught), flush=True)
        # "leave", "train": the with block ends (close), then the interpreter's normal exit
    else:
        _, status = os.wait()
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert files() == before, "the child changed the parent's run"
        train(rec, 100)
        assert rec.writer.flush()
        print("KILL", flush=True)
        os.kill(os.getpid(), 9)
"""

@pytest.mark.parametrize("mode", ["os_exit", "exit", "leave", "train"])
def test_a_forked_child_leaves_the_parents_run_alone(tmp_path, mode):
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(run_dir), mode],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9 and "KILL" in proc.stdout, proc.stderr
    if mode == "train":  # warned once, and of nothing else
        assert "CHILD WARNINGS 1 1" in proc.stdout, proc.stdout + proc.stderr
    run = tracelab.open_run(run_dir)
    assert run.status["state"] == "killed" and run.status["last_step"] == 199, run.status
    assert list(run.loss().index) == list(range(200))
    grads = run.tensors[run.tensors.kind == "grad"]
    assert sorted(grads.step.unique()) == list(range(200))
    assert not grads.duplicated(["step", "name"]).any()
    assert run.problems == []
