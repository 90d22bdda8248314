"""SIGKILL at random moments while the machine is busy: every run opens, reads as killed, has
contiguous steps, and lost at most the last LOST_SECONDS or LOST_STEPS of training."""
from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tracelab
from tracelab.core.writer import DRAIN_INTERVAL, MAX_UNSAVED

pytest.importorskip("torch")

KILLS = 10
LOST_STEPS = MAX_UNSAVED         # the README's promise, in the writer's own numbers
LOST_SECONDS = 1.0 + DRAIN_INTERVAL
LOOP = Path(__file__).with_name("_fast_loop.py")


def _burn(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(20_000))


@pytest.fixture
def busy_machine():
    stop = mp.get_context("spawn").Event()
    burners = [mp.get_context("spawn").Process(target=_burn, args=(stop,), daemon=True)
               for _ in range(os.cpu_count() or 2)]
    for b in burners:
        b.start()
    yield
    stop.set()
    for b in burners:
        b.join(5)


def _progress(file: Path) -> int:
    with open(file, "rb") as f:
        return struct.unpack("<q", f.read(8))[0]


@pytest.fixture
def loops():
    """The process that forks the training loops (see _fast_loop.py)."""
    server = subprocess.Popen([sys.executable, str(LOOP)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "READY"
    yield server
    server.stdin.close()
    server.wait(30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _kill_once(loops, tmp_path: Path, i: int, rng: random.Random) -> dict:
    run, progress = tmp_path / f"run{i}", tmp_path / f"progress{i}"
    progress.write_bytes(b"\0" * 8)
    loops.stdin.write(f"{run} {progress}\n")
    loops.stdin.flush()
    pid = int(loops.stdout.readline())
    try:
        deadline = time.monotonic() + 60
        while _progress(progress) == 0 and _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _alive(pid) and _progress(progress) != 0, "the training loop did not start"
        time.sleep(rng.uniform(0.3, 2.0))
    finally:
        os.kill(pid, signal.SIGKILL)
        killed_at = time.time()
    while _alive(pid):
        time.sleep(0.01)
    done = _progress(progress)  # steps completed when the kill landed
    opened = tracelab.open_run(run)
    loss = opened.loss()
    last = int(loss.index.max()) if len(loss) else -1
    sc = opened.scalars
    wall = float(sc.loc[sc["step"] == last, "wall_time"].max()) if last >= 0 else float("-inf")
    return {"state": opened.status["state"], "done": done, "problems": opened.problems,
            "contiguous": list(loss.index) == list(range(last + 1)),
            "lost_steps": done - 1 - last, "lost_seconds": killed_at - wall}


def test_random_kills_under_load_lose_at_most_the_last_second(tmp_path, loops, busy_machine):
    rng = random.Random(1234)
    results = [_kill_once(loops, tmp_path, i, rng) for i in range(KILLS)]
    print("\n".join(f"kill {i}: {r['done']} steps done, lost {r['lost_steps']} steps, "
                    f"{r['lost_seconds']:.2f} s" for i, r in enumerate(results)))
    for r in results:
        assert r["state"] == "killed" and r["contiguous"] and r["problems"] == [], results
        assert r["lost_steps"] <= LOST_STEPS or r["lost_seconds"] <= LOST_SECONDS, results
