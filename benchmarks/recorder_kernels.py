"""The recorder's compiled CPU kernels on the parameters and inputs of the compiled-MLP benchmark.

Times each call of recorders/numba_kernels.py on the MLP of recorder_overhead.py (256-1024-1024-10:
1.32M float32 parameters in 6 tensors) and on its input batch (128 x 256), best of `--repeat`,
with the data hot in the cache: the cost of the arithmetic alone. Inside a training step the
same calls also wait for memory (`recorder_work.py` measures them there).

    python benchmarks/recorder_kernels.py [--repeat 40]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from tracelab.recorders import kernel_loader
from tracelab.recorders.profile import Reservoir, array_profile

SIZES = (256 * 1024, 1024, 1024 * 1024, 1024, 1024 * 10, 10)


def best(fn, repeat: int) -> float:
    """The fastest of `repeat` calls, in ms."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    kernels = kernel_loader.kernels()
    rng = np.random.default_rng(0)
    tensors = [rng.standard_normal(n).astype(np.float32) for n in SIZES]
    table = np.array([(t.ctypes.data, t.size) for t in tensors], dtype=np.int64)
    before = np.concatenate(tensors) + np.float32(1e-3)
    raw = np.empty((3 * len(tensors), 8))
    snapshot = np.empty(len(before), np.float32)
    batch = rng.standard_normal((128, 256)).astype(np.float32)
    _, sample = array_profile(batch, rng)
    reservoir = Reservoir(2000)
    features = [f"input[{i}]" for i in range(256)]
    for step in range(40):  # past the reservoir's first 2,000 values per feature
        reservoir.add_many("train", features, step, sample)
    none = before[:0]
    cases = {
        "grads (one pass)": lambda: kernels.tensor_stats(table[:0], table, none, raw),
        "weights and updates (one pass over both)":
            lambda: kernels.tensor_stats(table, table[:0], before, raw),
        "weights and updates, keeping the snapshot":
            lambda: kernels.tensor_stats(table, table[:0], before, raw, True),
        "the probes of a kept snapshot (unchanged)": lambda: kernels.unchanged(table, before, 32),
        "snapshot of the weights (gather)": lambda: kernels.gather(table, snapshot),
        "input profile, 128 x 256": lambda: array_profile(batch, rng),
        "input reservoir, 256 features x 64 values":
            lambda: reservoir.add_many("train", features, 99, sample),
    }
    print(f"{sum(SIZES):,} parameters; best of {args.repeat}, data hot in the cache")
    for name, fn in cases.items():
        fn()
        print(f"  {name:<44} {best(fn, args.repeat):7.3f} ms")


if __name__ == "__main__":
    main()
