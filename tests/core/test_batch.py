"""`tracelab batch` over a mixed archive: native, crashed, killed, TensorBoard, CSV, corrupt."""
import json
import os
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from tracelab.app.batch import run_batch, safe_name
from tracelab.app.cli import main
from tracelab.core.config import Config

sys.path.insert(0, str(Path(__file__).parent))
from _archive_runs import csv_log, killed_run, tensorboard_log, train_run, tree_state  # noqa

EXPECTED = {
    "team-a/ok-1": "completed", "team-a/ok-2": "completed", "team-a/crashed": "failed",
    "team-a/bad-part": "completed", "team-b/killed": "killed", "team-b/tb/exp1": "completed",
    "team-b/lightning_logs/version_0": "completed", "broken/corrupt": "unreadable",
    "broken/no-meta": "unreadable",
}
VOLATILE = ["analyzed_at", "analysis_s", "cached"]


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    root = tmp_path_factory.mktemp("archive")
    train_run(root / "team-a" / "ok-1", seed=0)
    shutil.copytree(root / "team-a" / "ok-1", root / "team-a" / "ok-2")
    train_run(root / "team-a" / "crashed", seed=2, fail_at=15)
    shutil.copytree(root / "team-a" / "ok-1", root / "team-a" / "bad-part")
    (root / "team-a" / "bad-part" / "scalars" / "r0-000099.parquet").write_bytes(b"PAR1 junk")
    killed_run(root / "team-b" / "killed")
    tensorboard_log(root / "team-b" / "tb" / "exp1", steps=12)
    csv_log(root / "team-b" / "lightning_logs" / "version_0")
    (root / "broken" / "corrupt").mkdir(parents=True)
    (root / "broken" / "corrupt" / "meta.json").write_text("{not json")
    shutil.copytree(root / "team-a" / "ok-1" / "scalars", root / "broken" / "no-meta" / "scalars")
    (root / "notes").mkdir()
    (root / "notes" / "README.txt").write_text("not a run")
    shutil.copytree(root / "team-a" / "ok-1", root / ".trash" / "old")  # hidden: skipped
    return root


