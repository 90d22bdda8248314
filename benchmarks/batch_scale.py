"""Scale of `tracelab batch`: an archive of N runs of ~10,000 trace rows each.

Each run holds 2,000 steps of train loss, lr and step time (6,000 scalar rows), a validation
loss and accuracy every 100 steps, and weight and grad stats of 4 parameters every 4th step
(4,000 tensor rows). Two runs in ten have a planted fault (a loss spike, or a NaN loss). Runs
are written with pyarrow directly, in the trace format, so generating them takes seconds.

Measured on the `tracelab batch` command itself (a fresh process, imports included): the wall
time of a first batch, of a re-run with nothing changed (incremental), and the peak memory (RSS)
of its whole process tree, sampled every 50 ms, at two archive sizes: memory must not grow with
the archive. The analysis is measured without the per-run HTML reports (`--reports none`);
their cost is measured apart, on a small archive, with and without them.

Last measured (shared 2-core machine, load average 3-4 from other jobs, --jobs 2):
  1,000 runs in 52.9 s (53 ms/run; target 120 s), re-run with nothing changed 3.1 s,
  peak RSS of the process tree 833 MB vs 817 MB for 250 runs (1.02x).
With reports (`--with-reports`, load average 4.2): 1,000 runs with a report for each of the
  200 with a finding in 139.9 s, 1.12x the 124.4 s of the same archive without reports just
  before (target 180 s).

    python benchmarks/batch_scale.py [--runs 1000] [--small 250] [--jobs 2] [--report-runs 20]
                                     [--with-reports]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tracelab.core.schema import ARROW_SCHEMAS, SCALARS, SCHEMA_VERSION, TENSORS

STEPS, EVERY_TENSOR, EVERY_VAL = 2000, 4, 100
PARAMS = [("fc1.weight", 4096), ("fc1.bias", 64), ("fc2.weight", 640), ("fc2.bias", 10)]


def write_run(path: Path, seed: int) -> int:
    rng = np.random.default_rng(seed)
    steps = np.arange(STEPS)
    loss = 2.3 * np.exp(-steps / 600) + 0.2 + 0.03 * rng.standard_normal(STEPS)
    fault = seed % 10
    if fault == 3:
        loss[1200] += 4.0                      # a spike
    if fault == 7:
        loss[1500:] = np.nan                   # diverged to NaN
    n = STEPS
    scalars = {
        "step": np.concatenate([steps, steps, steps, steps[::EVERY_VAL], steps[::EVERY_VAL]]),
        "split": ["train"] * (3 * n) + ["val"] * (2 * (n // EVERY_VAL)),
        "name": ["loss"] * n + ["lr/0"] * n + ["step_time"] * n + ["loss"] * (n // EVERY_VAL)
        + ["acc"] * (n // EVERY_VAL),
        "value": np.concatenate([loss, np.full(n, 0.01), 0.02 + 0.001 * rng.random(n),
                                 loss[::EVERY_VAL] + 0.05,
                                 0.9 - 0.5 * np.exp(-steps[::EVERY_VAL] / 600)]),
        "wall_time": np.concatenate([1.7e9 + steps * 0.02] * 3 + [1.7e9 + steps[::EVERY_VAL]
                                                                   * 0.02] * 2),
    }
    tsteps = steps[::EVERY_TENSOR]
    rows = []
    for kind, scale in (("weight", 0.05), ("grad", 1e-3)):
        for name, numel in PARAMS:
            k = len(tsteps)
            std = scale * (1 + 0.05 * rng.standard_normal(k)).clip(0.5)
            rows.append({"step": tsteps, "kind": [kind] * k, "name": [name] * k,
                         "numel": np.full(k, numel), "mean": 0.001 * rng.standard_normal(k),
                         "std": std, "min": -4 * std, "max": 4 * std, "abs_mean": 0.8 * std,
                         "norm": std * np.sqrt(numel), "zero_frac": np.zeros(k),
                         "nan_count": np.zeros(k, dtype=np.int64),
                         "inf_count": np.zeros(k, dtype=np.int64)})
    tensors = {c: np.concatenate([np.asarray(r[c]) for r in rows]) for c in rows[0]}
    path.mkdir(parents=True)
    for table, cols in ((SCALARS, scalars), (TENSORS, tensors)):
        schema = ARROW_SCHEMAS[table]
        arrays = [pa.array(cols[f.name], type=f.type, from_pandas=True) if f.name in cols
                  else pa.nulls(len(cols["step"]), f.type) for f in schema]
        (path / table).mkdir()
        pq.write_table(pa.Table.from_arrays(arrays, schema=schema),
                       path / table / "r0-000000.parquet", compression="zstd")
    meta = {"schema_version": SCHEMA_VERSION, "tracelab_version": "0.1.0", "rank": 0,
            "start_time": 1.7e9, "end_time": 1.7e9 + STEPS * 0.02,
            "status": {"state": "completed"}, "config": {"lr": 0.01, "seed": seed}}
    (path / "meta.json").write_text(json.dumps(meta))
    return len(scalars["step"]) + len(tensors["step"])


class PeakRSS:
    """Peak resident memory of this process and all its descendants (Linux /proc)."""

    def __init__(self, interval: float = 0.05):
        self.interval, self.peak, self._stop = interval, 0, threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _tree_rss(self) -> int:
        parents = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    pass
        tree, frontier = {os.getpid()}, [os.getpid()]
        while frontier:
            pid = frontier.pop()
            kids = [p for p, pp in parents.items() if pp == pid and p not in tree]
            tree.update(kids)
            frontier.extend(kids)
        total = 0
        for pid in tree:
            try:
                with open(f"/proc/{pid}/statm") as f:
                    total += int(f.read().split()[1]) * self._page
            except (OSError, IndexError, ValueError):
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._tree_rss())
            self._stop.wait(self.interval)

    def __enter__(self) -> "PeakRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._tree_rss())


def batch(archive: Path, out: Path, jobs: int, reports: str) -> tuple[float, float]:
    """One `tracelab batch` command, as a user runs it: wall seconds and peak tree RSS (MB)."""
    cmd = [sys.executable, "-m", "tracelab", "batch", str(archive), "-o", str(out),
           "--jobs", str(jobs), "--reports", reports]
    with PeakRSS() as mem:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"batch failed: {proc.stderr.strip()}")
    return seconds, mem.peak / 2**20


def measure(n: int, jobs: int, reports: str, root: Path) -> dict:
    archive, out = root / f"archive-{n}", root / f"out-{n}-{reports}"
    t0 = time.perf_counter()
    for i in range(n):
        if not (archive / f"team{i % 10}" / f"run{i:05d}").exists():
            write_run(archive / f"team{i % 10}" / f"run{i:05d}", i)
    generate = time.perf_counter() - t0
    rows = sum(pq.read_metadata(f).num_rows for f in (archive / "team0").glob("*/*/*.parquet"))
    first_s, first_mb = batch(archive, out, jobs, reports)
    again_s, again_mb = batch(archive, out, jobs, reports)
    runs = pq.read_table(out / "runs.parquet", columns=["worst", "cached"]).to_pandas()
    return {"runs": n, "rows_per_run": rows // len(list((archive / "team0").iterdir())),
            "generate_s": generate, "batch_s": first_s, "per_run_ms": 1000 * first_s / n,
            "rerun_s": again_s, "rerun_analyzed": int((~runs["cached"]).sum()),
            "peak_rss_mb": first_mb, "rerun_peak_rss_mb": again_mb,
            "findings": pq.read_metadata(out / "findings.parquet").num_rows,
            "by_worst": runs["worst"].fillna("clean").value_counts().to_dict()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--small", type=int, default=250, help="the smaller archive, for memory")
    parser.add_argument("--report-runs", type=int, default=20,
                        help="archive size for the cost of per-run reports (0: skip)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--with-reports", action="store_true",
                        help="also batch the big archive with `--reports findings` (target: "
                             "1,000 runs in under 3 minutes)")
    parser.add_argument("--keep", metavar="DIR", help="build the archives here and keep them")
    args = parser.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tracelab-bench-"))
    try:
        results = [measure(n, args.jobs, "none", root) for n in (args.small, args.runs)]
        # Right after the same archive without reports, so that both see about the same load.
        with_reports = measure(args.runs, args.jobs, "findings", root) if args.with_reports \
            else None
        reports = [measure(args.report_runs, args.jobs, mode, root) for mode in ("none", "all")
                   ] if args.report_runs else []
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"cores: {os.cpu_count()}, jobs: {args.jobs}, load average at the end: {load:.1f}")
    for r in results:
        print(f"{r['runs']:>5} runs x {r['rows_per_run']} rows: batch {r['batch_s']:.1f} s "
              f"({r['per_run_ms']:.0f} ms/run), re-run {r['rerun_s']:.2f} s "
              f"({r['rerun_analyzed']} analyzed), peak RSS {r['peak_rss_mb']:.0f} MB "
              f"(re-run {r['rerun_peak_rss_mb']:.0f} MB), findings {r['findings']}, "
              f"worst {r['by_worst']}")
    small, big = results
    print(f"{big['runs']} vs {small['runs']} runs: time per run "
          f"{big['per_run_ms'] / small['per_run_ms']:.2f}x, peak memory "
          f"{big['peak_rss_mb'] / small['peak_rss_mb']:.2f}x")
    target = 120.0 * big["runs"] / 1000
    print(f"target: {big['runs']} runs analyzed in {target:.0f} s -> "
          f"{'met' if big['batch_s'] <= target else 'MISSED'} ({big['batch_s']:.1f} s)")
    if with_reports is not None:
        r, limit = with_reports, 180.0 * with_reports["runs"] / 1000
        print(f"{r['runs']} runs with reports for every run with a finding: batch "
              f"{r['batch_s']:.1f} s ({r['per_run_ms']:.0f} ms/run, "
              f"{r['batch_s'] / big['batch_s']:.2f}x without reports), worst {r['by_worst']}; "
              f"target {limit:.0f} s -> {'met' if r['batch_s'] <= limit else 'MISSED'}")
    if reports:
        bare, full = reports
        print(f"per-run HTML reports ({bare['runs']} runs): {full['per_run_ms']:.0f} ms/run "
              f"with, {bare['per_run_ms']:.0f} ms/run without: "
              f"{full['per_run_ms'] / bare['per_run_ms']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
