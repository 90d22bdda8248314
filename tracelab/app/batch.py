"""Batch analysis of an archive of runs: `tracelab batch ARCHIVE [-o OUT] [--jobs N]`.

Every run under ARCHIVE (tracelab runs, TensorBoard logs, CSV logs, MLflow runs of a file store
or of a SQLite database, W&B runs), at any depth, is analyzed by the same
per-run function, in a local process pool or on a Dask cluster (`--scheduler`). The outputs::

    OUT/index.html              one sortable row per run, linking to its report
    OUT/runs.parquet            one row per run
    OUT/findings.parquet        one row per finding
    OUT/runs/<name>/report.html each run's report
    OUT/runs/<name>/result.json the run's analysis, and the cache key it was made under

Nothing is written into the archive. A run is analyzed again only when its data files (sizes and
modification times), the tracelab version, the rule set or the configuration changed; runs
still being written are always analyzed again. A run that cannot be read is a row like any other.
Memory stays bounded: a worker holds one run at a time, at most a few tasks are in flight, and
the outputs are assembled from the result files one run at a time.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from tracelab._version import __version__
from tracelab.app import executors
from tracelab.app.batch_outputs import check_output_folder, claim_output_folder
from tracelab.app.sources import data_files, discover, open_source
from tracelab.core.batch_schema import (UNREADABLE, finding_row, run_row, run_settings,
                                        varying_settings)
from tracelab.core.config import Config
from tracelab.core.errors import ConfigError, TraceError, TracelabError
from tracelab.core.files import resolved, write_atomic
from tracelab.core.formats import CSV, Source
from tracelab.core.run_status import recording_stopped
from tracelab.core.schema import CSV_LOG

RESULT_FILE = "result.json"
REPORT_FILE = "report.html"
REPORTS = ("all", "findings", "none")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NAME_MAX = 120  # characters of a run's folder name in OUT/runs, before its digest


@dataclass(frozen=True)
class Task:
    """One run's analysis: everything a worker needs, picklable."""
    source: Source
    rel: str
    name: str
    key: str
    out: Path
    config: Config
    reports: str = "all"         # all, findings (only runs with a finding or that died), none
    inline_report: bool = False  # return the report's bytes instead of writing it (remote)


@dataclass
class BatchResult:
    out: Path
    total: int = 0
    analyzed: int = 0
    cached: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    by_worst: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    unreadable: list[str] = field(default_factory=list)  # folders that could not be listed

    @property
    def index(self) -> Path:
        return self.out / "index.html"


# -- naming and caching ---------------------------------------------------------------------
def safe_name(rel: str) -> str:
    """A directory name for a run's outputs: readable, and unique for distinct paths."""
    flat = _UNSAFE.sub("_", rel.replace("/", "__")).strip("._") or "run"
    if flat != rel or len(flat) > _NAME_MAX:
        # os.fsencode: a name that is not UTF-8 is held with surrogates, which encode() refuses
        digest = hashlib.sha1(os.fsencode(rel)).hexdigest()[:8]
        # A deep run's path is kept to its end, where runs differ: far below the file system's
        # limit of 255 bytes a name.
        flat = (flat if len(flat) <= _NAME_MAX else "_" + flat[-_NAME_MAX:]) + "-" + digest
    return flat


def config_digest(config: Config, reports: str) -> str:
    from tracelab.app.diagnose import link_order
    from tracelab.app.engine import all_rules
    rules = sorted((s.code, s.name, sorted(s.thresholds().items(), key=str))
                   for s in all_rules())
    # row_format: bumped when a run's row gains fields, so older results are not reused.
    # The causal links decide the diagnoses: a change to them is a new analysis.
    links = [(lk.cause, lk.effects, lk.timing, lk.place, lk.why)
             for lk in link_order(all_rules())]
    payload = {"version": __version__, "row_format": 3, "select": config.select,
               "ignore": config.ignore, "rules_config": config.rules, "rules": rules,
               "reports": reports, "links": links}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def fingerprint(source: Source) -> str:
    """Sizes and modification times of the files a run's analysis reads."""
    h = hashlib.sha256(f"{source.format}\0{source.key or ''}".encode())
    for file in data_files(source):
        try:
            st = file.stat()
        except OSError:
            continue
        h.update(f"{file.relative_to(source.path.parent)}\0{st.st_size}\0{st.st_mtime_ns}\n"
                 .encode())
    return h.hexdigest()


