"""SIGKILL at random steps while the machine is busy: every run opens, reads as killed, has
contiguous steps, keeps every step the writer had on disk before the kill, and lost at most
MAX_UNSAVED steps, however the writer was scheduled (writer.py)."""
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
from tracelab.core.writer import MAX_UNSAVED

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

KILLS = 10
LOST_STEPS = MAX_UNSAVED  # the README's promise, in the writer's own numbers
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


def _counts(file: Path) -> tuple[int, int]:
    """Steps completed, and steps known to be on disk (see _fast_loop.py)."""
    with open(file, "rb") as f:
        return struct.unpack("<qq", f.read(16))


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


def _wait_for(file: Path, pid: int, slot: int, at_least: int, what: str) -> None:
    """Until the child's count in `slot` reaches `at_least`; the deadline only keeps a broken
    child from hanging the test."""
    deadline = time.monotonic() + 120
    while _counts(file)[slot] < at_least:
        assert _alive(pid) and time.monotonic() < deadline, what
        time.sleep(0.002)


def _kill_once(loops, tmp_path: Path, i: int, rng: random.Random) -> dict:
    run, progress = tmp_path / f"run{i}", tmp_path / f"progress{i}"
    progress.write_bytes(b"\0" * 16)
    durable_at = rng.randint(1, 300)  # the writer is asked to have these steps on disk
    kill_at = durable_at + rng.randint(0, 600)  # then the loop goes on, to a random step
    loops.stdin.write(f"{run} {progress} {durable_at}\n")
    loops.stdin.flush()
    pid = int(loops.stdout.readline())
    try:
        _wait_for(progress, pid, 1, durable_at, "the training loop's flush did not return")
        _wait_for(progress, pid, 0, kill_at, "the training loop stopped")
    finally:
        os.kill(pid, signal.SIGKILL)
    while _alive(pid):
        time.sleep(0.01)
    done, durable = _counts(progress)  # steps completed when the kill landed
    opened = tracelab.open_run(run)
    loss = opened.loss()
    last = int(loss.index.max()) if len(loss) else -1
    return {"state": opened.status["state"], "done": done, "durable": durable,
            "problems": opened.problems, "last": last,
            "contiguous": list(loss.index) == list(range(last + 1)),
            "lost_steps": done - 1 - last}


def test_random_kills_under_load_lose_at_most_max_unsaved_steps(tmp_path, loops, busy_machine):
    rng = random.Random(1234)
    results = [_kill_once(loops, tmp_path, i, rng) for i in range(KILLS)]
    print("\n".join(f"kill {i}: {r['done']} steps done, {r['durable']} flushed, lost "
                    f"{r['lost_steps']} steps" for i, r in enumerate(results)))
    for r in results:
        assert r["state"] == "killed" and r["contiguous"] and r["problems"] == [], results
        assert r["last"] >= r["durable"] - 1, results  # nothing on disk was lost
        assert r["lost_steps"] <= LOST_STEPS, results
