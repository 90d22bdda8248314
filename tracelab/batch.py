"""Batch analysis of an archive of runs: `tracelab batch ARCHIVE [-o OUT] [--jobs N]`.

Every run under ARCHIVE (tracelab runs, TensorBoard logs, CSV logs) is analyzed by the same
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
from tracelab.config import Config
from tracelab.errors import ConfigError, TraceError, TracelabError
from tracelab.sources import Source, data_files, discover, open_source

RESULT_FILE = "result.json"
REPORT_FILE = "report.html"
UNREADABLE = "unreadable"
REPORTS = ("all", "findings", "none")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


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

    @property
    def index(self) -> Path:
        return self.out / "index.html"


# -- naming and caching ---------------------------------------------------------------------
def safe_name(rel: str) -> str:
    """A directory name for a run's outputs: readable, and unique for distinct paths."""
    flat = _UNSAFE.sub("_", rel.replace("/", "__")).strip("._") or "run"
    if flat != rel:
        flat += "-" + hashlib.sha1(rel.encode()).hexdigest()[:8]
    return flat


def config_digest(config: Config, reports: str) -> str:
    from tracelab.engine import all_rules
    rules = sorted((s.code, s.name, sorted(s.thresholds().items(), key=str))
                   for s in all_rules())
    payload = {"version": __version__, "select": config.select, "ignore": config.ignore,
               "rules_config": config.rules, "rules": rules, "reports": reports}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def fingerprint(source: Source) -> str:
    """Sizes and modification times of the files a run's analysis reads."""
    h = hashlib.sha256(source.format.encode())
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
    if result.get("key") != task.key or not result.get("cacheable"):
        return None
    report = result["run"].get("report")
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
        return f"killed after step {status.get('last_step')}"
    return None


def _row(task: Task, detail: Optional[str] = None) -> dict[str, Any]:
    return {
        "run": task.rel, "name": task.name, "format": task.source.format,
        "path": str(task.source.path), "status": UNREADABLE, "detail": detail,
        "first_step": None, "last_step": None, "worst": None, "n_error": 0, "n_warning": 0,
        "n_info": 0, "n_rule_errors": 0, "n_skipped": 0, "rule_counts": {}, "recorded": [],
        "problems": [], "report": None, "start_time": None, "end_time": None,
        "analysis_s": None, "tracelab_version": __version__, "analyzed_at": time.time(),
        "cache_key": task.key,
    }


def analyze_task(task: Task) -> dict[str, Any]:
    """Analyze one run; never raises for a bad run (only for a bad configuration)."""
    from tracelab.engine import analyze
    started = time.perf_counter()
    row = _row(task)
    findings: list[dict[str, Any]] = []
    result: dict[str, Any] = {"key": task.key, "cacheable": True, "run": row,
                              "findings": findings}
    try:
        run = open_source(task.source)
        summary = run.summary()
        status = run.status
        row.update(status=status.get("state") or "unknown", detail=_status_detail(status),
                   recorded=summary["recorded"], problems=summary["problems"],
                   start_time=summary["start_time"], end_time=summary["end_time"])
        row["first_step"], row["last_step"] = summary["steps"]
        result["cacheable"] = row["status"] != "running"
        if run.is_empty:
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
    row["analysis_s"] = round(time.perf_counter() - started, 4)
    return result


def _fill(row: dict[str, Any], findings: list, diagnosis, task: Task) -> None:
    counts = diagnosis.counts()
    row.update(worst=diagnosis.worst.value if diagnosis.worst else None,
               n_error=counts["error"], n_warning=counts["warning"], n_info=counts["info"],
               n_rule_errors=len(diagnosis.errors), n_skipped=len(diagnosis.skipped))
    per_rule: dict[str, int] = {}
    for f in diagnosis.findings:
        per_rule[f.code] = per_rule.get(f.code, 0) + 1
        first, last = f.steps or (None, None)
        findings.append({"run": task.rel, "name": task.name, "rule": f.rule, "code": f.code,
                         "severity": f.severity.value, "subject": f.subject,
                         "first_step": first, "last_step": last, "message": f.message,
                         "fix": f.fix, "evidence": json.dumps(dict(f.evidence), default=str,
                                                              sort_keys=True)})
    row["rule_counts"] = per_rule
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


