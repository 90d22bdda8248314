"""Run every scenario of the tuning set into one folder and write their labels.

    python benchmarks/calibration/tuning/run_all.py OUT_DIR [--only NAME ...] [--seed N]

Each scenario is a file `[a-z][0-9][0-9].py` of this folder with a module-level `LABEL` and a
`run(run_dir, seed=0)` that trains one small model with `tracelab.Recorder` into `run_dir`
(README.md). Each is run into `OUT_DIR/NAME`, one line printed per scenario (wall and CPU
seconds, the recorded train loss at the first and the last step, the warnings it raised), and
`OUT_DIR/labels.json` maps each name to its `LABEL`. A scenario that fails to import or raises
is reported and the others go on; the exit code is 1 when one did.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
import sys
import time
import traceback
import warnings
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
SCENARIO = re.compile(r"[a-z][0-9][0-9]")


def scenario_names(folder: Path = HERE) -> list[str]:
    """The scenarios of `folder`, sorted by name."""
    return sorted(p.stem for p in folder.glob("*.py") if SCENARIO.fullmatch(p.stem))


def load(name: str, folder: Path = HERE) -> ModuleType:
    """Import scenario `name`; its shared training modules (`_<P>_<name>.py`) sit beside it."""
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(f"tuning_{name}", folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _loss_ends(run_dir: Path) -> str:
    """The recorded train loss at the first and the last step, or why it could not be read."""
    import tracelab
    try:
        loss = tracelab.open_run(run_dir).loss()
    except Exception as exc:  # a run that does not open is reported, not raised
        return f"run does not open: {type(exc).__name__}: {exc}"
    if loss.empty:
        return "no loss recorded"
    nonfinite = int((~loss.apply(math.isfinite)).sum())
    return (f"steps {len(loss)}, loss {loss.iloc[0]:.4g} -> {loss.iloc[-1]:.4g}"
            + (f" ({nonfinite} not finite)" if nonfinite else ""))


def run_one(name: str, out: Path, seed: int) -> tuple[dict | None, str, bool]:
    """Run one scenario into `out/name`: its label, its report line, whether it succeeded."""
    start, cpu_start = time.perf_counter(), time.process_time()
    label = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            module = load(name)
            label = dict(module.LABEL)
            module.run(str(out / name), seed=seed)
            ok = True
        except Exception as exc:
            last = traceback.extract_tb(exc.__traceback__)[-1]
            error = f"FAILED {type(exc).__name__}: {exc} ({Path(last.filename).name}:{last.lineno})"
            ok = False
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    seen = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:120]}"
                   for w in caught})
    parts = [f"{name}", f"wall {wall:5.1f}s cpu {cpu:5.1f}s"]
    parts.append(_loss_ends(out / name) if ok else error)
    if label is not None:
        parts.append(f"cause={label.get('cause')}")
    parts.extend(f"warning {w}" for w in seen)
    return label, " | ".join(parts), ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", help="folder to record the runs into (one subfolder each)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run these scenarios only")
    parser.add_argument("--seed", type=int, default=0, help="seed given to every scenario")
    args = parser.parse_args(argv)

    names = scenario_names()
    if args.only:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            print(f"error: no scenario named {', '.join(unknown)} (have {', '.join(names)})",
                  file=sys.stderr)
            return 2
        names = [n for n in names if n in args.only]
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    taken = [n for n in names if (out / n).exists()]
    if taken:
        print(f"error: {out} already holds runs of {', '.join(taken)}; choose a new folder",
              file=sys.stderr)
        return 2

    labels, failed = {}, []
    for name in names:
        label, line, ok = run_one(name, out, args.seed)
        print(line, flush=True)
        if label is not None:
            labels[name] = label
        if not ok:
            failed.append(name)
    labels_path = out / "labels.json"
    if labels_path.exists():  # --only into a folder of earlier runs: keep their labels
        labels = {**json.loads(labels_path.read_text()), **labels}
    labels_path.write_text(json.dumps(labels, indent=1, sort_keys=True) + "\n")
    print(f"{len(names) - len(failed)} of {len(names)} scenarios ran; labels: {labels_path}"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
