"""Recorder overhead on a small CNN, measured as ratios within one process.

Variants train identical copies of the same CNN on the same batches, in alternating blocks
(baseline, recorder defaults, recorder with the grads' full statistics every step, recorder
everything-every-step, TensorBoard histograms), so that
machine noise hits every variant alike; the order is shuffled every round, and each variant's
block ends when its writer has written everything, so background work is charged to its own
variant. Each block's time is divided by the baseline block of the same round; the figure
reported is the median of those ratios. A shared machine only ever adds time, so it also
reports the ratio of each variant's fastest blocks (their 10th percentile) to the baseline's:
the overhead on a quiet machine.

Beside that wall-clock ratio, which a shared machine makes noisy, it reports the recorder's own
work per block (`Recorder.cost`: time in its hooks and `step()` on the training thread, plus
the writer thread's CPU time) as a share of the baseline block. That is what the step time
grows by when training keeps every core busy, and it varies far less between runs.

    python benchmarks/recorder_overhead.py [--rounds 10] [--block N] [--threads N]

A block lasts about a second of the baseline by default (20 CNN steps, 40 compiled MLP steps):
each block ends with the writer's flush, as each second of a real run does. Every variant
trains past the recorder's dense start (its first 20 steps record the full statistics every
step, recorders/cadence.py) before the timed rounds (--warm-up: 24 steps of the CNN, 48 of the
compiled MLP, in whole blocks of the warm-up batches); `--warm-up 0` times a run from its start.

It first times the first `Recorder()` of a fresh process (a child Python that imports torch
and tracelab, builds the CNN and its optimizer, then times the constructor): what a training
script waits for when it starts recording.

With --compiled the model is an MLP (256-1024-1024-10) under torch.compile, at the batch whose
step takes about 10 ms on this machine (--step-ms; --batch sets it instead), and the variants
are compiled without a recorder, with the recorder's defaults, with the grads' full statistics
every step, and with everything every step; each variant also reports the graphs dynamo compiled
while it trained (torch._dynamo.utils.counters, unique_graphs) and its graph breaks.

    python benchmarks/recorder_overhead.py --compiled [--mode reduce-overhead]
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import tracelab


def small_cnn() -> torch.nn.Module:
    """A CIFAR-sized CNN of the usual modern shape: conv-BN-ReLU blocks, global pooling."""
    def block(cin: int, cout: int) -> list[torch.nn.Module]:
        return [torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.BatchNorm2d(cout),
                torch.nn.ReLU()]
    return torch.nn.Sequential(
        *block(3, 32), torch.nn.MaxPool2d(2), *block(32, 64), torch.nn.MaxPool2d(2),
        *block(64, 128), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(128, 10))


def mlp() -> torch.nn.Module:
    """The MLP of the compiled variants: 1.3M parameters, little compute for them."""
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                               torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                               torch.nn.Linear(1024, 10))


def mlp_step_ms(batch: int, steps: int = 30) -> float:
    """The median milliseconds of an uncompiled training step of the MLP at `batch`, which the
    compiled step matches within a few per cent (BENCHMARKS.md)."""
    net = mlp()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(batch, 256), torch.randint(0, 10, (batch,))
    times = []
    for i in range(steps + 5):
        start = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        if i >= 5:
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def calibrated_batch(target_ms: float) -> tuple[int, float]:
    """The MLP's batch (a multiple of 32) whose step takes about `target_ms` on this machine,
    and that step's milliseconds: the targets are for a model of about 10 ms a step, which is
    batch 128 on some machines and 384 on others. Steps of 64 were too coarse there: at
    batch 128 the compiled step took from 8.3 to 10.6 ms on one machine in one day. Each
    batch is timed three times and the least taken: a busy moment only adds time, and one
    such timing once chose batch 96 for a 6.9 ms step."""
    def step_ms(batch: int) -> float:
        return min(mlp_step_ms(batch) for _ in range(3))

    batch, ms = 128, step_ms(128)
    for _ in range(2):  # the step is not quite proportional to the batch
        batch = max(32, min(8192, round(batch * target_ms / ms / 32) * 32))
        ms = step_ms(batch)
    return batch, ms


_FIRST_OPEN = """
import sys, tempfile, time
sys.path.insert(0, sys.argv[1])
import torch, tracelab
from recorder_overhead import small_cnn
model = small_cnn()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
with tempfile.TemporaryDirectory() as tmp:
    start = time.perf_counter()
    rec = tracelab.Recorder(tmp + "/run", model, opt)
    print(time.perf_counter() - start)
    rec.close()
