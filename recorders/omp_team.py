"""Torch's OpenMP team, lent to the statistics kernels between training ops.

On the CPU torch runs its ops on an OpenMP team: the calling thread and workers that spin for a
while after each op before they sleep. While the recorder reads the weights, grads and snapshot
after the optimizer step, those workers sit idle, and the pass is bound by the vector units of
one core. So the kernels hand GOMP_parallel of torch's own OpenMP runtime a worker, and the team
that runs torch's ops runs the pass's chunks too. A second runtime or a thread of our own
would fight torch's spinning workers for the cores instead: a helper thread made the pass
slower in the loop (BENCHMARKS.md, "a split pass that did not pay").

Where torch's ops do not run on an OpenMP runtime that can be found (another parallel backend,
a platform without /proc, two runtimes loaded and none of them torch's), `entry()` is 0 and the
kernels run on the calling thread alone, with the same results.
"""
from __future__ import annotations

import ctypes
import functools
import os
import re

import torch

# libgomp.so.1, a wheel's libgomp-a34b3233.so.1, libiomp5.so
_RUNTIME = re.compile(r"lib[gi]?omp[\w-]*\.so\b")


@functools.lru_cache(maxsize=1)
def entry() -> int:
    """The address of GOMP_parallel in the OpenMP runtime torch runs its ops on, or 0."""
    if "parallel backend: OpenMP" not in torch.__config__.parallel_info():
        return 0
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split(maxsplit=5)[-1].strip() for line in maps if "omp" in line}
    except OSError:
        return 0
    runtimes = sorted(p for p in paths
                      if p.startswith("/") and _RUNTIME.match(os.path.basename(p)))
    home = os.path.dirname(torch.__file__) + os.sep
    own = [p for p in runtimes if p.startswith(home)]
    candidates = own or runtimes
    if len(candidates) != 1:
        return 0
    try:
        return ctypes.cast(ctypes.CDLL(candidates[0]).GOMP_parallel, ctypes.c_void_p).value or 0
    except (OSError, AttributeError):
        return 0


def threads() -> int:
    """The threads a kernel may run on now: torch's intra-op threads where `entry()` is found,
    else 1 (the calling thread)."""
    return torch.get_num_threads() if entry() else 1
