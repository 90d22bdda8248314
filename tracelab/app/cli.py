"""The command line: `tracelab analyze|rules|explain|demo|...`.

Every user error (bad path, corrupt run, bad config) ends as one line on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import stat
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from tracelab._version import __version__
from tracelab.core.config import FAIL_ON, Config, DiffThresholds, load_config
from tracelab.core.errors import RunExistsError, TracelabError
from tracelab.core.files import resolved
from tracelab.core.findings import Diagnosis, Severity
from tracelab.core.printable import VisibleStream

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line and exit 2, like every other bad input
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _csv(value: str) -> list[str]:
    return [v for v in (p.strip() for p in value.split(",")) if v]


def _config(args: argparse.Namespace) -> Config:
    """The config (--config FILE, or the one found upwards), checked whole before any work."""
    from tracelab.app.engine import checked
    return checked(load_config(args.config))


# -- analyze ------------------------------------------------------------------------------------
def _add_analyze(sub) -> None:
    p = sub.add_parser("analyze", help="analyze a run and write its report",
                       description="Analyze a recorded run; print one line per finding and "
                                   "write the HTML report (RUN/report.html by default).")
    p.add_argument("run", help="run directory (or a TensorBoard log directory or CSV metrics "
                               "log, imported on the fly; its report then goes to "
                               "./NAME-report.html)")
    html = p.add_mutually_exclusive_group()
    html.add_argument("--html", metavar="PATH", help="write the HTML report here")
    html.add_argument("--no-html", action="store_true", help="write no HTML report")
    p.add_argument("--json", metavar="PATH", help="write the findings as JSON ('-' for stdout)")
    p.add_argument("--markdown", metavar="PATH", help="write a Markdown summary for tickets")
    p.add_argument("--baseline", metavar="RUN", help="a known-good run to compare inputs with")
    p.add_argument("--select", type=_csv, metavar="R,..", help="only these rules (names or codes)")
    p.add_argument("--ignore", type=_csv, metavar="R,..", help="skip these rules")
    p.add_argument("--fail-on", choices=FAIL_ON, default=None,
                   help="exit 1 when a finding is at or above this severity (default: error)")
    p.add_argument("--config", metavar="FILE", help="tracelab.toml or pyproject.toml to use")
    p.set_defaults(handler=cmd_analyze)


def exit_code(diagnosis: Diagnosis, fail_on: str) -> int:
    if fail_on == "never":
        return EXIT_OK
    limit = Severity(fail_on).rank
    return EXIT_FINDINGS if any(f.severity.rank <= limit for f in diagnosis.findings) else EXIT_OK


def _write_output(kind: str, target: Path, write: Callable[[], object], option: str,
                  hint: str = "") -> None:
    """Run a writer for `option` (its target checked by `_refuse_outputs` already); an
    unwritable place becomes one line naming it, never a traceback."""
    hint = hint or f"choose another {option} PATH"
    try:
        write()
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise TracelabError(f"{target.parent}: not writable ({reason}); {hint}") from None
        blocker = _file_on_the_way(target) if exc.errno in (errno.EEXIST, errno.ENOTDIR) else None
        if blocker is not None:
            raise TracelabError(f"{blocker}: is a file, where {option} needs a folder; "
                                f"{hint}") from None
        raise TracelabError(f"{target}: cannot write the {kind} ({reason}); {hint}") from None


def _file_on_the_way(target: Path) -> Optional[Path]:
    """The nearest folder of `target`'s path that is a file instead, if one is."""
    for folder in target.parents:
        if folder.is_file():
            return folder
    return None


