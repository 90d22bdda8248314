"""Score the rules and the diagnoses on the calibration sets built from public training code.

    python benchmarks/calibrate_rules.py --set tuning [--runs DIR] [--only NAME ...] [--json OUT]
    python benchmarks/calibrate_rules.py --set sealed [...]    # once, when the rules are done
    python benchmarks/calibrate_rules.py --set tuning --set sealed --runs tuning=DIR ...

A set (`calibration/tuning/`, `calibration/sealed/`) is trained by its own
`run_all.py OUT_DIR`, which records one run per scenario into OUT_DIR and writes
OUT_DIR/labels.json (name -> LABEL: family, cause, healthy, source, ...). `--runs DIR` scores
the runs already in DIR when it holds labels.json, else records the set into DIR and keeps it
(without it the runs go to a temporary folder). Every run is analyzed as `tracelab analyze`
does, with the default config, and scored against the rules that name its cause key
(calibration/causes.py, from CAUSES.md):

- top-1: faulty runs whose first diagnosis at warning or above is one of those rules;
- recall: faulty runs with any finding (or diagnosis) at warning or above from those rules;
- false alarms: healthy runs with any finding at warning or above.

Per family (LABEL["family"]) and overall; the sets given are laid side by side. No figure is
tuned to a set: the inputs are the labels, the cause map and the engine's defaults. A run that
could not be analyzed counts against the figures: a miss when faulty, a false alarm when
healthy. The synthetic scenarios the rules were first tuned on are in calibration_synthetic.py.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

HERE = Path(__file__).resolve().parent
SETS = ("tuning", "sealed")
SEALED = ("*** SEALED SET: it is scored once, when the rules are done. Do not tune a rule, a "
          "threshold or the ranking on what this prints. ***")
TARGETS = "targets on the sealed set: top-1 >= 90 %, recall >= 90 %, no false alarm"
LABEL_KEYS = ("family", "healthy", "cause")


class Refused(Exception):
    """Bad input: one line for the user, no traceback."""


def load_causes(path: Path = HERE / "calibration" / "causes.py") -> dict[str, tuple[str, ...]]:
    """Cause key -> the rules whose finding names it."""
    spec = importlib.util.spec_from_file_location("calibration_causes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {key: tuple(rules) for key, rules in module.CAUSES.items()}


# -- scoring --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scored:
    """One run's score. `first` is the rule of its first diagnosis at warning or above; `rank`
    the place, among those diagnoses, of the first one whose rule names the planted cause."""
    name: str
    family: str
    cause: Optional[str]               # None: a healthy run
    first: Optional[str] = None
    rank: Optional[int] = None
    named: bool = False                # a finding at warning or above names the cause
    alarms: tuple[str, ...] = ()       # the rules of the findings at warning or above
    error: str = ""                    # why the run could not be analyzed
    rule_errors: tuple[str, ...] = ()  # rules that broke on the run

    @property
    def healthy(self) -> bool:
        return self.cause is None

    @property
    def top1(self) -> bool:
        return not self.healthy and self.rank == 1

    @property
    def found(self) -> bool:
        return not self.healthy and (self.rank is not None or self.named)

    @property
    def false_alarm(self) -> bool:
        return self.healthy and bool(self.alarms or self.error)

    @property
    def verdict(self) -> str:
        if self.healthy:
            return "FALSE ALARM" if self.false_alarm else "ok"
        if self.top1:
            return "hit"
        if self.rank is not None:
            return f"found #{self.rank}"
        return "found (explained)" if self.named else "miss"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "verdict": self.verdict, "top1": self.top1,
                "found": self.found, "false_alarm": self.false_alarm}


def score(name: str, label: dict, diagnosis, causes: dict[str, tuple[str, ...]]) -> Scored:
    """Score one analyzed run (a tracelab Diagnosis) against its label."""
    from tracelab.core.findings import Severity
    cause = label["cause"]
    wanted = set(causes.get(cause, ())) if cause is not None else set()
    ranked = [d.finding.rule for d in diagnosis.diagnoses if d.worst is not Severity.INFO]
    alarms = sorted({f.rule for f in diagnosis.findings if f.severity is not Severity.INFO})
    rank = next((n for n, rule in enumerate(ranked, 1) if rule in wanted), None)
    return Scored(name, str(label["family"]), cause, first=ranked[0] if ranked else None,
                  rank=rank, named=bool(wanted & set(alarms)), alarms=tuple(alarms),
                  rule_errors=tuple(f"{e.rule}: {e.error}" for e in diagnosis.errors))


def unanalyzed(name: str, label: dict, error: str) -> Scored:
    return Scored(name, str(label["family"]), label["cause"], error=error)


def tally(runs: Sequence[Scored]) -> dict[str, int]:
    faulty = [r for r in runs if not r.healthy]
    healthy = [r for r in runs if r.healthy]
    return {"faulty": len(faulty), "top1": sum(r.top1 for r in faulty),
            "recall": sum(r.found for r in faulty), "healthy": len(healthy),
            "false_alarms": sum(r.false_alarm for r in healthy)}


def summarize(runs: Sequence[Scored]) -> dict[str, dict[str, int]]:
    """Family -> tally, families sorted, then "overall"."""
    families = sorted({r.family for r in runs})
    return {**{f: tally([r for r in runs if r.family == f]) for f in families},
            "overall": tally(runs)}


def check_labels(labels: dict, causes: dict[str, tuple[str, ...]]) -> list[str]:
    """What is wrong with the labels, one line each."""
    problems = []
    for name, label in sorted(labels.items()):
        missing = [k for k in LABEL_KEYS if not isinstance(label, dict) or k not in label]
        if missing:
            problems.append(f"{name}: LABEL lacks {', '.join(missing)}")
        elif label["cause"] is not None and label["cause"] not in causes:
            problems.append(f"{name}: unknown cause key {label['cause']!r} "
                            "(benchmarks/calibration/CAUSES.md lists the keys)")
        elif bool(label["healthy"]) != (label["cause"] is None):
            problems.append(f"{name}: healthy is {label['healthy']!r} but cause is "
                            f"{label['cause']!r} (a healthy run has cause None)")
    return problems


# -- running and analyzing ------------------------------------------------------------------------
def record(set_name: str, root: Path, out: Path, only: Sequence[str], seed: Optional[int]) -> None:
    """Train the set into `out` with its runner (one thread, as the sets are measured)."""
    runner = root / set_name / "run_all.py"
    if not runner.is_file():
        raise Refused(f"{runner}: no such runner; is the {set_name} set there?")
    cmd = [sys.executable, str(runner), str(out)]
    if only:
        cmd += ["--only", *only]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    print(f"recording the {set_name} set into {out}", flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    code = subprocess.run(cmd, env=env).returncode
    if not (out / "labels.json").is_file():
        raise Refused(f"{runner} exited with {code} and wrote no {out / 'labels.json'}")


def labels_of(runs_dir: Path, only: Sequence[str]) -> dict[str, dict]:
    path = runs_dir / "labels.json"
    try:
        labels = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise Refused(f"{path}: cannot read the labels ({exc})") from None
    if not isinstance(labels, dict):
        raise Refused(f"{path}: expected an object of name -> LABEL")
    return {n: lb for n, lb in labels.items() if not only or n in only}


def analyze(name: str, label: dict, run_dir: Path, causes) -> Scored:
    import tracelab
    if not run_dir.is_dir():
        return unanalyzed(name, label, "no run recorded (the runner's output says why)")
    try:
        diagnosis = tracelab.analyze(run_dir)
    except Exception as exc:  # a run that does not open or holds no step: scored as not found
        return unanalyzed(name, label, f"{type(exc).__name__}: {exc}")
    return score(name, label, diagnosis, causes)


def score_set(set_name: str, runs_dir: Path, only: Sequence[str], causes) -> list[Scored]:
    labels = labels_of(runs_dir, only)
    problems = check_labels(labels, causes)
    if problems:
        raise Refused(f"{runs_dir / 'labels.json'}: " + "; ".join(problems))
    scored = []
    for name in sorted(labels):
        scored.append(analyze(name, labels[name], runs_dir / name, causes))
        print(f"  {set_name}/{name}: {scored[-1].verdict}", flush=True)
    return scored


# -- printing -------------------------------------------------------------------------------------
def fraction(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f} %)" if n else "-"


def print_runs(set_name: str, runs: Sequence[Scored]) -> None:
    print(f"\n{set_name}: {len(runs)} runs")
    print(f"{'run':<8} {'family':<12} {'cause':<33} {'first diagnosis':<26} result")
    for r in runs:
        first = r.first or ("(not analyzed)" if r.error else "-")
        print(f"{r.name:<8} {r.family:<12} {r.cause or '(healthy)':<33} {first:<26} {r.verdict}")
    for r in runs:
        if r.false_alarm:
            print(f"false alarm {r.name}: {', '.join(r.alarms) or r.error}")
    for r in runs:
        if not r.healthy and not r.top1 and not r.error:
            print(f"{r.verdict} {r.name}: raised {', '.join(r.alarms) or 'no warning'}")
        if r.error and not r.healthy:
            print(f"not analyzed {r.name}: {r.error}")
        for e in r.rule_errors:
            print(f"rule error {r.name}: {e}")


def print_summary(summaries: dict[str, dict[str, dict[str, int]]]) -> None:
    """Family x (top-1, recall, false alarms) of each set, side by side."""
    families = sorted({f for s in summaries.values() for f in s if f != "overall"}) + ["overall"]
    heads = [f"{s} {what}" for s in summaries for what in ("top-1", "recall", "false alarms")]
    print("\n" + " | ".join(["family".ljust(12), *(h.ljust(20) for h in heads)]).rstrip())
    for family in families:
        cells = []
        for summary in summaries.values():
            t = summary.get(family, tally([]))
            cells += [fraction(t["top1"], t["faulty"]), fraction(t["recall"], t["faulty"]),
                      fraction(t["false_alarms"], t["healthy"])]
        print(" | ".join([family.ljust(12), *(c.ljust(20) for c in cells)]).rstrip())
    print(TARGETS)


def unregistered(causes: dict[str, tuple[str, ...]]) -> list[str]:
    from tracelab.app.engine import all_rules
    return sorted({r for rules in causes.values() for r in rules} - {s.name for s in all_rules()})


# -- command line ---------------------------------------------------------------------------------
def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", dest="sets", action="append", choices=SETS, required=True,
                        help="a set to score (give it twice for both, side by side)")
    parser.add_argument("--runs", action="append", default=[], metavar="[SET=]DIR",
                        help="the set's runs: scored as they are when DIR holds labels.json, "
                             "else recorded into DIR")
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME",
                        help="only these scenarios")
    parser.add_argument("--seed", type=int, help="the seed the runner gives every scenario")
    parser.add_argument("--json", metavar="OUT", help="write every run's score and the summary")
    parser.add_argument("--root", default=str(HERE / "calibration"),
                        help="the folder holding the sets (default: benchmarks/calibration)")
    return parser.parse_args(argv)


def runs_dirs(sets: Sequence[str], given: Sequence[str]) -> dict[str, Optional[Path]]:
    """Set -> its --runs folder, if any."""
    dirs: dict[str, Optional[Path]] = dict.fromkeys(sets)
    for item in given:
        name, sep, path = item.partition("=")
        if not sep or name not in SETS:
            if len(sets) > 1:
                raise Refused(f"--runs {item}: with several sets, name the set: --runs SET=DIR")
            name, path = sets[0], item
        if name not in dirs:
            raise Refused(f"--runs {item}: {name} is not among the sets given (--set)")
        dirs[name] = Path(path)
    return dirs


def only_for(set_name: str, root: Path, runs: Optional[Path], only: Sequence[str]) -> list[str]:
    """The --only names that belong to this set (its scenario files, or its recorded labels)."""
    if runs is not None and (runs / "labels.json").is_file():
        return [n for n in only if n in labels_of(runs, ())]
    return [n for n in only if (root / set_name / f"{n}.py").is_file()]


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse(argv)
    try:
        return _main(args)
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    sets = list(dict.fromkeys(args.sets))
    root = Path(args.root)
    dirs = runs_dirs(sets, args.runs)
    if args.json and not Path(args.json).resolve().parent.is_dir():
        raise Refused(f"--json {args.json}: no folder {Path(args.json).resolve().parent}")
    causes = load_causes()
    only = {s: only_for(s, root, dirs[s], args.only) for s in sets}
    if args.only:
        unknown = sorted(set(args.only) - {n for names in only.values() for n in names})
        if unknown:
            raise Refused(f"--only: no scenario named {', '.join(unknown)} in "
                          f"{', '.join(sets)}")
        sets = [s for s in sets if only[s]]
    if "sealed" in sets:
        print(SEALED, flush=True)
    results: dict[str, dict[str, Any]] = {}
    for set_name in sets:
        runs_dir, temporary = dirs[set_name], None
        if runs_dir is None:
            runs_dir = temporary = Path(tempfile.mkdtemp(prefix=f"tracelab-{set_name}-"))
        try:
            if not (runs_dir / "labels.json").is_file():
                record(set_name, root, runs_dir, only[set_name], args.seed)
            scored = score_set(set_name, runs_dir, only[set_name], causes)
        finally:
            if temporary is not None:
                shutil.rmtree(temporary, ignore_errors=True)
        results[set_name] = {"runs_dir": None if temporary else str(runs_dir),
                             "runs": scored, "summary": summarize(scored)}
    for set_name, result in results.items():
        print_runs(set_name, result["runs"])
    print_summary({s: r["summary"] for s, r in results.items()})
    missing = unregistered(causes)
    if missing:
        print(f"rules the cause map names that are not registered: {', '.join(missing)}")
    if "sealed" in results:
        print(SEALED)
    if args.json:
        out = {"sets": {s: {**r, "runs": [x.to_dict() for x in r["runs"]]}
                        for s, r in results.items()},
               "causes": {k: list(v) for k, v in causes.items()}, "unregistered": missing}
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
        print(f"scores: {args.json}")
    broken = [r for res in results.values() for r in res["runs"] if r.error or r.rule_errors]
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
