"""The recorder's compiled CPU kernels on the parameters and inputs of the compiled-MLP benchmark.

Times each call of recorders/numba_kernels.py on the MLP of recorder_overhead.py (256-1024-1024-10:
1.32M float32 parameters in 6 tensors) and on its input batch (128 x 256, and 384 x 256, the
batch of a 10 ms step on a fast machine), best of `--repeat`, with the data hot in the cache:
the cost of the arithmetic alone, and the CPU time of one rewrite of the samples snapshot (256
features x 2,000 values), its names dictionary-encoded and, for comparison, a string per value.
The statistics pass is timed on torch's OpenMP team (omp_team) and on the calling thread alone.
Inside a training step the same calls also wait for memory: --in-step times the statistics
calls right after each optimizer step of the compiled MLP instead (medians over --steps steps,
grads alone and weights with grads and updates, each on the team and on one thread, in turn).

    python benchmarks/recorder_kernels.py [--repeat 40] [--in-step [--steps 400] [--threads N]]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from tracelab.core.writer import write_samples_file
from tracelab.recorders import kernel_loader
from tracelab.recorders.profile import Reservoir, array_profile

SIZES = (256 * 1024, 1024, 1024 * 1024, 1024, 1024 * 10, 10)


def best(fn, repeat: int, clock=time.perf_counter) -> float:
    """The least time of `repeat` calls by `clock` (wall time, or time.thread_time: CPU), in ms."""
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times) * 1e3


def in_step(steps: int, threads: int) -> None:
    """The statistics calls right after each optimizer step of the compiled MLP."""
    import torch
    from recorder_overhead import mlp

    if threads:
        torch.set_num_threads(threads)
    kernels = kernel_loader.kernels()
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    net = torch.compile(model)
    batches = [(torch.randn(128, 256), torch.randint(0, 10, (128,))) for _ in range(10)]
    params = list(model.parameters())
    weights = np.array([(p.data_ptr(), p.numel()) for p in params], dtype=np.int64)
    before = np.empty(sum(p.numel() for p in params), np.float32)
    raw = np.empty((3 * len(params), 8))
    times: dict[str, list[float]] = {}
    for i in range(steps + 40):
        x, y = batches[i % len(batches)]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        full, alone = i % 2 == 1, i % 4 >= 2
        if full:
            kernels.gather(weights, before)
        opt.step()
        grads = np.array([(p.grad.data_ptr(), p.numel()) for p in params], dtype=np.int64)
        start = time.perf_counter()
        ran = kernels.tensor_stats(weights if full else weights[:0], grads,
                                   before if full else before[:0], raw, threads=1 if alone else None)
        if i >= 40:  # past compiling and the caches' warm-up
            name = f"{'weights, grads and updates' if full else 'grads'}, {ran} thread(s)"
            times.setdefault(name, []).append(time.perf_counter() - start)
    print(f"{len(params)} tensors, {len(before):,} parameters; {torch.get_num_threads()} torch "
          f"threads; medians over {steps // 4} steps each, right after the optimizer step")
    for name, values in times.items():
        print(f"  {name:<44} {statistics.median(values) * 1e3:7.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--in-step", action="store_true",
                        help="time the statistics calls inside a compiled MLP's training steps")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args()
    if args.in_step:
        in_step(args.steps, args.threads)
        return
    kernels = kernel_loader.kernels()
    rng = np.random.default_rng(0)
    tensors = [rng.standard_normal(n).astype(np.float32) for n in SIZES]
    table = np.array([(t.ctypes.data, t.size) for t in tensors], dtype=np.int64)
    before = np.concatenate(tensors) + np.float32(1e-3)
    raw = np.empty((3 * len(tensors), 8))
    snapshot = np.empty(len(before), np.float32)
    batch = rng.standard_normal((128, 256)).astype(np.float32)
    tall = rng.standard_normal((384, 256)).astype(np.float32)  # the batch of a 10 ms step
    _, sample = array_profile(batch, rng)
    reservoir = Reservoir(2000)
    features = [f"input[{i}]" for i in range(256)]
    for step in range(40):  # past the reservoir's first 2,000 values per feature
        reservoir.add_many("train", features, step, sample)
    none = before[:0]
    cases = {}
    for threads, which in ((None, "torch's team"), (1, "one thread")):
        cases.update({
            f"grads (one pass), {which}":
                lambda t=threads: kernels.tensor_stats(table[:0], table, none, raw, threads=t),
            f"weights and updates, {which}":
                lambda t=threads: kernels.tensor_stats(table, table[:0], before, raw, threads=t),
            f"the same, keeping the snapshot, {which}": lambda t=threads: kernels.tensor_stats(
                table, table[:0], before, raw, True, threads=t)})
    cases.update({
        "the probes of a kept snapshot (unchanged)": lambda: kernels.unchanged(table, before, 32),
        "snapshot of the weights (gather)": lambda: kernels.gather(table, snapshot),
        "input profile, 128 x 256": lambda: array_profile(batch, rng),
        "input profile, 384 x 256": lambda: array_profile(tall, rng),
        "input reservoir, 256 features x 64 values":
            lambda: reservoir.add_many("train", features, 99, sample),
    })
    print(f"{sum(SIZES):,} parameters; best of {args.repeat}, data hot in the cache")
    for name, fn in cases.items():
        fn()
        print(f"  {name:<44} {best(fn, args.repeat):7.3f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "samples.parquet"
        rewrite = lambda: write_samples_file(target, reservoir.columns())  # noqa: E731

        def as_strings():  # the form before the names were dictionary-encoded: a string a value
            columns = {k: v.dictionary_decode() if hasattr(v, "dictionary_decode") else v
                       for k, v in reservoir.columns().items()}
            write_samples_file(target, columns)
        for name, fn in (("samples snapshot rewritten (CPU time)", rewrite),
                         ("  the same, a name string per value", as_strings)):
            print(f"  {name:<44} {best(fn, max(3, args.repeat // 8), time.thread_time):7.3f} ms")


if __name__ == "__main__":
    main()
