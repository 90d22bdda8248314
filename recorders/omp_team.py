"""Torch's OpenMP team, lent to the statistics kernels between training ops.

On the CPU torch runs its ops on an OpenMP team: the calling thread and workers that spin for a
while after each op before they sleep. While the recorder reads the weights, grads and snapshot
after the optimizer step, those workers sit idle, and the pass is bound by the vector units of
one core. So the kernels hand GOMP_parallel of torch's own OpenMP runtime a worker, and the team
that runs torch's ops runs the pass's jobs too. A second runtime or a thread of our own would
fight torch's spinning workers for the cores instead: a helper thread made the pass slower in
the loop (BENCHMARKS.md, "a split pass that did not pay").

The runtime is the one libtorch_cpu itself is linked to: GOMP_parallel looked up through
libtorch_cpu's handle, which searches that library and what it loaded. Where that fails (another
parallel backend, a platform without /proc, a library not found), and in a process forked from
one that used the team (whose OpenMP threads are gone), `entry()` is 0 and the kernels run on
the calling thread alone, with the same results.
"""
from __future__ import annotations

import ctypes
import functools
import os

import torch

_forked = False


def _after_fork() -> None:
    global _forked
    _forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


@functools.lru_cache(maxsize=1)
def _entry() -> int:
    if "parallel backend: OpenMP" not in torch.__config__.parallel_info():
        return 0
    try:
        with open("/proc/self/maps", "rb") as maps:
            paths = {line.split(maxsplit=5)[-1].strip().decode(errors="surrogateescape")
                     for line in maps if b"libtorch_cpu" in line}
        found = [p for p in paths if os.path.basename(p).startswith("libtorch_cpu.")]
        if len(found) != 1:
            return 0
        return ctypes.cast(ctypes.CDLL(found[0]).GOMP_parallel, ctypes.c_void_p).value or 0
    except (OSError, ValueError, AttributeError):  # whatever is in doubt: the calling thread
        return 0


def entry() -> int:
    """The address of GOMP_parallel in the OpenMP runtime torch runs its ops on, or 0."""
    return 0 if _forked else _entry()


def threads() -> int:
    """The threads a kernel may run on now: torch's intra-op threads where `entry()` is found,
    else 1 (the calling thread)."""
    return torch.get_num_threads() if entry() else 1