# -- executors ------------------------------------------------------------------------------
Executor = Callable[[list[Task], Callable[[Task, dict], None]], None]
_IN_FLIGHT_PER_WORKER = 2


def _failed(task: Task, why: str) -> dict[str, Any]:
    return {"key": task.key, "cacheable": False, "findings": [], "run": _row(task, why)}


def run_inline(tasks: list[Task], done: Callable[[Task, dict], None]) -> None:
    for task in tasks:
        done(task, analyze_task(task))


def _one_thread() -> None:
    # The pool already uses every core; Arrow's own thread pool would only contend with it.
    import pyarrow
    pyarrow.set_cpu_count(1)


def process_pool(jobs: int, worker: Optional[Callable[[Task], dict]] = None, *,
                 reports: bool = True) -> Executor:
    """A local pool of `jobs` processes running `worker` (default: analyze_task)."""
    worker = worker or analyze_task
    preload = ["tracelab.batch", "tracelab.engine", "tracelab.analyzers"] + (
        ["tracelab.reports"] if reports else [])

    def execute(tasks: list[Task], done: Callable[[Task, dict], None]) -> None:
        import multiprocessing as mp
        from collections import deque
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
        from concurrent.futures.process import BrokenProcessPool
        ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods()
                             else "spawn")
        if ctx.get_start_method() == "forkserver":
            # Workers fork from a server that imported these once: a new worker is cheap.
            ctx.set_forkserver_preload(preload)
        # A dead worker (a crash, the OOM killer) breaks the whole pool. The tasks it held
        # become suspects and run again one at a time in a fresh pool: one that breaks it
        # alone is reported, and the innocent ones get their results.
        queue, suspects = deque(tasks), deque()
        while queue or suspects:
            pool = ProcessPoolExecutor(jobs, mp_context=ctx, max_tasks_per_child=200,
                                       initializer=_one_thread)
            running: dict = {}
            try:
                while queue or suspects or running:
                    if suspects and not running:
                        task = suspects.popleft()
                        running[pool.submit(worker, task)] = (task, True)
                    while queue and not suspects and len(running) < jobs * _IN_FLIGHT_PER_WORKER:
                        task = queue.popleft()
                        running[pool.submit(worker, task)] = (task, False)
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    if any(isinstance(f.exception(), BrokenProcessPool) for f in finished):
                        wait(running)
                        for future, (task, alone) in running.items():
                            if not isinstance(future.exception(), BrokenProcessPool):
                                done(task, future.result())
                            elif alone:
                                done(task, _failed(task, "the analysis process died (a crash "
                                                         "or out of memory)"))
                            else:
                                suspects.append(task)
                        break
                    for future in finished:
                        task, _ = running.pop(future)
                        done(task, future.result())
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
    return execute


