import os
import pytest

# Tests must not depend on the developer's own tracelab.toml or pyproject settings.
os.environ.setdefault("PYTHONHASHSEED", "0")


@pytest.fixture
def one_thread():
    """Tiny models train faster on one thread than with OpenMP workers fighting for 2 cores."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