@pytest.fixture(scope="module")
def batch(archive, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "triage"
    before = tree_state(archive)
    # Reports only where a triage looks first: they cost 10x their analysis.
    result = run_batch(archive, out, jobs=2, reports="findings", progress=False)
    return {"out": out, "result": result, "before": before}


def _runs(out):
    return pd.read_parquet(out / "runs.parquet").set_index("run")


def test_every_run_is_accounted_for(batch):
    runs = _runs(batch["out"])
    assert runs["status"].to_dict() == EXPECTED
    assert batch["result"].total == len(EXPECTED) == batch["result"].analyzed
    assert runs.loc["team-b/tb/exp1", "format"] == "tensorboard"
    assert runs.loc["team-b/lightning_logs/version_0", "format"] == "csv"
    assert "meta.json: unreadable" in runs.loc["broken/corrupt", "detail"]
    assert "no meta.json" in runs.loc["broken/no-meta", "detail"]
    assert "RuntimeError: CUDA out of memory" in runs.loc["team-a/crashed", "detail"]
    assert runs.loc["team-b/killed", "detail"] == "killed after step 19"
    assert list(runs.loc["team-a/bad-part", "problems"]) == [
        "scalars/r0-000099.parquet: unreadable (ArrowInvalid), skipped; expected a whole Parquet "
        "file of this table (it was cut short, damaged or written by something else)"]
    assert runs.loc["team-a/ok-1", "last_step"] == 39


def test_findings_and_reports(batch):
    out = batch["out"]
    findings = pd.read_parquet(out / "findings.parquet")
    aborted = findings[findings["code"] == "TL107"]
    assert sorted(aborted["run"]) == ["team-a/crashed", "team-b/killed"]
    assert set(aborted["severity"]) == {"error"}
    assert all(isinstance(json.loads(e), dict) for e in findings["evidence"])
    runs = _runs(out)
    assert runs.loc["team-a/crashed", "worst"] == "error"
    assert runs.loc["team-a/crashed", "rule_counts"] == [("TL107", 1)]
    reported = runs["report"].dropna()
    assert sorted(reported.index) == ["team-a/crashed", "team-b/killed"]
    assert all((out / report).is_file() for report in reported)
    assert runs.loc["team-b/tb/exp1", "n_skipped"] > 0  # rules the import cannot feed


def test_findings_mark_root_causes_and_runs_name_theirs(batch):
    out = batch["out"]
    findings = pd.read_parquet(out / "findings.parquet")
    assert findings["id"].notna().all()
    assert not findings.duplicated(["run", "id"]).any()
    roots = findings[findings["root_cause"]]
    # Every finding belongs to a diagnosis whose root cause is a finding of the same run.
    known = set(zip(roots["run"], roots["id"]))
    assert all((r, d) in known for r, d in zip(findings["run"], findings["diagnosis"]))
    assert (roots["id"] == roots["diagnosis"]).all()
    runs = _runs(out)
    crashed = runs.loc["team-a/crashed"]
    assert crashed["root_cause_rule"] == "run-aborted" and crashed["n_diagnoses"] >= 1
    first = findings[(findings["run"] == "team-a/crashed") & (findings["diagnosis_rank"] == 1)
                     & findings["root_cause"]]
    assert list(first["id"]) == [crashed["root_cause"]]
    assert crashed["root_cause_fix"] == first["fix"].iloc[0]
    assert pd.isna(runs.loc["broken/corrupt", "root_cause"])
    page = (out / "index.html").read_text()
    assert '<span class="rule">run-aborted</span>' in page


def test_the_archive_is_never_written(archive, batch):
    assert tree_state(archive) == batch["before"]


class _Rows(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self.links, self.scripts = 0, [], 0
        self._body = False

    def handle_starttag(self, tag, attrs):
        self._body |= tag == "tbody"
        self.rows += tag == "tr" and self._body
        self.scripts += tag == "script"
        if tag == "a" and self._body:
            self.links.append(dict(attrs)["href"])
        if tag == "script":
            assert "src" not in dict(attrs)  # no external script


def test_index_lists_and_links_every_run(batch):
    out = batch["out"]
    page = (out / "index.html").read_text()
    parser = _Rows()
    parser.feed(page)
    assert parser.rows == len(EXPECTED)
    for run in EXPECTED:
        assert run in page
    assert len(parser.links) == 2  # the runs with a report
    assert all((out / link).is_file() for link in parser.links)
    assert parser.scripts == 1 and "aria-sort" in page
    assert 'title="run-aborted">TL107' in page


def test_reruns_are_incremental(archive, batch, tmp_path):
    out = tmp_path / "triage"
    shutil.copytree(batch["out"], out)
    again = run_batch(archive, out, jobs=1, reports="findings", progress=False)
    # Each run again that could not be read whole (bad-part, and the two unreadable ones):
    # what keeps it from being read may change without its files' sizes and times.
    again_read = {"team-a/bad-part", "broken/corrupt", "broken/no-meta"}
    assert (again.analyzed, again.cached) == (3, len(EXPECTED) - 3)
    assert _runs(out)["cached"].to_dict() == {r: r not in again_read for r in EXPECTED}
    timing = ["cached", "analysis_s", "analyzed_at"]  # the runs read again: their own time
    assert _runs(out).drop(columns=timing).equals(_runs(batch["out"]).drop(columns=timing))
    # The rest on one team's folder, without reports, to stay quick.
    team, out = archive / "team-a", tmp_path / "team-a"
    assert run_batch(team, out, jobs=1, reports="none", progress=False).analyzed == 4
    meta = team / "ok-2" / "meta.json"
    stat = meta.stat()
    os.utime(meta, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    try:
        assert run_batch(team, out, jobs=1, reports="none", progress=False).analyzed == 2
        assert _runs(out)["cached"].to_dict() == {
            "ok-1": True, "ok-2": False, "crashed": True, "bad-part": False}
    finally:
        os.utime(meta, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    ignore = Config(ignore=["TL107"])
    changed = run_batch(team, out, jobs=1, reports="none", progress=False, config=ignore)
    assert changed.analyzed == 4
    assert "TL107" not in set(pd.read_parquet(out / "findings.parquet")["code"])
    assert run_batch(team, out, jobs=1, reports="none", progress=False,
                     config=ignore).analyzed == 1  # bad-part
    good = json.loads((out / "runs" / "ok-1" / "result.json").read_text())
    wrong = [json.dumps({**good, "findings": "x"}),
             json.dumps({**good, "findings": [1]}),
             json.dumps({**good, "run": {**good["run"], "settings": 5}})]
    for damaged in ["[1]", '{"key": 1, "run": 2}', "{"] + wrong:  # edited by hand, or cut
        (out / "runs" / "ok-1" / "result.json").write_text(damaged)
        assert run_batch(team, out, jobs=1, reports="none", progress=False,
                         config=ignore).analyzed == 2  # ok-1 and bad-part
    quick = archive / "broken"
    assert run_batch(quick, tmp_path / "q", jobs=1, reports="none", progress=False).analyzed == 2
    assert run_batch(quick, tmp_path / "q", jobs=1, reports="none", progress=False,
                     force=True).analyzed == 2
    assert run_batch(quick, tmp_path / "q", jobs=1, reports="findings",
                     progress=False).analyzed == 2  # another report mode


def test_dask_cluster_gives_the_local_results(archive, batch, tmp_path):
    distributed = pytest.importorskip("distributed")
    team = archive / "team-b"  # killed, TensorBoard and CSV runs: reports travel back too
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        remote = run_batch(team, tmp_path / "remote", scheduler=cluster.scheduler_address,
                           reports="findings", progress=False)
    assert remote.analyzed == 3
    # config.KEY columns are the settings that vary across the batch's own archive.
    by_path = lambda df: df.reset_index().drop(columns=VOLATILE + ["run", "name", "report"] + [
        c for c in df if c.startswith("config.")]).set_index("path").sort_index()  # noqa: E731
    local = _runs(batch["out"])
    local = local[local["path"].str.startswith(str(team))]
    remote_runs = _runs(tmp_path / "remote")
    pd.testing.assert_frame_equal(by_path(local), by_path(remote_runs), check_dtype=False)
    findings = [pd.read_parquet(o / "findings.parquet").drop(columns=["run", "name"])
                for o in (batch["out"], tmp_path / "remote")]
    findings[0] = findings[0][findings[0]["message"].isin(findings[1]["message"])]
    pd.testing.assert_frame_equal(findings[0].reset_index(drop=True), findings[1])
    assert len(findings[1]) >= 1  # the killed run's run-aborted finding at least
    for report in remote_runs["report"].dropna():
        assert (tmp_path / "remote" / report).is_file()


def test_documented_duckdb_query(batch):
    duckdb = pytest.importorskip("duckdb")
    doc = (Path(__file__).parents[2] / "docs" / "archive.md").read_text()
    query = re.search(r"```sql\n(.*?)```", doc, re.S).group(1)
    rows = duckdb.sql(query.replace("triage/", f"{batch['out']}/")).fetchall()
    by_code = {code: (rule, findings, runs, errors) for code, rule, findings, runs, errors in rows}
    assert by_code["TL107"] == ("run-aborted", 2, 2, 2)
    spark_style = duckdb.sql(f"SELECT run, rule_counts['TL107'] AS n FROM "
                             f"'{batch['out']}/runs.parquet' WHERE status = 'failed'").fetchall()
    assert spark_style == [("team-a/crashed", 1)]


def test_cli_batch_reports_every_run_by_default(archive, tmp_path, capsys):
    out = tmp_path / "cli-out"
    assert main(["batch", str(archive / "team-b"), "-o", str(out), "--jobs", "1"]) == 0
    text = capsys.readouterr().out
    assert "3 runs (2 completed, 1 killed)" in text and "1 error, 2 clean" in text
    assert f"index: {out / 'index.html'}" in text
    runs = _runs(out)
    assert all((out / report).is_file() for report in runs["report"]) and len(runs) == 3
    parser = _Rows()
    parser.feed((out / "index.html").read_text())
    assert sorted(parser.links) == sorted(runs["report"])
    assert main(["batch", str(tmp_path / "nowhere")]) == 2
    assert "no such directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["batch", str(tmp_path / "empty"), "-o", str(tmp_path / "o2")]) == 2
    assert "no runs found" in capsys.readouterr().err
    assert main(["batch", str(archive), "--jobs", "0"]) == 2


def test_safe_names_are_unique_and_readable():
    assert safe_name("exp1") == "exp1"
    names = {safe_name(p) for p in ("a/b", "a__b", "a b", "a_b", "a/b/", "../x")}
    assert len(names) == 6
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", n) for n in names)


def test_a_dying_worker_costs_only_its_own_run(archive, tmp_path):
    from _dying_worker import die_on_ok2
    from tracelab.app.batch import plan, process_pool
    quick = {"team-a/ok-2", "broken/corrupt", "broken/no-meta",
             "team-b/lightning_logs/version_0"}
    tasks = [t for t in plan(archive, tmp_path, Config(), reports="none") if t.rel in quick]
    results = {}
    process_pool(2, die_on_ok2, reports=False)(
        tasks, lambda task, result: results.update({task.rel: result}))
    statuses = {rel: r["run"]["status"] for rel, r in results.items()}
    assert statuses == {**{r: EXPECTED[r] for r in quick}, "team-a/ok-2": "unreadable"}
    assert "the analysis process died" in results["team-a/ok-2"]["run"]["detail"]
    assert not results["team-a/ok-2"]["cacheable"]


def test_a_folder_that_cannot_be_listed_is_said_not_left_out(archive, tmp_path, capsys,
                                                              monkeypatch):
    team = tmp_path / "team"
    shutil.copytree(archive / "team-a" / "ok-1", team / "ok-1")
    shutil.copytree(archive / "team-a" / "ok-1", team / "locked" / "r2")
    real = os.scandir

    def scandir(path="."):  # as a folder without read permission answers a user not root
        if not isinstance(path, int) and Path(path) == team / "locked":  # rmtree gives fds
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert main(["batch", str(team), "-o", str(tmp_path / "out"), "--reports", "none"]) == 0
    out = capsys.readouterr().out
    assert "1 runs" in out
    assert f"not searched for runs, unreadable: {team / 'locked'} (permission denied)" in out
    assert main(["batch", str(team / "ok-1" / "meta.json"), "-o", str(tmp_path / "o2")]) == 2
    assert "meta.json: a file; expected a directory holding runs" in capsys.readouterr().err
    # Its only run behind the locked folder: not "no runs" alone, but where they may be.
    shutil.rmtree(team / "ok-1")
    assert main(["batch", str(team), "-o", str(tmp_path / "o3")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"no runs found (tracelab runs, TensorBoard logs, metrics.csv files, "
                        f"MLflow runs or databases, W&B runs); not searched, unreadable: "
                        f"{team / 'locked'} (permission denied)"), err


def test_a_deep_path_or_a_name_that_is_not_utf8_names_a_folder_of_its_own():
    deep = "team/" + "y" * 150 + "/" + "z" * 150
    assert len(safe_name(deep)) < 140 and safe_name(deep).endswith("z" * 50 + "-" + safe_name(
        deep)[-8:])
    assert safe_name(deep) != safe_name(deep.replace("team", "other"))
    odd = os.fsdecode(b"bad\xff")  # as Python holds a name that is not UTF-8
    assert re.fullmatch(r"[A-Za-z0-9._-]+", safe_name(odd))


def _small_archive(root: Path) -> Path:
    csv_log(root / "ok" / "version_0")
    csv_log(root / "team" / ("y" * 150) / ("z" * 150))
    csv_log(root / os.fsdecode(b"bad\xff"))
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "metrics.csv")  # read, it would block the batch forever
    (root / "folder" / "metrics.csv").mkdir(parents=True)
    return root


def test_odd_runs_and_odd_output_names_do_not_stop_the_batch(tmp_path):
    archive = _small_archive(tmp_path / "archive")
    before = tree_state(archive)
    out = tmp_path / os.fsdecode(b"out\xff")
    result = run_batch(archive, out, jobs=1, reports="none", progress=False)
    assert result.total == 3 and tree_state(archive) == before
    with open(out / "runs.parquet", "rb") as f:
        runs = pd.read_parquet(f)
    assert sorted(runs["status"]) == ["completed"] * 3


def test_links_in_an_earlier_output_never_lead_the_batch_into_the_archive(tmp_path):
    archive = _small_archive(tmp_path / "archive")
    out = tmp_path / "out"
    run_batch(archive, out, jobs=1, reports="all", progress=False)
    before = tree_state(archive)
    target = out / "runs" / safe_name("ok/version_0")
    shutil.rmtree(target)
    target.symlink_to(archive / "ok" / "version_0")  # planted, or left there by hand
    result = run_batch(archive, out, jobs=1, reports="all", progress=False, force=True)
    assert result.analyzed == 3 and tree_state(archive) == before
    assert not target.is_symlink() and (target / "report.html").is_file()


def test_no_output_inside_a_csv_run(tmp_path, capsys):
    archive = _small_archive(tmp_path / "archive")
    before = tree_state(archive)
    assert main(["batch", str(archive), "-o", str(archive / "ok" / "version_0" / "sub")]) == 2
    assert "inside the run" in capsys.readouterr().err and tree_state(archive) == before


def test_a_run_that_could_not_be_read_is_read_again_next_time(tmp_path):
    # Fixed without its size or time changing (a permission granted, a byte put back): the
    # key sees nothing, so an unreadable result must not be kept.
    archive = tmp_path / "archive"
    log = csv_log(archive / "ok" / "version_0")
    good = log.read_bytes()
    log.write_bytes(b"\xff" * len(good))
    stat = log.stat()
    out = tmp_path / "out"
    first = run_batch(archive, out, jobs=1, reports="none", progress=False)
    assert first.by_status == {"unreadable": 1}
    log.write_bytes(good)
    os.utime(log, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    second = run_batch(archive, out, jobs=1, reports="none", progress=False)
    assert (second.analyzed, second.cached) == (1, 0) and second.by_status == {"completed": 1}
    # A run moved with its archive keeps its cached result, at its new path.
    archive.rename(tmp_path / "moved")
    third = run_batch(tmp_path / "moved", out, jobs=1, reports="none", progress=False)
    assert third.cached == 1
    assert pd.read_parquet(out / "runs.parquet")["path"].tolist() == [
        str(tmp_path / "moved" / "ok" / "version_0" / "metrics.csv")]


def test_a_log_of_which_nothing_could_be_read_is_unreadable_not_completed(tmp_path):
    archive = tmp_path / "archive"
    tensorboard_log(archive / "tb" / "good", steps=12)
    (archive / "tb" / "garbage").mkdir(parents=True)
    (archive / "tb" / "garbage" / "events.out.tfevents.1.host").write_bytes(bytes(range(256)) * 8)
    out = tmp_path / "out"
    run_batch(archive, out, jobs=1, reports="none", progress=False)
    runs = _runs(out)
    assert runs.loc["tb/good", "status"] == "completed"
    assert runs.loc["tb/garbage", "status"] == "unreadable"
    assert runs.loc["tb/garbage", "detail"].startswith("no recorded steps could be read (")