"""


def first_open_seconds() -> float:
    """Seconds the first `Recorder()` of a fresh Python process takes to return."""
    out = subprocess.run([sys.executable, "-c", _FIRST_OPEN, str(Path(__file__).parent)],
                         check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1])


def _compile_counts() -> tuple[int, int]:
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


class Variant:
    def __init__(self, name: str, model: torch.nn.Module, workdir: Path,
                 compile_mode: str | None = None):
        self.name = name
        self.model = copy.deepcopy(model)
        self.net = self.model
        if compile_mode is not None:
            self.net = torch.compile(self.model, mode=compile_mode)
        self.graphs = self.breaks = 0  # compiled while this variant trained
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.rec = None
        self.tb = None
        self.step_index = 0
        name = name.removeprefix("compiled-")
        self.targets = name == "recorder-default-targets"
        if name in ("recorder-default", "recorder-default-targets"):
            self.rec = tracelab.Recorder(workdir / name, self.net, self.opt)
        elif name == "recorder-default-no-checks":
            # The defaults as they were before the per-step batch and loop checks.
            self.rec = tracelab.Recorder(workdir / name, self.net, self.opt)
            self.rec._sentinel.record = lambda *args: None
            self.rec._fingerprints.limit = 0
            self.rec._grad_resets.detach()
            self.rec._eval_modes.detach()
        elif name == "recorder-every-1":  # the grads' full statistics every step
            self.rec = tracelab.Recorder(workdir / name, self.net, self.opt, every=1)
        elif name == "recorder-everything":
            self.rec = tracelab.Recorder(workdir / name, self.net, self.opt, every=1,
                                         weight_every=1, activation_every=1, input_every=1)
        elif name == "tensorboard-histograms":
            from torch.utils.tensorboard import SummaryWriter
            self.tb = SummaryWriter(str(workdir / name))

    def work(self) -> float:
        """Seconds of recorder work so far: training thread plus writer-thread CPU."""
        if self.rec is None:
            return 0.0
        cost = self.rec.cost
        return cost["training_thread_s"] + cost["writer_cpu_s"]

    def train(self, batches) -> float:
        graphs, breaks = _compile_counts()
        start = time.perf_counter()
        for x, y in batches:
            self.opt.zero_grad()
            out = self.net(x)
            loss = torch.nn.functional.cross_entropy(out, y)
            loss.backward()
            self.opt.step()
            if self.rec is not None:
                self.rec.step(loss=loss, inputs=x, targets=y if self.targets else None,
                              outputs=out if self.targets else None)
            if self.tb is not None:
                self.tb.add_scalar("train/loss", loss.item(), self.step_index)
                for name, p in self.model.named_parameters():
                    self.tb.add_histogram(f"weight/{name}", p, self.step_index)
                    self.tb.add_histogram(f"grad/{name}", p.grad, self.step_index)
            self.step_index += 1
        # Charge each variant's background writing to its own block: when the block ends, its
        # writer has nothing left to do while the other variants are timed. The samples file
        # keeps its own schedule (every 10 s), as in a real run.
        if self.rec is not None:
            self.rec.writer.flush(samples=False)
        if self.tb is not None:
            self.tb.flush()
        elapsed = time.perf_counter() - start
        after = _compile_counts()
        self.graphs += after[0] - graphs
        self.breaks += after[1] - breaks
        return elapsed

    def close(self) -> None:
        if self.rec is not None:
            self.rec.close()
        if self.tb is not None:
            self.tb.close()


def _fastest(times: list[float]) -> float:
    """The 10th percentile: noise from other work on the machine only ever adds time."""
    return statistics.quantiles(times, n=10)[0] if len(times) > 1 else times[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--block", type=int, default=0,
                        help="steps per block (0: about one second of the baseline, the writer's "
                             "flush interval: 20 steps of the CNN, 40 of the compiled MLP)")
    parser.add_argument("--batch", type=int, default=0,
                        help="batch size (0: 64 for the CNN; for --compiled, the batch whose "
                             "step takes --step-ms here)")
    parser.add_argument("--step-ms", type=float, default=10.0,
                        help="--compiled without --batch: the step time the MLP's batch is "
                             "chosen for (the targets are for a ~10 ms step)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--compiled", action="store_true",
                        help="torch.compile'd MLP variants (see the module docstring)")
    parser.add_argument("--mode", default="default", help="torch.compile mode (--compiled)")
    parser.add_argument("--warm-up", type=int, default=None,
                        help="steps each variant trains at least before the timed rounds, in "
                             "whole blocks of the warm-up batches (default: 24, or 48 with "
                             "--compiled: past the recorder's dense start of 20 steps, "
                             "recorders/cadence.py)")
    parser.add_argument("--checks", action="store_true",
                        help="compare the defaults with and without the per-step batch and loop "
                             "checks (and with targets and outputs) instead of the usual variants")
    args = parser.parse_args()
    opens = sorted(first_open_seconds() for _ in range(3))
    print(f"first Recorder() of a fresh process: {opens[1]:.2f} s (median of 3: "
          + ", ".join(f"{s:.2f}" for s in opens) + ")")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    mode = args.mode if args.compiled else None
    if not (math.isfinite(args.step_ms) and args.step_ms > 0):
        parser.error(f"--step-ms must be a positive number of milliseconds, got {args.step_ms}")
    if args.warm_up is not None and args.warm_up < 0:
        parser.error(f"--warm-up must be 0 or more steps, got {args.warm_up}")
    batch = args.batch or 64
    if args.compiled and not args.batch:
        batch, ms = calibrated_batch(args.step_ms)
        print(f"batch {batch}: the MLP's uncompiled step takes {ms:.1f} ms here "
              f"(--step-ms {args.step_ms:g}; the least of three timings)")
        torch.manual_seed(0)  # the same weights and batches as with --batch
    if not args.block:
        # A real run's writer flushes once a second (RunWriter.flush_interval), and each block
        # ends with a flush that charges the variant its writing: a block of about a second
        # pays what a second of a real run pays. Shorter blocks pay the flush's fixed cost
        # (about 4 ms on the compiled MLP's tables) several times a second.
        args.block = 40 if args.compiled else 20
    if args.compiled:
        model, what = mlp(), f"compiled MLP (mode {mode}), batch {batch}"
        batches = [(torch.randn(batch, 256), torch.randint(0, 10, (batch,)))
                   for _ in range(args.block)]
        names = ["compiled-" + n for n in ("baseline", "recorder-default", "recorder-every-1",
                                           "recorder-everything")]
    else:
        model, what = small_cnn(), f"small CNN, batch {batch}"
        batches = [(torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,)))
                   for _ in range(args.block)]
        names = ["baseline", "recorder-default", "recorder-every-1", "recorder-everything"]
        if args.checks:
            names = ["baseline", "recorder-default-no-checks", "recorder-default",
                     "recorder-default-targets"]
        elif importlib.util.find_spec("tensorboard") is not None:
            names.append("tensorboard-histograms")
        else:
            print("tensorboard not installed: skipping the add_histogram reference")
    base = names[0]
    with tempfile.TemporaryDirectory() as tmp:
        variants = [Variant(n, model, Path(tmp), mode) for n in names]
        # Warm-up: allocator, hooks, first Parquet writes, compiling (a block of the default
        # cadence records activations at its first step and runs compiled code after it).
        warm = batches[:3] if mode is None else batches[:12]
        wanted = args.warm_up if args.warm_up is not None else 48 if args.compiled else 24
        blocks = -(-wanted // len(warm))  # whole blocks of the warm-up batches
        warm_steps = blocks * len(warm)
        for v in variants:
            for _ in range(blocks):
                v.train(warm)
        warm_graphs = {v.name: v.graphs for v in variants}
        ratios: dict[str, list[float]] = {n: [] for n in names[1:]}
        work: dict[str, list[float]] = {n: [] for n in names[1:]}
        blocks: dict[str, list[float]] = {n: [] for n in names}
        base_times = []
        order = random.Random(0)
        for _ in range(args.rounds):
            order.shuffle(variants)  # no variant always runs right after another
            times, spent = {}, {}
            for v in variants:
                before = v.work()
                times[v.name] = v.train(batches)
                spent[v.name] = v.work() - before
            base_times.append(times[base])
            for n in names:
                blocks[n].append(times[n])
            for n in names[1:]:
                ratios[n].append(times[n] / times[base])
                work[n].append(spent[n] / times[base])
        graphs = {v.name: (warm_graphs[v.name], v.graphs - warm_graphs[v.name], v.breaks)
                  for v in variants}
        for v in variants:
            v.close()
    step_ms = statistics.median(base_times) / args.block * 1e3
    print(f"{what}, {torch.get_num_threads()} threads: baseline "
          f"{step_ms:.1f} ms/step; {args.rounds} rounds x {args.block} steps after "
          f"{warm_steps} warm-up steps")
    if args.compiled and not args.batch and not 0.8 <= step_ms / args.step_ms <= 1.25:
        print(f"  note: the targets are for a step of about {args.step_ms:g} ms, and this one took "
              f"{step_ms:.1f}: the machine's speed changed since the batch was chosen; run "
              "again, or choose the batch with --batch")
    if mode is not None:
        print("  graphs compiled (warm-up / after warm-up), graph breaks:")
        for n, (warm, later, breaks) in graphs.items():
            print(f"    {n:<30} {warm} / {later}, {breaks} breaks")
    print("  variant                  step time vs baseline (median, quartiles)   fastest blocks"
          "   recorder work")
    results: dict = {"baseline_ms_per_step": step_ms}
    if mode is not None:
        results["graphs"] = graphs
    for n, rs in ratios.items():
        med = statistics.median(rs)
        q = statistics.quantiles(rs, n=4) if len(rs) > 1 else [med, med, med]
        spent = statistics.median(work[n])
        fast = _fastest(blocks[n]) / _fastest(blocks[base])
        results[n] = {"median_ratio": med, "q1": q[0], "q3": q[2], "fastest_ratio": fast,
                      "work": spent}
        print(f"  {n:<24} x{med:.3f}  ({(med - 1) * 100:+5.1f} %; {(q[0] - 1) * 100:+5.1f} % .. "
              f"{(q[2] - 1) * 100:+5.1f} %)   {(fast - 1) * 100:+6.1f} %       "
              + (f"{spent * 100:4.1f} %" if spent else "   -"))
    results["first_open_s"] = opens[1]
    print("fastest blocks: the 10th percentile of a variant's block times over the baseline's "
          "(a quiet machine)")
    print("recorder work: the recorder's own seconds (training thread plus writer-thread CPU) "
          "as a share of the baseline block time")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