def dask_cluster(address: str) -> Executor:
    def execute(tasks: list[Task], done: Callable[[Task, dict], None]) -> None:
        try:
            from distributed import Client, as_completed
        except ImportError:
            raise ConfigError("--scheduler needs dask.distributed: pip install "
                              "'tracelab[dask]'") from None
        try:
            client = Client(address, timeout="20s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise ConfigError(f"--scheduler {address}: cannot connect ({exc})") from None
        try:
            window = max(2, sum(client.nthreads().values())) * _IN_FLIGHT_PER_WORKER
            pending = iter(tasks)
            futures = as_completed()
            owner = {}
            for task in pending:
                future = client.submit(analyze_task, task, pure=False)
                owner[future.key] = task
                futures.add(future)
                if futures.count() >= window:
                    break
            for future in futures:
                task = owner.pop(future.key)
                try:
                    done(task, future.result())
                except ConfigError:
                    raise
                except Exception as exc:  # a lost worker, KilledWorker, a broken environment
                    done(task, _failed(task, f"the analysis failed on the cluster "
                                             f"({type(exc).__name__}: {exc})"))
                future.release()
                nxt = next(pending, None)
                if nxt is not None:
                    new = client.submit(analyze_task, nxt, pure=False)
                    owner[new.key] = nxt
                    futures.add(new)
        finally:
            client.close()
    return execute


# -- the batch ------------------------------------------------------------------------------
def plan(archive: Path, out: Path, config: Config, *, reports: str = "all",
         remote: bool = False) -> list[Task]:
    sources = discover(archive, exclude=[out])
    digest = config_digest(config, reports)
    tasks = []
    for source in sources:
        rel = source.path.relative_to(archive).as_posix()
        if source.format == "csv" and source.path.name == "metrics.csv":
            rel = source.path.parent.relative_to(archive).as_posix()
        if rel == ".":
            rel = archive.name or "run"
        key = hashlib.sha256(f"{digest}\0{fingerprint(source)}".encode()).hexdigest()
        tasks.append(Task(source, rel, safe_name(rel), key, out, config, reports, remote))
    return tasks


def run_batch(archive: str | os.PathLike, out: str | os.PathLike = "tracelab-batch", *,
              jobs: Optional[int] = None, scheduler: Optional[str] = None,
              config: Optional[Config] = None, reports: str = "all", force: bool = False,
              progress: bool = True) -> BatchResult:
    """Analyze every run under `archive` into `out`; see the module docstring."""
    from tqdm import tqdm
    from tracelab.reports.batch_index import write_outputs
    archive, out = Path(archive).resolve(), Path(out).resolve()
    if reports not in REPORTS:
        raise ConfigError(f"reports={reports!r}: expected one of {', '.join(REPORTS)}")
    if not archive.is_dir():
        raise TraceError(f"{archive}: no such directory; expected an archive of runs")
    config = config or Config()
    started = time.perf_counter()
    tasks = plan(archive, out, config, reports=reports, remote=scheduler is not None)
    if not tasks:
        raise TraceError(f"{archive}: no runs found (tracelab runs, TensorBoard logs or "
                         "metrics.csv files)")
    out.mkdir(parents=True, exist_ok=True)
    summary = BatchResult(out=out, total=len(tasks))
    todo = []
    for task in tasks:
        if not force and _cached(task) is not None:
            summary.cached += 1
        else:
            todo.append(task)
    bar = tqdm(total=len(tasks), initial=summary.cached, unit="run",
               disable=None if progress else True,
               desc="tracelab batch", file=sys.stderr)

    def done(task: Task, result: dict[str, Any]) -> None:
        folder = out / "runs" / task.name
        folder.mkdir(parents=True, exist_ok=True)
        report = result.pop("report_bytes", None)
        if report is not None:
            (folder / REPORT_FILE).write_bytes(report)
        tmp = folder / (RESULT_FILE + ".tmp")
        tmp.write_text(json.dumps(result, default=str), encoding="utf-8")
        os.replace(tmp, folder / RESULT_FILE)
        summary.analyzed += 1
        bar.update(1)

    if scheduler:
        execute = dask_cluster(scheduler)
    elif (jobs or os.cpu_count() or 1) <= 1 or len(todo) <= 1:
        execute = run_inline
    else:
        execute = process_pool(min(jobs or os.cpu_count() or 1, len(todo)),
                               reports=reports != "none")
    try:
        execute(todo, done)
    finally:
        bar.close()
    fresh = {t.name for t in todo}
    counts = write_outputs(out, (_load(t, t.name not in fresh) for t in tasks),
                           archive=str(archive))
    summary.by_status, summary.by_worst = counts["status"], counts["worst"]
    summary.seconds = time.perf_counter() - started
    return summary


def _load(task: Task, cached: bool) -> dict[str, Any]:
    result = json.loads((task.out / "runs" / task.name / RESULT_FILE).read_text("utf-8"))
    result["run"]["cached"] = cached
    return result
