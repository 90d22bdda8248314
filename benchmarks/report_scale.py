"""The HTML report of a large run: its size against the 1.5 MB budget, and its time against the
analysis it reports on.

Builds an in-memory run of 100 parameters x (weight, grad, update) every step for 10,000 steps
(3,000,000 tensor rows), 100 activation modules every 10 steps, per-step scalars and a
validation split, with a few vanishing layers. Then it times, best of `--repeat` runs of each,
alternating (analysis, report, analysis, ...) so that both see the same load:

- analyze: `tracelab.analyze(run)` with every rule (tables already in memory),
- report:  `tracelab.reports.write_html(diagnosis, path)`,

and prints both, their ratio, the analysis with the report against the analysis alone, and the
report's size (the budget is 1.5 MB). `--steps 2000` is the issue's 100 tensors x 2,000 steps.

    python benchmarks/report_scale.py [--layers N] [--steps N] [--repeat K] [--keep PATH]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

BUDGET = 1_500_000


def build_run(layers: int, steps: int, seed: int = 0):
    from tracelab.core.run import Run
    rng = np.random.default_rng(seed)
    s = np.arange(steps)
    loss = 2.3 * np.exp(-s / (steps / 4)) + 0.1 + 0.05 * rng.random(steps)
    val = s[::100]
    sc = pd.concat([
        pd.DataFrame({"step": s, "split": "train", "name": "loss", "value": loss}),
        pd.DataFrame({"step": s, "split": "train", "name": "lr/0", "value": 0.01}),
        pd.DataFrame({"step": s, "split": "train", "name": "step_time",
                      "value": 0.02 + 0.002 * rng.random(steps)}),
        pd.DataFrame({"step": val, "split": "val", "name": "loss", "value": loss[val] + 0.1}),
    ], ignore_index=True)
    sc["wall_time"] = 1.7e9 + 0.03 * sc["step"]
    names = np.array([f"blocks.{i}.weight" for i in range(layers)], dtype=object)
    depth = np.tile(np.arange(layers), steps)
    step_col = np.repeat(s, layers)
    noise = 1 + 0.3 * rng.random(steps * layers)
    norms = {"weight": 5.0 + 1e-4 * step_col,
             "grad": np.where(depth < 3, 1e-7, 10.0 ** (-2 + depth / layers)) * noise,
             "update": 5e-3 * noise}
    frames = [pd.DataFrame({"step": step_col, "kind": kind, "name": np.tile(names, steps),
                            "numel": 4096, "norm": norm, "mean": 0.0, "std": norm / 64,
                            "min": -norm / 8, "max": norm / 8, "abs_mean": norm / 80,
                            "zero_frac": 0.0, "nan_count": 0, "inf_count": 0})
              for kind, norm in norms.items()]
    act_steps = s[::10]
    mods = np.array([f"blocks.{i}.act" for i in range(layers)], dtype=object)
    dead = np.tile(np.linspace(0.02, 0.3, layers), len(act_steps))
    frames.append(pd.DataFrame({"step": np.repeat(act_steps, layers), "kind": "activation",
                                "name": np.tile(mods, len(act_steps)), "numel": 512,
                                "norm": 3.0, "mean": 0.2, "std": 0.5, "min": 0.0, "max": 2.0,
                                "abs_mean": 0.3, "zero_frac": dead, "nan_count": 0,
                                "inf_count": 0, "dead_frac": dead}))
    meta = {"name": f"scale-{layers}x{steps}", "start_time": 1.7e9,
            "end_time": 1.7e9 + 0.03 * steps,
            "environment": {"python": "3.11", "torch": "2.13.0", "cuda_available": False,
                            "seed_set": True, "seed": 0},
            "model": {"type": "Deep", "modules": [{"path": m, "type": "ReLU"} for m in mods]}}
    return Run.from_frames(meta, scalars=sc, tensors=pd.concat(frames, ignore_index=True))


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def alternating(repeat: int, first, second):
    """Best of `repeat` of each, run one after the other in turn, so both see the same load."""
    a, b, out = [], [], None
    for _ in range(repeat):
        t, out = timed(first)
        a.append(t)
        b.append(timed(lambda: second(out))[0])
    return min(a), min(b), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=100)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="write the report here instead of a temp file")
    args = ap.parse_args()

    import tracelab
    from tracelab import reports

    run = build_run(args.layers, args.steps).load_all()
    print(f"run: {args.layers} layers x {args.steps:,} steps, {len(run.tensors):,} tensor rows")
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "report.html"
        t_analyze, t_report, diagnosis = alternating(
            args.repeat, lambda: tracelab.analyze(run), lambda d: reports.write_html(d, path))
        size = path.stat().st_size
    print(f"findings: {diagnosis.verdict()}")
    print(f"analyze: {t_analyze:6.2f} s")
    print(f"report:  {t_report:6.2f} s  ({t_report / t_analyze:.2f}x the analysis; analysis "
          f"with the report {(t_analyze + t_report) / t_analyze:.2f}x the analysis alone)")
    print(f"size:    {size / 1e6:6.2f} MB  ({size / BUDGET:.0%} of the 1.5 MB budget)")


if __name__ == "__main__":
    main()
