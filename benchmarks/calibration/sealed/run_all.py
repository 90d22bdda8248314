"""Train every sealed scenario into OUT_DIR/<name>/ and write OUT_DIR/labels.json.

    python benchmarks/calibration/sealed/run_all.py OUT_DIR [--only NAME ...]

One line per scenario: its name, seconds (wall and CPU), its recorded loss at the start and the end, and the warnings it raised. It
neither analyzes nor scores: the rule authors' harness does, once, from labels.json.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def names() -> list[str]:
    return sorted(p.stem for p in HERE.glob("[mn][0-9][0-9].py"))


def losses(run_dir: Path) -> str:
    """The recorded loss: mean of the first and of the last five steps; the last val loss."""
    import tracelab

    run = tracelab.open_run(str(run_dir))
    train = run.loss().dropna()
    said = "-" if train.empty else f"{train.head(5).mean():.4g} -> {train.tail(5).mean():.4g}"
    if "val" in run.splits():
        val = run.loss("val").dropna()
        said += "" if val.empty else f"  val {val.iloc[-1]:.4g}"
    return said


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these scenarios")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    chosen = args.only or names()
    labels, failed = {}, 0
    for name in chosen:
        t0, c0 = time.perf_counter(), time.process_time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                mod = importlib.import_module(name)
                labels[name] = mod.LABEL
                mod.run(str(out / name), seed=args.seed)
                error = ""
            except Exception as e:  # one scenario's failure is reported, the others still run
                failed += 1
                error = f" ERROR {type(e).__name__}: {e}"
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        said = sorted({f"{w.category.__name__}: {str(w.message)[:120]}" for w in caught})
        shown = error or f"  loss {losses(out / name)}"
        print(f"{name}  {seconds:5.1f} s (cpu {cpu:4.1f} s){shown}", flush=True)
        for line in said:
            print(f"    warning {line}", flush=True)
    (out / "labels.json").write_text(json.dumps(labels, indent=1, sort_keys=True))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