def _cached(task: Task) -> Optional[dict[str, Any]]:
    folder = task.out / "runs" / task.name
    try:
        result = json.loads((folder / RESULT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    # A result damaged or edited by hand is analyzed again, never trusted.
    if not isinstance(result, dict) or result.get("key") != task.key \
            or not result.get("cacheable") or not isinstance(result.get("run"), dict):
        return None
    report = result["run"].get("report")
    if report is not None and not isinstance(report, str):
        return None
    findings, settings = result.get("findings", []), result["run"].get("settings")
    if not isinstance(findings, list) or not all(isinstance(f, dict) for f in findings) \
            or not isinstance(settings, (dict, type(None))):
        return None
    if report and not (task.out / report).exists():
        return None
    return result


# -- the per-run function (runs in a worker process, or on a Dask worker) ---------------------
def _status_detail(status: dict[str, Any]) -> Optional[str]:
    state = status.get("state")
    if state == "failed":
        text = f"{status.get('exception_type') or 'exception'}: " \
               f"{status.get('exception_message') or ''}".rstrip(": ")
        return f"{text} (step {status['step']})" if status.get("step") is not None else text
    if state == "killed":
        last = status.get("last_step")
        return "killed before its first step" if last is None else f"killed after step {last}"
    return recording_stopped(status)


def _row(task: Task, detail: Optional[str] = None) -> dict[str, Any]:
    return run_row(run=task.rel, name=task.name, format=task.source.format,
                   path=str(task.source.path), cache_key=task.key, detail=detail)


def analyze_task(task: Task) -> dict[str, Any]:
    """Analyze one run; never raises for a bad run (only for a bad configuration)."""
    from tracelab.app.engine import analyze
    started = time.perf_counter()
    row = _row(task)
    findings: list[dict[str, Any]] = []
    result: dict[str, Any] = {"key": task.key, "cacheable": True, "run": row,
                              "findings": findings}
    try:
        run = open_source(task.source)
        summary = run.summary()
        status = run.status
        row.update(source_name=run.name, settings=run_settings(run.meta),
                   status=status.get("state") or "unknown", detail=_status_detail(status),
                   recorded=summary["recorded"], problems=summary["problems"],
                   start_time=summary["start_time"], end_time=summary["end_time"])
        row["first_step"], row["last_step"] = summary["steps"]
        if run.is_empty and summary["problems"]:  # nothing read: unreadable, as a native run
            row.update(status=UNREADABLE, detail="no recorded steps could be read ("
                       + "; ".join(summary["problems"][:3]) + ")")
        elif run.is_empty:
            row["detail"] = "; ".join(filter(None, [row["detail"], "no recorded steps"]))
        else:
            diagnosis = analyze(run, config=task.config)
            _fill(row, findings, diagnosis, task)
            if task.reports == "all" or (task.reports == "findings" and (
                    diagnosis.findings or row["status"] in ("failed", "killed"))):
                _report(diagnosis, task, row, result)
    except ConfigError:
        raise  # the same for every run: the batch stops with one line
    except TracelabError as exc:
        row.update(status=UNREADABLE, detail=str(exc))
    except Exception as exc:  # an unforeseen failure on one run must not stop the archive
        row.update(status=UNREADABLE, detail=f"{type(exc).__name__}: {exc}")
    finally:
        _close_figures()
    # Not a running run's, nor one it could not read whole: a permission fixed, or a writer
    # that catches up, changes no file's size or time, so the key would not see it.
    result["cacheable"] = result["cacheable"] and row["status"] not in ("running", UNREADABLE) \
        and not row["problems"]
    row["analysis_s"] = round(time.perf_counter() - started, 4)
    return result


def _fill(row: dict[str, Any], findings: list, diagnosis, task: Task) -> None:
    counts = diagnosis.counts()
    row.update(worst=diagnosis.worst.value if diagnosis.worst else None,
               n_error=counts["error"], n_warning=counts["warning"], n_info=counts["info"],
               n_rule_errors=len(diagnosis.errors), n_skipped=len(diagnosis.skipped))
    per_rule: dict[str, int] = {}
    cause = {e.id: (d.finding.id, n) for n, d in enumerate(diagnosis.diagnoses, 1)
             for e in (d.finding, *d.explains)}
    for f in diagnosis.findings:
        per_rule[f.code] = per_rule.get(f.code, 0) + 1
        findings.append(finding_row(task.rel, task.name, f, cause.get(f.id)))
    row["rule_counts"] = per_rule
    row["n_diagnoses"] = len(diagnosis.diagnoses)
    if diagnosis.diagnoses:
        first = diagnosis.diagnoses[0]
        row.update(root_cause=first.finding.id, root_cause_rule=first.finding.rule,
                   root_cause_code=first.finding.code,
                   root_cause_message=first.finding.message, root_cause_fix=first.fix)
    if diagnosis.errors:
        broke = "; ".join(f"{e.rule} broke ({e.error})" for e in diagnosis.errors)
        row["detail"] = "; ".join(filter(None, [row["detail"], broke]))


def _report(diagnosis, task: Task, row: dict[str, Any], result: dict[str, Any]) -> None:
    from tracelab import reports
    rel = f"runs/{task.name}/{REPORT_FILE}"
    try:
        if task.inline_report:
            with tempfile.TemporaryDirectory() as tmp:
                target = Path(tmp) / REPORT_FILE
                reports.write_html(diagnosis, target)
                result["report_bytes"] = target.read_bytes()
        else:
            reports.write_html(diagnosis, task.out / rel)
        row["report"] = rel
    except Exception as exc:  # the findings stand even when the report cannot be drawn
        row["detail"] = "; ".join(filter(None, [row["detail"], f"report failed: "
                                                f"{type(exc).__name__}: {exc}"]))
        result["cacheable"] = False


def _close_figures() -> None:
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")


# -- where tasks run ------------------------------------------------------------------------
def _failed(task: Task, why: str) -> dict[str, Any]:
    return {"key": task.key, "cacheable": False, "findings": [], "run": _row(task, why)}


def process_pool(jobs: int, worker: Optional[Callable[[Task], dict]] = None, *,
                 reports: bool = True) -> executors.Executor:
    """A local pool of `jobs` processes running `worker` (default: analyze_task)."""
    preload = ["tracelab.app.batch", "tracelab.app.engine", "tracelab.analyzers"] + (
        ["tracelab.reports.html"] if reports else [])
    return executors.process_pool(jobs, worker or analyze_task, _failed, preload=preload)


# -- the batch ------------------------------------------------------------------------------
def plan(archive: Path, out: Path, config: Config, *, reports: str = "all",
         remote: bool = False, unreadable: list[str] | None = None) -> list[Task]:
    sources = discover(archive, exclude=[out], unreadable=unreadable)
    digest = config_digest(config, reports)
    tasks = []
    for source in sources:
        rel = source.path.relative_to(archive).as_posix()
        if source.format == CSV and source.path.name == CSV_LOG:
            rel = source.path.parent.relative_to(archive).as_posix()
        if rel == ".":
            rel = archive.name or "run"
        if source.key is not None:  # one run of an MLflow database
            rel = f"{rel}/{source.key}"
        key = hashlib.sha256(f"{digest}\0{fingerprint(source)}".encode()).hexdigest()
        tasks.append(Task(source, rel, safe_name(rel), key, out, config, reports, remote))
    return tasks


def run_batch(archive: str | os.PathLike, out: str | os.PathLike = "tracelab-batch", *,
              jobs: Optional[int] = None, scheduler: Optional[str] = None,
              config: Optional[Config] = None, reports: str = "all", force: bool = False,
              progress: bool = True) -> BatchResult:
    """Analyze every run under `archive` into `out`; see the module docstring."""
    from tqdm import tqdm
    from tracelab.app.batch_outputs import write_outputs
    from tracelab.app.engine import checked
    archive, out = resolved(archive), resolved(out)
    if reports not in REPORTS:
        raise ConfigError(f"reports={reports!r}: expected one of {', '.join(REPORTS)}")
    config = checked(config)  # a bad config fails here, not in the first worker
    if not archive.is_dir():
        what = "a file" if archive.exists() else "no such directory"
        raise TraceError(f"{archive}: {what}; expected a directory holding runs")
    started = time.perf_counter()
    check_output_folder(out, archive)
    unreadable: list[str] = []
    tasks = plan(archive, out, config, reports=reports, remote=scheduler is not None,
                 unreadable=unreadable)
    if not tasks:
        # A folder that could not be listed may hold them: said, or it looks like an empty one
        unlisted = (f"; not searched, unreadable: {', '.join(unreadable[:3])}"
                    f"{f' and {len(unreadable) - 3} more' if len(unreadable) > 3 else ''}"
                    if unreadable else "")
        raise TraceError(f"{archive}: no runs found (tracelab runs, TensorBoard logs, "
                         f"metrics.csv files, MLflow runs or databases, W&B runs){unlisted}")
    claim_output_folder(out)
    _own_folders(out, tasks)
    summary = BatchResult(out=out, total=len(tasks), unreadable=unreadable)
    todo = []
    for task in tasks:
        if not force and _cached(task) is not None:
            summary.cached += 1
        else:
            todo.append(task)
    # The bar holds no run's name, and redraws its line with carriage returns that the CLI's
    # escaping stream (printable.VisibleStream) would show as text.
    bar = tqdm(total=len(tasks), initial=summary.cached, unit="run",
               disable=None if progress else True, desc="tracelab batch",
               file=getattr(sys.stderr, "unescaped", sys.stderr))

    def done(task: Task, result: dict[str, Any]) -> None:
        folder = out / "runs" / task.name
        folder.mkdir(parents=True, exist_ok=True)
        report = result.pop("report_bytes", None)
        if report is not None:
            write_atomic(folder / REPORT_FILE, report)
        write_atomic(folder / RESULT_FILE, json.dumps(result, default=str))
        summary.analyzed += 1
        bar.update(1)

    if scheduler:
        execute = executors.dask_cluster(scheduler, analyze_task, _failed)
    elif (jobs or os.cpu_count() or 1) <= 1 or len(todo) <= 1:
        execute = executors.run_inline(analyze_task)
    else:
        execute = process_pool(min(jobs or os.cpu_count() or 1, len(todo)),
                               reports=reports != "none")
    try:
        execute(todo, done)
    finally:
        bar.close()
    fresh = {t.name for t in todo}
    # The settings that vary across the archive become columns: a first pass finds them.
    settings = varying_settings(_load(t, False)["run"].get("settings") for t in tasks)
    counts = write_outputs(out, (_load(t, t.name not in fresh) for t in tasks),
                           archive=str(archive), settings=settings)
    summary.by_status, summary.by_worst = counts["status"], counts["worst"]
    summary.seconds = time.perf_counter() - started
    return summary


def _load(task: Task, cached: bool) -> dict[str, Any]:
    result = json.loads((task.out / "runs" / task.name / RESULT_FILE).read_text("utf-8"))
    result["run"]["cached"] = cached
    result["run"]["path"] = str(task.source.path)  # where it is now: the archive may have moved
    return result


def _own_folders(out: Path, tasks: list[Task]) -> None:
    """OUT/runs and each run's folder in it as folders of OUT's own: a link there (planted,
    or left by hand) would lead the batch's writes into the archive or elsewhere, so it is
    removed, and the run analyzed again."""
    runs = out / "runs"
    if runs.is_symlink():
        runs.unlink()
    for task in tasks:
        folder = runs / task.name
        if folder.is_symlink():
            folder.unlink()
