"""Where the Recorder's work goes: its own cost per step, by what it records.

Trains the CNN of recorder_overhead.py (or, with `--model mlp`, its MLP, optionally compiled)
with one Recorder setting at a time and reads `Recorder.cost` (seconds in its hooks and
`step()` on the training thread, and the writer thread's CPU seconds) over 60 steps, after 31
warm-up steps (past the recorder's dense start, where the full statistics are recorded every
step). Each setting runs `--repeats` times, interleaved; the figures are medians, and the last
column is the sum as a share of the step time measured in the same run.

    python benchmarks/recorder_work.py [--repeats 3] [--steps 60] [--model cnn|mlp]
                                       [--compiled] [--threads N] [--batch N]
"""
from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
from pathlib import Path

import torch

import tracelab
from recorder_overhead import mlp, small_cnn

NEVER = 10 ** 9
SETTINGS = {
    "scalars only": dict(grad_norm_every=NEVER, every=NEVER, weight_every=NEVER,
                         activation_every=NEVER, input_every=NEVER),
    "grad norms every step": dict(every=NEVER, weight_every=NEVER, activation_every=NEVER,
                                  input_every=NEVER),
    "grads every step": dict(every=1, weight_every=NEVER, activation_every=NEVER,
                             input_every=NEVER),
    "weights, grads, updates every step": dict(every=1, weight_every=1, activation_every=NEVER,
                                               input_every=NEVER),
    "activations every step": dict(every=NEVER, weight_every=NEVER, activation_every=1,
                                   input_every=NEVER),
    "inputs every step": dict(every=NEVER, weight_every=NEVER, activation_every=NEVER,
                              input_every=1),
    "defaults": dict(),
    "everything every step": dict(every=1, weight_every=1, activation_every=1, input_every=1),
}


def measure(model, batches, workdir: Path, steps: int, compiled: bool = False,
            **settings) -> tuple[float, float, float]:
    """(training-thread ms, writer CPU ms, step ms) per step."""
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    net = torch.compile(model) if compiled else model
    rec = tracelab.Recorder(workdir, net, opt, **settings)

    def train(n: int) -> None:
        for i in range(n):
            x, y = batches[i % len(batches)]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x)
        rec.writer.flush(samples=False)

    train(31)  # warm-up past the dense start, ending one step before an activation step
    before, start = rec.cost, time.perf_counter()
    train(steps)
    wall, after = time.perf_counter() - start, rec.cost
    rec.close()
    return ((after["training_thread_s"] - before["training_thread_s"]) / steps * 1e3,
            (after["writer_cpu_s"] - before["writer_cpu_s"]) / steps * 1e3, wall / steps * 1e3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--model", choices=("cnn", "mlp"), default="cnn")
    parser.add_argument("--compiled", action="store_true", help="torch.compile the model")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--batch", type=int, default=0,
                        help="batch size (0: 64 for the CNN, 128 for the MLP)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = small_cnn() if args.model == "cnn" else mlp()
    shape = (args.batch or 64, 3, 32, 32) if args.model == "cnn" else (args.batch or 128, 256)
    batches = [(torch.randn(*shape), torch.randint(0, 10, (shape[0],))) for _ in range(10)]
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in SETTINGS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for i, (name, settings) in enumerate(SETTINGS.items()):
                figures[name].append(measure(model, batches, Path(tmp) / f"{r}-{i}", args.steps,
                                             args.compiled, **settings))
    print(f"per step, medians of {args.repeats} runs of {args.steps} steps")
    print(f"  {'recorded':<36} {'training thread':>16} {'writer CPU':>11} {'share of step':>14}")
    for name, runs in figures.items():
        train, writer, wall = (statistics.median(column) for column in zip(*runs))
        print(f"  {name:<36} {train:13.2f} ms {writer:8.2f} ms {(train + writer) / wall:13.1%}")


if __name__ == "__main__":
    main()
