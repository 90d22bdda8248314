"""Launching a job of real processes on the gloo backend (CPU), for the distributed tests.

The workers are scripts next to this file: `launch` starts one per rank, `serve` is the rank's
side (process group up, the job run, the exit code said without torch's slow teardown)."""
from __future__ import annotations

import datetime
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Callable, NoReturn, Sequence


def launch(worker: Path, world: int, init_file: Path, args: Sequence[str],
           timeout: float) -> list[subprocess.CompletedProcess]:
    """Run `worker RANK WORLD INIT_FILE *args` for every rank; each one's exit code and output."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, str(worker), str(rank), str(world),
                               str(init_file), *args],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
             for rank in range(world)]
    out = []
    for rank, p in enumerate(procs):
        try:
            stdout, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"rank {rank} of {worker.name} {' '.join(args)} hung")
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout))
    return out


def serve(job: Callable[[int, int, list[str]], None], timeout_s: float = 20) -> NoReturn:
    """A worker's main: join the group named by argv, run job(rank, world, rest of argv), exit
    0, or 3 after printing what it raised."""
    import torch
    import torch.distributed as dist
    rank, world, init_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=timeout_s))
    try:
        job(rank, world, sys.argv[4:])
    except BaseException:
        traceback.print_exc()
        code = 3
    else:
        code = 0
    # Every run is closed by now; skip torch's slow interpreter teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