def _refuse_outputs(outputs: Sequence[tuple[object, str]],
                    sources: Sequence[Optional[str]]) -> None:
    """One line and exit 2, before any output is written, when an output (path, option) would
    land on recorded data, or two options name the same file."""
    from tracelab.app.outputs import refuse_over_sources
    seen: dict[Path, str] = {}
    for path, option in outputs:
        if path is None:
            continue
        if str(path) in ("", "-"):
            raise TracelabError(f"{option} {str(path)!r}: expected the path of a file to write"
                                + (" ('-', stdout, is for --json only)" if str(path) else ""))
        refuse_over_sources(path, sources, option)
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            raise TracelabError(f"{path}: is not a regular file (a device, pipe or socket); "
                                f"{option} writes a file, choose a path for one")
        at = resolved(path)
        if at in seen:
            raise TracelabError(f"{path}: named by both {seen[at]} and {option}; choose "
                                "a path for each")
        seen[at] = option
    for at, option in seen.items():  # the Markdown summary's plots: <name>-<what>.png beside it
        if option == "--markdown":
            plot = next((other for other in seen if other.parent == at.parent
                         and other.name.startswith(f"{at.stem}-") and other.suffix == ".png"
                         and other != at), None)
            if plot is not None:
                raise TracelabError(f"{plot}: named by {seen[plot]}, where --markdown writes "
                                    f"its plots ({at.stem}-*.png); choose another path")


def cmd_analyze(args: argparse.Namespace) -> int:
    from tracelab.app.engine import analyze, selected
    from tracelab import reports
    from tracelab.app.sources import default_report_path, open_any
    from tracelab.reports.text import print_diagnosis

    config = _config(args)
    selected(config, args.select, args.ignore)  # unknown names fail before the run is read
    run = open_any(args.run)
    sources = (args.run, args.baseline)
    html_target = None if args.no_html else Path(args.html) if args.html is not None else \
        default_report_path(run)
    # Every output path is checked before anything is written: a refused --json must not
    # leave the report it would have come with.
    _refuse_outputs([(args.html if args.html == "" else html_target, "--html"),
                     (args.json if args.json != "-" else None, "--json"),
                     (args.markdown, "--markdown")], sources)
    try:
        diagnosis = analyze(run, config=config,
                            baseline=open_any(args.baseline) if args.baseline else None,
                            select=args.select, ignore=args.ignore)
    except MemoryError:  # ArrowMemoryError too: one line, not a traceback
        raise run.too_large() from None
    to_stdout = args.json == "-"
    out = sys.stderr if to_stdout else sys.stdout
    print_diagnosis(diagnosis, out)
    written = []
    html_path = None
    if html_target is not None:
        target = html_target
        hint = "" if args.html else "pass --html PATH to write the report elsewhere, or --no-html"
        _write_output("report", target, lambda: reports.write_html(diagnosis, target), "--html",
                      hint)
        written.append(("report", target))
        html_path = target
    if args.json:
        if to_stdout:
            sys.stdout.write(reports.json_text(diagnosis))
        else:
            _write_output("JSON", Path(args.json),
                          lambda: reports.write_json(diagnosis, Path(args.json)), "--json")
            written.append(("json", Path(args.json)))
    if args.markdown:
        md = Path(args.markdown)
        # The ticket summary names the full report relative to itself, when there is one.
        html_name = os.path.relpath(html_path, md.resolve().parent) if html_path else None
        _write_output("Markdown", md,
                      lambda: reports.write_markdown(diagnosis, md, html_name=html_name),
                      "--markdown")
        written.append(("markdown", md))
    code = exit_code(diagnosis, args.fail_on or config.fail_on or "error")
    mark = "FAIL" if code else "ok"
    files = "".join(f"; {kind}: {path}" for kind, path in written)
    broke = len(diagnosis.errors)  # a clean verdict must not hide a rule that did not run
    failed = f"; {broke} rule{'s' if broke != 1 else ''} broke (internal error)" if broke else ""
    print(f"{mark}: {diagnosis.verdict()}{failed}{files}", file=out)
    return code


# -- rules / explain ----------------------------------------------------------------------------
def _add_rules(sub) -> None:
    p = sub.add_parser("rules", help="list the rules")
    p.set_defaults(handler=cmd_rules)
    p = sub.add_parser("explain", help="print a rule's documentation")
    p.add_argument("rule", help="rule name or code, e.g. loss-spike or TL102")
    p.set_defaults(handler=cmd_explain)


