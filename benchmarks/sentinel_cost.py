"""The per-step batch sentinel's own cost: training-thread and writer-thread microseconds.

Checks the batch of recorder_overhead.py (64 x 3 x 32 x 32 float32 inputs, 64 int64 labels)
`--calls` times and prints the medians: what every step of a Recorder given inputs (and
targets) pays for the sentinel, whatever `input_every` says.

    python benchmarks/sentinel_cost.py [--calls 2000]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from tracelab.recorders.sentinel import Sentinel
from tracelab.recorders.transfer import StepRecord


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    x, y = torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))
    sentinel = Sentinel(lambda *a: None)

    def once(targets):
        record = StepRecord()
        start = time.perf_counter()
        sentinel.record(0, "train", x, targets, record)
        rows = record.seal()
        mid = time.perf_counter()
        rows()
        return mid - start, time.perf_counter() - mid

    for label, targets in (("inputs", None), ("inputs and targets", y)):
        runs = [once(targets) for _ in range(args.calls)]
        print(f"{label:20s} training thread {statistics.median(r[0] for r in runs) * 1e6:6.1f} us"
              f"   writer thread {statistics.median(r[1] for r in runs) * 1e6:6.1f} us")


if __name__ == "__main__":
    main()
