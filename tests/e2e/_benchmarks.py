"""The calibration scenarios of benchmarks/, loaded as modules so the end-to-end tests train
the same runs the calibration does."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

_DIR = Path(__file__).parents[2] / "benchmarks"


def load(name: str) -> ModuleType:
    """benchmarks/NAME.py, imported once."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