def cmd_rules(args: argparse.Namespace) -> int:
    from tracelab.app.rule_catalog import all_rules
    specs = all_rules()
    width = max(len(s.name) for s in specs)
    for spec in sorted(specs, key=lambda s: s.code):
        needs = ", ".join(r.key for r in spec.requires) or "-"
        print(f"{spec.code}  {spec.name:<{width}}  {spec.summary}  (needs: {needs})")
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    from tracelab.app.rule_catalog import find_rule
    spec = find_rule(args.rule)
    if spec is None:
        raise TracelabError(f"unknown rule '{args.rule}'; `tracelab rules` lists them")
    print(f"{spec.code} {spec.name}\n")
    print(spec.doc)
    thresholds = spec.thresholds()
    if thresholds:
        print("\nThresholds (override in [tool.tracelab.rules." + spec.name + "]):")
        for key, value in thresholds.items():
            print(f"    {key} = {value!r}")
    return EXIT_OK


# -- demo ---------------------------------------------------------------------------------------
def _add_demo(sub) -> None:
    p = sub.add_parser("demo", help="train the built-in scenarios, analyze and report them")
    p.add_argument("dir", nargs="?", default="tracelab-demo", help="output directory")
    p.add_argument("--only", type=_csv, metavar="S,..", help="only these scenarios")
    p.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from tracelab.app.demo import run_demo
    return run_demo(Path(args.dir), only=args.only)


# -- batch / diff / import ----------------------------------------------------------------------
def _add_batch(sub) -> None:
    p = sub.add_parser("batch", help="analyze every run under an archive into one index",
                       description="Find every run under ARCHIVE (tracelab runs, TensorBoard "
                                   "logs, metrics.csv logs) and analyze each; write "
                                   "OUT/index.html, OUT/runs.parquet and OUT/findings.parquet. "
                                   "Runs unchanged since the last batch are not analyzed again.")
    p.add_argument("archive", help="directory holding the runs (searched recursively)")
    p.add_argument("-o", "--out", default="tracelab-batch", metavar="OUT",
                   help="output directory (default: ./tracelab-batch)")
    p.add_argument("--jobs", "-j", type=int, metavar="N",
                   help="worker processes (default: the number of cores)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on a Dask cluster, e.g. tcp://host:8786 (needs tracelab[dask])")
    p.add_argument("--reports", choices=("all", "findings", "none"), default="all",
                   help="per-run HTML reports: for every run (default), only for runs with a "
                        "finding or that died, or none; a report costs several times "
                        "its run's analysis")
    p.add_argument("--force", action="store_true", help="analyze every run again")
    p.add_argument("--config", metavar="FILE", help="tracelab.toml or pyproject.toml to use")
    p.set_defaults(handler=cmd_batch)


def cmd_batch(args: argparse.Namespace) -> int:
    from tracelab.app.batch import run_batch
    if args.jobs is not None and args.jobs < 1:
        raise TracelabError(f"--jobs {args.jobs}: expected a positive number of processes")
    result = run_batch(args.archive, args.out, jobs=args.jobs, scheduler=args.scheduler,
                       config=_config(args), reports=args.reports,
                       force=args.force, progress=True)
    states = ", ".join(f"{n} {s}" for s, n in sorted(result.by_status.items()))
    worst = ", ".join(f"{result.by_worst[w]} {w if w != 'none' else 'clean'}"
                      for w in ("error", "warning", "info", "none") if w in result.by_worst)
    print(f"{result.total} runs ({states}); analyzed {result.analyzed}, unchanged "
          f"{result.cached}; worst finding per run: {worst or '-'}; {result.seconds:.1f} s")
    for folder in result.unreadable:
        print(f"  not searched for runs, unreadable: {folder}")
    print(f"index: {result.index}")
    return EXIT_OK


def _tolerance(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not 0 <= number < float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r}: expected a finite number >= 0")
    return number


