"""The command line: `tracelab analyze|rules|explain|demo|...`.

Every user error (bad path, corrupt run, bad config) ends as one line on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path
from typing import Callable, Optional, Sequence

from tracelab._version import __version__
from tracelab.errors import TracelabError
from tracelab.findings import Diagnosis, Severity

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
FAIL_ON = ("error", "warning", "info", "never")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line and exit 2, like every other bad input
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _csv(value: str) -> list[str]:
    return [v for v in (p.strip() for p in value.split(",")) if v]


# -- analyze ------------------------------------------------------------------------------------
def _add_analyze(sub) -> None:
    p = sub.add_parser("analyze", help="analyze a run and write its report",
                       description="Analyze a recorded run; print one line per finding and "
                                   "write the HTML report (RUN/report.html by default).")
    p.add_argument("run", help="run directory")
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


def format_finding(f, prefix: str = "") -> str:
    steps = f"steps {f.steps[0]}-{f.steps[1]}" if f.steps and f.steps[0] != f.steps[1] else (
        f"step {f.steps[0]}" if f.steps else "")
    where = f" {steps}" if steps else ""
    return f"{prefix}{f.code} {f.severity.value:<7} {f.rule} [{f.subject}]{where}: {f.message}"


def print_diagnosis(diagnosis: Diagnosis, out=sys.stdout) -> None:
    run = diagnosis.run
    summary = run.summary()
    first, last = summary["steps"]
    print(f"{run.path or run.name}: {summary['status']}, steps {first}-{last}", file=out)
    for f in diagnosis.findings:
        print(format_finding(f, "  "), file=out)
    for e in diagnosis.errors:
        print(f"  {e.code} internal-error {e.rule}: {e.error}", file=out)
    if diagnosis.skipped:
        reasons = sorted({s.reason for s in diagnosis.skipped})
        names = ", ".join(s.rule for s in diagnosis.skipped)
        print(f"  skipped {len(diagnosis.skipped)} rules ({'; '.join(reasons)}): {names}", file=out)
    for problem in run.problems:
        print(f"  unreadable, skipped: {problem}", file=out)


def exit_code(diagnosis: Diagnosis, fail_on: str) -> int:
    if fail_on == "never":
        return EXIT_OK
    limit = Severity(fail_on).rank
    return EXIT_FINDINGS if any(f.severity.rank <= limit for f in diagnosis.findings) else EXIT_OK


def cmd_analyze(args: argparse.Namespace) -> int:
    from tracelab.config import load_config
    from tracelab.engine import analyze
    from tracelab import reports

    config = load_config(args.config)
    diagnosis = analyze(args.run, config=config, baseline=args.baseline,
                        select=args.select, ignore=args.ignore)
    to_stdout = args.json == "-"
    out = sys.stderr if to_stdout else sys.stdout
    print_diagnosis(diagnosis, out)
    written = []
    if not args.no_html:
        target = Path(args.html) if args.html else Path(args.run) / "report.html"
        try:
            reports.write_html(diagnosis, target)
        except PermissionError:
            raise TracelabError(f"{target.parent}: not writable; pass --html PATH to write the "
                                "report elsewhere") from None
        written.append(("report", target))
    if args.json:
        if to_stdout:
            sys.stdout.write(reports.json_text(diagnosis))
        else:
            reports.write_json(diagnosis, Path(args.json))
            written.append(("json", Path(args.json)))
    if args.markdown:
        reports.write_markdown(diagnosis, Path(args.markdown))
        written.append(("markdown", Path(args.markdown)))
    fail_on = args.fail_on or config.fail_on or "error"
    if fail_on not in FAIL_ON:
        raise TracelabError(f"{config.source}: fail-on = {fail_on!r}; expected one of "
                            + ", ".join(FAIL_ON))
    code = exit_code(diagnosis, fail_on)
    mark = "FAIL" if code else "ok"
    files = "".join(f"; {kind}: {path}" for kind, path in written)
    print(f"{mark}: {diagnosis.verdict()}{files}", file=out)
    return code


# -- rules / explain ----------------------------------------------------------------------------
def _add_rules(sub) -> None:
    p = sub.add_parser("rules", help="list the rules")
    p.set_defaults(handler=cmd_rules)
    p = sub.add_parser("explain", help="print a rule's documentation")
    p.add_argument("rule", help="rule name or code, e.g. loss-spike or TL102")
    p.set_defaults(handler=cmd_explain)


def cmd_rules(args: argparse.Namespace) -> int:
    from tracelab.engine import all_rules
    specs = all_rules()
    width = max(len(s.name) for s in specs)
    for spec in sorted(specs, key=lambda s: s.code):
        needs = ", ".join(r.key for r in spec.requires) or "-"
        print(f"{spec.code}  {spec.name:<{width}}  {spec.summary}  (needs: {needs})")
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    from tracelab.engine import find_rule
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
    from tracelab.demo import run_demo
    return run_demo(Path(args.dir), only=args.only)


COMMANDS: list[Callable] = [_add_analyze, _add_rules, _add_demo]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tracelab", description="Record, analyze and report PyTorch training "
                                                  "runs.")
    parser.add_argument("--version", action="version", version=f"tracelab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except TracelabError as exc:
        print(f"tracelab: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("tracelab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
