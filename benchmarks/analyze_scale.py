"""Analyze a large run: 1,000,000 tensor-stat rows, timed and measured for peak memory.

Generates a run with the trace writer: 32 parameters x (weight, grad, update) every step for
10,000 steps, plus 20 activation modules every 5 steps (1,000,000 tensor rows), per-step
scalars (loss, lr, acc, step and data time), a validation split every 100 steps and input
profiles of 16 features every 10 steps. Then, in a fresh subprocess each, it measures:

- read:    opening the run and loading every table (the floor any analysis pays),
- analyze: `tracelab.analyze(run)` with every rule: tables loaded and rule modules imported
           inside it,

each with wall time and peak RSS (resource.getrusage), best of `--repeat`, and prints the
ratio. The time to import tracelab itself (pandas, pyarrow) is printed apart. The target is
analyze under 5 s and under 1 GB.

The long-run series (`--series 10000,30000,100000`) analyzes runs of 500 tensor rows a step
(160 parameters x weight, grad and update, 100 activation modules every 5th step): 100,000
steps are 50M rows, 2.5 GB on disk. Its target is peak RSS flat in the number of steps, within
1 GB at 100,000 steps.

    python benchmarks/analyze_scale.py [--steps N] [--keep DIR] [--repeat K]
    python benchmarks/analyze_scale.py --series 10000,30000,100000 --repeat 1 [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PARAMS = 32
ACT_MODULES = 20
ACT_EVERY = 5
FEATURES = 16
CHUNK = 500  # steps per write call
# The long-run series: 160 parameters x (weight, grad, update) every step and 100 activation
# modules every 5th step, 500 tensor rows a step as an LLM with a few hundred tensors records.
LONG_PARAMS = 160
LONG_ACT_MODULES = 100

_MEASURE = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import tracelab
from tracelab.core.run import open_run
t1 = time.perf_counter()
mode, path = sys.argv[1], sys.argv[2]
if mode == "read":
    run = open_run(path).load_all()
    rows = len(run.tensors)
    result = {"rows": rows}
else:
    diagnosis = tracelab.analyze(path)
    result = {"findings": [f"{f.code}:{f.subject}" for f in diagnosis.findings],
              "errors": [f"{e.rule}: {e.error}" for e in diagnosis.errors],
              "rules": len(diagnosis.rules_run), "skipped": len(diagnosis.skipped)}
t2 = time.perf_counter()
result.update(import_s=t1 - t0, wall_s=t2 - t1,
              peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
print(json.dumps(result))
"""


