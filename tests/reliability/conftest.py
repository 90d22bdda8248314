from pathlib import Path

import pytest

from _inputs import write_run


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return write_run(tmp_path / "run")
