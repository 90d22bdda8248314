"""Loads the numba kernels once, or switches the recorder to its torch fallback.

The recorder's CPU statistics come from recorders/numba_kernels.py, which also gives the kernels
of batch_kernels.py. Where numba is missing or fails (an unusual platform, a broken install),
recording goes on with torch reductions and a numpy-reduced subsample: the same trace at about
2.5 times the cost, never a crash.
"""
from __future__ import annotations

import types
import warnings

_kernels: types.ModuleType | None = None
_loaded = False


def kernels() -> types.ModuleType | None:
    """recorders.numba_kernels, compiled (or loaded from numba's cache) on the first call, or
    None: the callers then take the torch path."""
    global _kernels, _loaded
    if not _loaded:
        _loaded = True
        try:
            from tracelab.recorders import numba_kernels as module
            module.warm_up()
            _kernels = module
        except Exception as exc:  # recording must never stop training
            warnings.warn(f"tracelab: compiled CPU statistics unavailable ({type(exc).__name__}: "
                          f"{exc}); recording with torch reductions, which cost more on the CPU",
                          RuntimeWarning, stacklevel=2)
    return _kernels