def generate(path: Path, steps: int, params: int = PARAMS, act_modules: int = ACT_MODULES,
             seed: int = 0) -> int:
    """Write a healthy-looking run of `steps` steps, `params` parameters and `act_modules`
    activation modules; returns the number of tensor rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tracelab.core.schema import (ACTIVATION, ARROW_SCHEMAS, GRAD, INPUTS, PARQUET, SCALARS,
                                      TENSORS, UPDATE, WEIGHT, part_name)
    from tracelab.core.writer import RunWriter

    rng = np.random.default_rng(seed)
    names = [f"blocks.{i // 2}.{'weight' if i % 2 == 0 else 'bias'}" for i in range(params)]
    shapes = [[256, 256] if n.endswith("weight") else [256] for n in names]
    numel = np.array([int(np.prod(s)) for s in shapes])
    modules = [{"path": f"blocks.{i // 2}" if i % 2 == 0 else f"act.{i // 2}",
                "type": "Linear" if i % 2 == 0 else "ReLU"} for i in range(act_modules)]
    meta = {"config": {"num_classes": 10, "lr": 1e-3},
            "model": {"type": "Net", "modules": modules, "parameters": [
                {"name": n, "shape": s, "dtype": "float32", "device": "cpu",
                 "requires_grad": True, "in_optimizer": True} for n, s in zip(names, shapes)]}}
    writer = RunWriter(path, meta, flush_interval=60.0, part_rows=250_000)
    w_norm = 10 + rng.random(params)
    rows = 0
    for begin in range(0, steps, CHUNK):
        st = np.arange(begin, min(begin + CHUNK, steps))
        k = len(st)
        # Tensors: every parameter, every kind, every step.
        drift = np.cumsum(1e-3 * rng.standard_normal((k, params)), axis=0)
        cols = {}
        for kind, level in ((WEIGHT, w_norm + drift), (GRAD, 0.5 * np.exp(
                0.3 * rng.standard_normal((k, params)))), (UPDATE, 1e-3 * w_norm * np.exp(
                0.3 * rng.standard_normal((k, params))))):
            cols.setdefault("step", []).append(np.repeat(st, params))
            cols.setdefault("kind", []).extend([kind] * (k * params))
            cols.setdefault("name", []).extend(names * k)
            cols.setdefault("numel", []).append(np.tile(numel, k))
            norm = level.reshape(-1)
            per = norm / np.sqrt(np.tile(numel, k))
            cols.setdefault("norm", []).append(norm)
            cols.setdefault("mean", []).append(0.1 * per * rng.standard_normal(k * params))
            cols.setdefault("std", []).append(per)
            cols.setdefault("min", []).append(-3 * per)
            cols.setdefault("max", []).append(3 * per)
            cols.setdefault("abs_mean", []).append(0.8 * per)
            cols.setdefault("zero_frac", []).append(np.zeros(k * params))
            cols.setdefault("nan_count", []).append(np.zeros(k * params, dtype=np.int64))
            cols.setdefault("inf_count", []).append(np.zeros(k * params, dtype=np.int64))
        act_steps = st[st % ACT_EVERY == 0]
        a = len(act_steps) * act_modules
        is_relu = np.tile([m["type"] == "ReLU" for m in modules], len(act_steps))
        cols["step"].append(np.repeat(act_steps, act_modules))
        cols["kind"].extend([ACTIVATION] * a)
        cols["name"].extend([m["path"] for m in modules] * len(act_steps))
        cols["numel"].append(np.full(a, 256 * 64))
        spread = 1 + 0.1 * rng.standard_normal(a)
        for c, v in (("norm", 128 * spread), ("mean", 0.3 * spread), ("std", spread),
                     ("min", np.where(is_relu, 0.0, -3 * spread)), ("max", 3 * spread),
                     ("abs_mean", 0.7 * spread), ("zero_frac", np.where(is_relu, 0.5, 0.0))):
            cols[c].append(v)
        cols["nan_count"].append(np.zeros(a, dtype=np.int64))
        cols["inf_count"].append(np.zeros(a, dtype=np.int64))
        cols["dead_frac"] = np.concatenate([np.full(k * params * 3, np.nan),
                                            np.where(is_relu, 0.05, 0.0)])
        cols["saturated_frac"] = np.full(k * params * 3 + a, np.nan)
        columns = {c: (np.concatenate(v) if isinstance(v, list) and v and isinstance(
            v[0], np.ndarray) else np.asarray(v)) for c, v in cols.items()}
        order = np.argsort(columns["step"], kind="stable")  # a recorder writes step by step
        # A part file of its own, as the writer rolls them (zstd Parquet, the table's schema):
        # straight from the arrays, which is minutes faster at 50M rows.
        schema = ARROW_SCHEMAS[TENSORS]
        part = pa.table({c: pa.array(columns[c][order], f.type) if c in columns
                         else pa.nulls(len(order), f.type)  # split: training rows have none
                         for c, f in zip(schema.names, schema)}, schema=schema)
        (path / TENSORS).mkdir(exist_ok=True)
        pq.write_table(part, path / TENSORS / part_name(0, begin // CHUNK, PARQUET),
                       compression="zstd")
        rows += part.num_rows
        # Scalars: a healthy converging loss, lr, metrics, timings.
        loss = (0.3 + 2.0 * np.exp(-st / 2000)) * np.exp(0.2 * rng.standard_normal(k))
        names_s = ["loss", "lr/0", "acc", "step_time", "data_time"]
        values = np.stack([loss, np.full(k, 1e-3), 1 - loss / 3, 0.01 + 0 * loss,
                           0.002 + 0 * loss], axis=1).reshape(-1)
        val = st[st % 100 == 99]
        writer.write((SCALARS, {
            "step": np.concatenate([np.repeat(st, 5), np.repeat(val, 2)]),
            "split": ["train"] * (5 * k) + ["val"] * (2 * len(val)),
            "name": names_s * k + ["loss", "acc"] * len(val),
            "value": np.concatenate([values, np.stack([0.3 + 2.0 * np.exp(-val / 2000),
                                                       0.8 + 0 * val], axis=1).reshape(-1)]),
            "wall_time": np.concatenate([np.repeat(st * 0.01, 5), np.repeat(val * 0.01, 2)])}))
        inp = st[st % 10 == 0]
        f = len(inp) * FEATURES
        writer.write((INPUTS, {
            "step": np.repeat(inp, FEATURES), "split": ["train"] * f,
            "feature": [f"feature[{i}]" for i in range(FEATURES)] * len(inp),
            "dtype": ["float32"] * f, "count": np.full(f, 64),
            "mean": 0.01 * rng.standard_normal(f), "std": 1 + 0.01 * rng.standard_normal(f),
            "min": np.full(f, -3.0), "max": np.full(f, 3.0), "n_unique": np.full(f, 64),
            "int_frac": np.zeros(f), "nan_count": np.zeros(f, dtype=np.int64),
            "inf_count": np.zeros(f, dtype=np.int64)}))
    writer.close()
    return rows


def generate_wide(path: Path, features: int, steps: int = 300, val_every: int = 10,
                  batch: int = 64, sample_size: int = 2_000, seed: int = 0) -> None:
    """A run of `steps` steps whose inputs have `features` features: a train batch profiled
    every step, a val batch every `val_every` steps, and a reservoir of `sample_size` values
    per (split, feature), with a val split that is z-scored where train is min-max scaled."""
    from tracelab.core.schema import INPUTS, SCALARS
    from tracelab.core.writer import RunWriter

    rng = np.random.default_rng(seed)
    names = [f"x[{i}]" for i in range(features)]
    writer = RunWriter(path, {"model": {"type": "MLP", "modules": [
        {"path": "fc1", "type": "Linear"}]}}, flush_interval=60.0)
    st = np.arange(steps)
    loss = 0.3 + 2.0 * np.exp(-st / 100) * np.exp(0.1 * rng.standard_normal(steps))
    writer.write((SCALARS, {"step": st, "split": ["train"] * steps, "name": ["loss"] * steps,
                            "value": loss, "wall_time": 0.01 * st}))
    samples: dict[str, list] = {}
    for split, every, mean, std, lo, hi in (("train", 1, 0.5, 0.29, 0.0, 1.0),
                                            ("val", val_every, 0.0, 1.0, -3.0, 3.0)):
        s = st[::every]
        n = len(s) * features
        writer.write((INPUTS, {
            "step": np.repeat(s, features), "split": [split] * n, "feature": names * len(s),
            "dtype": ["float32"] * n, "count": np.full(n, batch),
            "mean": mean + 0.02 * rng.standard_normal(n),
            "std": std * (1 + 0.02 * rng.standard_normal(n)),
            "min": np.full(n, lo), "max": np.full(n, hi), "n_unique": np.full(n, batch),
            "int_frac": np.zeros(n), "nan_count": np.zeros(n, dtype=np.int64),
            "inf_count": np.zeros(n, dtype=np.int64)}))
        k = sample_size
        values = (rng.random((features, k)) if split == "train"
                  else rng.standard_normal((features, k)))
        for col, v in (("split", [split] * (features * k)),
                       ("feature", np.repeat(names, k).tolist()),
                       ("step", np.tile(rng.integers(0, steps, k), features)),
                       ("value", values.reshape(-1))):
            samples.setdefault(col, []).extend(list(v) if col in ("split", "feature") else [v])
    writer.set_samples({c: (np.concatenate(v) if c in ("step", "value") else v)
                        for c, v in samples.items()})
    writer.close()


# Runs are generated in a process of their own: Linux carries a process's peak RSS over into
# the programs it starts, so a parent that had generated a large run would inflate the peak
# RSS every measurement reports.
_GENERATE = r"""
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import analyze_scale
kind, path, size = sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
if kind == "tensors":
    print(analyze_scale.generate(path, size))
