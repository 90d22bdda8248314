import gc
import os
import threading
import time

import pytest

# Tests must not depend on the developer's own tracelab.toml or pyproject settings.
os.environ.setdefault("PYTHONHASHSEED", "0")


@pytest.fixture
def one_thread():
    """Tiny models train faster on one thread than with OpenMP workers fighting for 2 cores.
    A test that trains needs torch: without it (the analysis side's venv) it is skipped."""
    torch = pytest.importorskip("torch", reason="trains a model: needs torch (extra 'torch')")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def no_writer_left_running():
    """Fail a test that leaves a run writer's thread alive: a Recorder or RunWriter it neither
    closed nor dropped. A closing writer may still be finishing, and a dropped Recorder is
    closed when it is collected (a cycle needs the collector): both get a while."""
    before = set(_writer_threads())  # a leak already failed its own test
    yield
    left = [t for t in _writer_threads() if t not in before]
    deadline = time.monotonic() + 30
    while left and time.monotonic() < deadline:
        gc.collect()
        for thread in left:
            thread.join(0.5)
        left = [t for t in left if t.is_alive()]
    if left:
        pytest.fail(f"test left run writer thread(s) running: {', '.join(t.name for t in left)}; "
                    "close the Recorder or RunWriter", pytrace=False)


def _writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("tracelab-writer-")]
