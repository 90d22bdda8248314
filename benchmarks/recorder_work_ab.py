"""The recorder's work per step before and after a change to its statistics, in one process.

Two identical runs of recorder_overhead.py's CNN (or, with `--model mlp`, its compiled MLP)
train in turn, step by step, on the same batches: one with the checkout's statistics, one with
those of `--base` (a git revision: its `raw_stats`, `activation_stats` and `tensor_profile`,
read from recorders/stats.py, activations.py and profile.py at that revision; the rest of the
recorder is the checkout's). Work is thread CPU time, which a shared machine's load moves far
less than wall time: the recorder's `step()`, the activation hooks' statistics and the
pre-step snapshot on the training thread, plus the writer thread's CPU, per step, as a share
of the training step's own CPU time. One torch thread (two would count OpenMP's spinning).

    python benchmarks/recorder_work_ab.py --base b0fe761 [--model cnn|mlp] [--steps 40]
                                          [--only defaults "everything every step" ...]
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import tracelab
from recorder_overhead import mlp, small_cnn
from recorder_work import SETTINGS
from tracelab.recorders import activation_hooks, inputs, parameters
from tracelab.recorders.parameters import ParameterStats

ROOT = Path(__file__).resolve().parent.parent
WARM_UP = 31  # past the dense start, ending one step before an activation step


def _module_at(revision: str, path: str, folder: Path):
    """The module `path` (a file of the repository) as it was at `revision`."""
    source = subprocess.run(["git", "show", f"{revision}:{path}"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    target = folder / path.replace("/", "_")
    target.write_text(source)
    spec = importlib.util.spec_from_file_location(f"base_{target.stem}", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the git revision to compare with")
    parser.add_argument("--model", choices=("cnn", "mlp"), default="cnn")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--only", nargs="*", default=None, help="settings of recorder_work.py")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cpu = [0.0]  # thread CPU seconds of the wrapped functions in the step in progress

    def timed(fn):
        def wrapper(*a, **k):
            start = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                cpu[0] += time.thread_time() - start
        return wrapper

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base = (_module_at(args.base, "recorders/stats.py", folder).raw_stats,
                timed(_module_at(args.base, "recorders/activations.py", folder).activation_stats),
                _module_at(args.base, "recorders/profile.py", folder).tensor_profile)
    now = (parameters.raw_stats, timed(activation_hooks.activation_stats), inputs.tensor_profile)
    ParameterStats.snapshot = timed(ParameterStats.snapshot)

    def use(funcs) -> None:
        parameters.raw_stats, activation_hooks.activation_stats, inputs.tensor_profile = funcs

    torch.manual_seed(0)
    model, shape = (small_cnn(), (64, 3, 32, 32)) if args.model == "cnn" else (mlp(), (160, 256))
    batches = [(torch.randn(*shape), torch.randint(0, 10, (shape[0],))) for _ in range(10)]
    print(f"{args.model}, 1 thread, {args.steps} steps after {WARM_UP}: recorder work per step "
          f"(training thread + writer CPU), {args.base} / the checkout")
    with tempfile.TemporaryDirectory() as tmp:
        for which, settings in SETTINGS.items():
            if args.only and which not in args.only:
                continue
            runs = {}
            for name in ("base", "now"):
                net = copy.deepcopy(model)
                opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
                net = torch.compile(net) if args.model == "mlp" else net
                rec = tracelab.Recorder(Path(tmp) / f"{which}-{name}", net, opt, **settings)
                runs[name] = {"net": net, "opt": opt, "rec": rec, "work": [], "step": []}
            for i in range(WARM_UP + args.steps):
                x, y = batches[i % len(batches)]
                order = (("base", base), ("now", now)) if i % 2 else (("now", now), ("base", base))
                for name, funcs in order:
                    use(funcs)
                    run = runs[name]
                    if i == WARM_UP:
                        run["rec"].writer.flush(samples=False)
                        run["writer"] = run["rec"].cost["writer_cpu_s"]
                    cpu[0] = 0.0
                    start = time.thread_time()
                    run["opt"].zero_grad()
                    loss = torch.nn.functional.cross_entropy(run["net"](x), y)
                    loss.backward()
                    run["opt"].step()
                    trained, inside = time.thread_time(), cpu[0]
                    run["rec"].step(loss=loss, inputs=x)
                    if i >= WARM_UP:
                        run["work"].append(time.thread_time() - trained + inside)
                        run["step"].append(trained - start - inside)
            use(now)
            step = statistics.mean(runs["base"]["step"] + runs["now"]["step"])
            line = f"  {which:<36} step {step * 1e3:6.1f} ms"
            for name in ("base", "now"):
                run = runs[name]
                run["rec"].writer.flush(samples=False)
                writer = (run["rec"].cost["writer_cpu_s"] - run["writer"]) / args.steps
                work = statistics.mean(run["work"])
                line += (f" | {name}: {work * 1e3:5.2f} + {writer * 1e3:4.2f} ms = "
                         f"{(work + writer) / step:5.1%}")
                run["rec"].close()
            print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