class _LinesAsIs(argparse.HelpFormatter):
    """Wraps a one-line text as usual; keeps the lines of a text that has several (a table),
    the way RawDescriptionHelpFormatter keeps every text's."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" not in text:
            return super()._fill_text(text, width, indent)
        return "".join(indent + line for line in text.splitlines(keepends=True))


def _add_diff(sub) -> None:
    p = sub.add_parser("diff", help="compare a reference run with another",
                       formatter_class=_LinesAsIs,
                       description="Compare run B with the reference run A: setup differences "
                                   "(config, flags, versions, devices), where their series "
                                   "part, per-layer gradient norms, input drift and the "
                                   "findings of only one run.",
                       epilog="Thresholds, set in [tool.tracelab.diff] of the config (--rtol "
                              "and --atol override it):\n" + DiffThresholds.help())
    p.add_argument("run_a", metavar="RUN_A", help="the reference (good) run")
    p.add_argument("run_b", metavar="RUN_B", help="the run to explain")
    p.add_argument("--html", metavar="PATH", help="also write the comparison as an HTML page")
    p.add_argument("--json", metavar="PATH", help="also write the comparison as JSON")
    p.add_argument("--rtol", type=_tolerance, help="relative tolerance (default: the config's "
                                                  "diff.rtol, else 1e-4)")
    p.add_argument("--atol", type=_tolerance, help="absolute tolerance (default: the config's "
                                                  "diff.atol, else 1e-8)")
    p.add_argument("--config", metavar="FILE", help="tracelab.toml or pyproject.toml to use")
    p.set_defaults(handler=cmd_diff)


def cmd_diff(args: argparse.Namespace) -> int:
    from tracelab.core.files import write_atomic
    from tracelab.core.findings import json_text
    from tracelab.app.diff import diff_runs, open_pair
    from tracelab.reports.diff_report import diff_text, write_diff_html
    config = _config(args)
    a, b = open_pair(args.run_a, args.run_b)
    sources = (args.run_a, args.run_b)
    _refuse_outputs([(args.html, "--html"), (args.json, "--json")], sources)
    result = diff_runs(a, b, config=config, rtol=args.rtol, atol=args.atol)
    sys.stdout.write(diff_text(result))
    if args.html:
        html = Path(args.html)
        _write_output("comparison", html, lambda: write_diff_html(result, a, b, html),
                      "--html")
        print(f"html: {html}")
    if args.json:
        target = Path(args.json)
        _write_output("JSON", target, lambda: write_atomic(target, json_text(result.to_dict())),
                      "--json")
        print(f"json: {target}")
    return EXIT_OK


def _add_import(sub) -> None:
    p = sub.add_parser("import", help="import another logger's files as a tracelab run")
    kinds = p.add_subparsers(dest="format", metavar="FORMAT", parser_class=_Parser)
    kinds.required = True
    tb = kinds.add_parser("tensorboard", help="a TensorBoard log directory (needs tensorboard)")
    tb.add_argument("source", metavar="LOGDIR", help="the log directory (subdirectories included)")
    csv = kinds.add_parser("csv", help="a CSV metrics log (Lightning's metrics.csv)")
    csv.add_argument("source", metavar="FILE", help="the CSV file (or the folder of metrics.csv)")
    csv.add_argument("--step-column", metavar="NAME", help="the step column (default: step)")
    ml = kinds.add_parser("mlflow", help="an MLflow run: a file-store run directory "
                                         "(mlruns/EXP/RUN) or an mlflow.db")
    ml.add_argument("source", metavar="SRC", help="the run directory, or the SQLite database")
    ml.add_argument("--run-id", metavar="ID", help="the run of the database (its id or name); "
                                                   "needed when it holds several")
    wb = kinds.add_parser("wandb", help="a W&B run: wandb/offline-run-*/ or wandb/run-*/ "
                                        "(or its .wandb file)")
    wb.add_argument("source", metavar="SRC", help="the run folder or its run-*.wandb file")
    for q in (tb, csv, ml, wb):
        q.add_argument("run", metavar="RUN", help="the tracelab run directory to create")
        q.add_argument("--map", action="append", default=[], metavar="REGEX=SPLIT/NAME",
                       help="map matching scalar tags (metric keys, columns) to a split and "
                            "name, or 'skip'; repeatable, tried before the defaults")
        q.set_defaults(handler=cmd_import)
    for q in (tb, wb):
        q.add_argument("--hist-map", action="append", default=[], metavar="REGEX=KIND[:NAME]",
                       help="map matching histogram tags to weight, grad, update or "
                            "activation, or 'skip'; repeatable")


def _read_import(args: argparse.Namespace, tags):
    if args.format == "tensorboard":
        from tracelab.recorders.importers.tensorboard import read_tensorboard
        return read_tensorboard(args.source, tags)
    if args.format == "mlflow":
        from tracelab.recorders.importers.mlflow import read_mlflow
        return read_mlflow(args.source, tags, run_id=args.run_id)
    if args.format == "wandb":
        from tracelab.recorders.importers.wandb import read_wandb
        return read_wandb(args.source, tags)
    from tracelab.recorders.importers.csv import read_csv_log
    return read_csv_log(args.source, tags, step_column=args.step_column)


def cmd_import(args: argparse.Namespace) -> int:
    from tracelab.app.outputs import refuse_import_target, refuse_over_sources
    from tracelab.recorders.importers.common import TagMap
    tags = TagMap(scalars=args.map, histograms=getattr(args, "hist_map", []))
    imported = _read_import(args, tags)
    if not any(table.num_rows for table in imported.tables.values()):
        why = "; ".join(imported.problems[:2]) or "no values in it"
        raise TracelabError(f"{args.source}: nothing readable to import ({why}); expected a "
                            f"{args.format} log with recorded values")
    target = Path(args.run)
    refuse_over_sources(target / "meta.json", (args.source,), "RUN")
    refuse_import_target(target, Path(args.source))
    try:
        run_dir = imported.write(target)
    except RunExistsError:
        raise
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        blocking = next((p for p in target.parents if p.exists() and not p.is_dir()), None)
        if blocking is not None:  # mkdir of the parents says "file exists"
            reason = f"{blocking} is a file, not a folder"
        raise TracelabError(f"{target}: cannot create the run there ({reason}); choose "
                            "another RUN directory") from None
    counts = {t: imported.tables[t].num_rows for t in imported.tables}
    print(f"{run_dir}: imported {counts['scalars']} scalar and {counts['tensors']} tensor rows "
          f"from {args.source}; next: tracelab analyze {run_dir}")
    for problem in imported.problems:
        print(f"  not read: {problem}")
    return EXIT_OK


COMMANDS: list[Callable] = [_add_analyze, _add_rules, _add_demo, _add_batch, _add_diff,
                            _add_import]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tracelab", description="Record, analyze and report PyTorch training "
                                                  "runs.")
    parser.add_argument("--version", action="version", version=f"tracelab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for add in COMMANDS:
        add(sub)
    return parser


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a job scheduler, `kill`) unwinds as Ctrl-C does: temporary files removed,
    worker processes stopped, and no half-written output left behind."""
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt
    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _visible_output() -> Iterator[None]:
    """stdout and stderr escaping control and bidirectional characters: a run's name or a path
    holding ESC, OSC or U+202E reaches no terminal raw."""
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = VisibleStream(sys.stdout), VisibleStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = streams


def main(argv: Optional[Sequence[str]] = None) -> int:
    # Paths need not be valid UTF-8 (they arrive with surrogate escapes): print them escaped
    # rather than fail on them.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    with _visible_output():
        return _main(argv)


def _main(argv: Optional[Sequence[str]]) -> int:
    try:
        args = build_parser().parse_args(argv)
        with _terminate_as_interrupt():
            return args.handler(args)
    except TracelabError as exc:
        print(f"tracelab: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("tracelab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # a path named on the command line it may not reach (permissions)
        what = exc.filename if exc.filename is not None else "a file"
        print(f"tracelab: error: {what}: {(exc.strerror or str(exc)).lower()}", file=sys.stderr)
        return EXIT_USAGE
