"""A fast training loop for the kill tests: a tiny MLP on the CPU, recorded with the defaults.

`python _fast_loop.py` imports torch and tracelab once, then reads lines
`RUN_DIR PROGRESS_FILE DURABLE_AT` from stdin. For each it forks a child that trains until it is
killed, and prints the child's pid. PROGRESS_FILE holds two 8-byte counts, mmap'ed: after every
step the child writes the number of steps completed into the first, so that the test knows how
far training got when the kill landed; once DURABLE_AT steps are completed it waits for the
writer to have them on disk (`flush`) and writes that number into the second (-2 if the flush
failed), so that the test kills only after a point every step up to which must read back.
Forking spares each kill the seconds that importing torch takes on a loaded machine.
"""
import mmap
import os
import signal
import struct
import sys
import tempfile

import torch

import tracelab


def train(run_dir: str, progress_file: str, durable_at: int) -> None:
    torch.manual_seed(0)
    with open(progress_file, "r+b") as f:
        progress = mmap.mmap(f.fileno(), 16)
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
            if step + 1 == durable_at:
                progress[8:] = struct.pack("<q", durable_at if rec.writer.flush(None) else -2)


if __name__ == "__main__":
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as warm:  # what a Recorder loads, loaded before the forks
        tracelab.Recorder(os.path.join(warm, "run")).close()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # killed children are reaped by the kernel
    print("READY", flush=True)
    for line in sys.stdin:
        run_dir, progress_file, durable_at = line.split()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                train(run_dir, progress_file, int(durable_at))
            finally:
                os._exit(1)
        print(pid, flush=True)