elif kind == "long":
    print(analyze_scale.generate(path, size, analyze_scale.LONG_PARAMS,
                                 analyze_scale.LONG_ACT_MODULES))
else:
    print(analyze_scale.generate_wide(path, size))
"""


def generate_apart(kind: str, path: Path, size: int) -> str:
    """`generate` ("tensors" or "long", size = steps) or `generate_wide` ("wide", size =
    features) in a fresh process; returns what it printed (the number of tensor rows)."""
    out = subprocess.run([sys.executable, "-c", _GENERATE, str(Path(__file__).parent), kind,
                          str(path), str(size)], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def measure(mode: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _MEASURE, mode, str(path)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _say_errors(result: dict) -> None:
    for error in result["errors"]:
        print(f"internal error: {error}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--keep", metavar="DIR", help="write (or reuse) the run here")
    parser.add_argument("--repeat", type=int, default=3, help="measurements of each side")
    parser.add_argument("--widths", help="comma-separated feature counts: the width series")
    parser.add_argument("--series", help="comma-separated step counts: the long-run series "
                        f"({3 * LONG_PARAMS + LONG_ACT_MODULES // ACT_EVERY} tensor rows a step)")
    args = parser.parse_args(argv)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tracelab-scale-"))
    if args.widths or args.series:
        try:
            if args.series:
                return series(root, [int(n) for n in args.series.split(",")], args.repeat)
            return widths(root, [int(w) for w in args.widths.split(",")], args.repeat)
        finally:
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
    path = root / "run"
    if not (path / "meta.json").exists():
        t0 = time.perf_counter()
        rows = int(generate_apart("tensors", path, args.steps))
        print(f"generated {rows:,} tensor rows ({args.steps:,} steps) in "
              f"{time.perf_counter() - t0:.1f} s: {path}")
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    print(f"run on disk: {size / 2**20:.1f} MiB; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    try:
        results = {}
        for mode in ("read", "analyze"):
            runs = [measure(mode, path) for _ in range(args.repeat)]
            best = min(runs, key=lambda r: r["wall_s"])
            results[mode] = best
            walls = ", ".join(f"{r['wall_s']:.2f}" for r in runs)
            print(f"{mode:<8} wall {best['wall_s']:.2f} s (runs: {walls}), peak RSS "
                  f"{best['peak_rss_mb']:.0f} MB; importing tracelab before it "
                  f"{best['import_s']:.2f} s")
        a, r = results["analyze"], results["read"]
        print(f"analyze / read: {a['wall_s'] / r['wall_s']:.2f}x wall, "
              f"{a['peak_rss_mb'] / r['peak_rss_mb']:.2f}x peak RSS; {a['rules']} rules ran, "
              f"{a['skipped']} skipped, findings: {a['findings'] or 'none'}")
        _say_errors(a)
        ok = a["wall_s"] < 5.0 and a["peak_rss_mb"] < 1024 and not a["errors"]
        print(f"target (< 5 s, < 1 GB): {'met' if ok else 'MISSED'}")
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def series(root: Path, counts: list[int], repeat: int) -> int:
    """The long-run series: analyze a run of LONG_PARAMS and LONG_ACT_MODULES (500 tensor rows
    a step) at each step count; the target is the longest within 1 GB of peak RSS (the
    largest of its runs)."""
    ok = True
    for n in counts:
        path = root / f"long-{n}"
        if not (path / "meta.json").exists():
            t0 = time.perf_counter()
            rows = int(generate_apart("long", path, n))
            print(f"generated {rows:,} tensor rows ({n:,} steps) in "
                  f"{time.perf_counter() - t0:.1f} s")
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        runs = [measure("analyze", path) for _ in range(repeat)]
        best = min(runs, key=lambda r: r["wall_s"])
        peak = max(r["peak_rss_mb"] for r in runs)
        ok &= not best["errors"] and (n != max(counts) or peak <= 1024)
        walls = ", ".join(f"{r['wall_s']:.1f}" for r in runs)
        print(f"{n:>7,} steps ({size / 2**20:,.0f} MiB on disk, load average "
              f"{os.getloadavg()[0]:.1f}): analyze {best['wall_s']:.1f} s (runs: {walls}), "
              f"peak RSS {peak:.0f} MB, {best['rules']} rules ran, findings: "
              f"{best['findings'] or 'none'}")
        _say_errors(best)
    print(f"target ({max(counts):,} steps within 1 GB of peak RSS): {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


def widths(root: Path, counts: list[int], repeat: int) -> int:
    paths = {}
    for n in counts:
        paths[n] = root / f"wide-{n}"
        if not (paths[n] / "meta.json").exists():
            generate_apart("wide", paths[n], n)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    runs: dict[int, list[dict]] = {n: [] for n in counts}
    for _ in range(repeat):  # alternate, so that the machine's load hits every width alike
        for n in counts:
            runs[n].append(measure("analyze", paths[n]))
    base = min(r["wall_s"] for r in runs[counts[0]])
    ok = True
    for n in counts:
        best = min(runs[n], key=lambda r: r["wall_s"])
        ratio = best["wall_s"] / base
        ok &= not best["errors"] and (n > 512 or ratio <= 2.0)
        print(f"{n:>5} features: analyze {best['wall_s']:.2f} s ({ratio:.2f}x {counts[0]} "
              f"features), peak RSS {best['peak_rss_mb']:.0f} MB, findings: "
              f"{best['findings'] or 'none'}")
        _say_errors(best)
    print(f"target (512 features within 2x of {counts[0]}): {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
