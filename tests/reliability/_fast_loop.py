"""A fast training loop for the kill tests: a tiny MLP on the CPU, recorded with the defaults.

`python _fast_loop.py` imports torch and tracelab once, then reads lines `RUN_DIR PROGRESS_FILE`
from stdin. For each it forks a child that trains until it is killed, and prints the child's
pid. After every step the child writes the number of steps completed into PROGRESS_FILE (8
bytes, mmap'ed), so that the test knows how far training got when the kill landed. Forking
spares each kill the seconds that importing torch takes on a loaded machine.
"""
import mmap
import os
import signal
import struct
import sys

import torch

import tracelab


def train(run_dir: str, progress_file: str) -> None:
    torch.manual_seed(0)
    with open(progress_file, "r+b") as f:
        progress = mmap.mmap(f.fileno(), 8)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    with tracelab.Recorder(run_dir, model, opt) as rec:
        progress[:8] = struct.pack("<q", -1)  # recording started
        for step in range(10**9):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            rec.step(loss=loss)
            progress[:8] = struct.pack("<q", step + 1)


if __name__ == "__main__":
    torch.set_num_threads(1)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # killed children are reaped by the kernel
    print("READY", flush=True)
    for line in sys.stdin:
        run_dir, progress_file = line.split()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                train(run_dir, progress_file)
            finally:
                os._exit(1)
        print(pid, flush=True)
