"""Output paths that point at what was recorded are refused with one line and exit 2; the
recorded bytes are unchanged afterwards."""
from __future__ import annotations

import os
import stat

import pytest

from _inputs import as_a_user, snapshot, write_csv_log, write_run, write_tensorboard_log
from tracelab.app.cli import main


def _refused(argv, capsys, *roots):
    before = snapshot(*roots)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracelab: error: ") and err.count("\n") == 1, err
    assert "part of the recorded data" in err
    assert snapshot(*roots) == before
    return err


@pytest.mark.parametrize("option", ["--html", "--json", "--markdown"])
def test_analyze_refuses_to_write_over_the_runs_metadata(run_dir, capsys, option):
    extra = ["--no-html"] if option != "--html" else []
    err = _refused(["analyze", str(run_dir), option, str(run_dir / "meta.json"), *extra],
                   capsys, run_dir)
    assert option in err and "meta.json" in err


@pytest.mark.parametrize("option", ["--json", "--markdown"])
def test_a_refused_output_leaves_no_report_written_before_it(run_dir, capsys, option):
    """The report's default path is inside the run: checked first, nothing is written."""
    _refused(["analyze", str(run_dir), option, str(run_dir / "meta.json")], capsys, run_dir)
    assert not (run_dir / "report.html").exists()


def test_two_outputs_on_one_file_are_refused_before_either_is_written(run_dir, tmp_path,
                                                                      capsys):
    out = tmp_path / "out.html"
    assert main(["analyze", str(run_dir), "--html", str(out), "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--html and --json" in err and not out.exists()


def test_part_files_new_rank_files_and_table_folders_are_refused(run_dir, capsys):
    part = next((run_dir / "scalars").glob("r0-*.parquet"))
    for target in (part, run_dir / "scalars" / "r0-000099.parquet", run_dir / "meta.rank3.json",
                   run_dir / "heartbeat.r0", run_dir / "tensors" / "notes.json"):
        _refused(["analyze", str(run_dir), "--no-html", "--json", str(target)], capsys, run_dir)


def test_other_spellings_of_the_same_file_are_refused(run_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(run_dir / "scalars")
    _refused(["analyze", "..", "--html", "../meta.json"], capsys, run_dir)
    link = tmp_path / "innocent.html"
    link.symlink_to(run_dir / "meta.json")
    _refused(["analyze", str(run_dir), "--html", str(link)], capsys, run_dir)
    hard = tmp_path / "hard.json"
    os.link(run_dir / "meta.json", hard)
    _refused(["analyze", str(run_dir), "--no-html", "--json", str(hard)], capsys, run_dir)


def test_the_baseline_is_protected_too(run_dir, tmp_path, capsys):
    good = write_run(tmp_path / "good", seed=1)
    _refused(["analyze", str(run_dir), "--baseline", str(good), "--html",
              str(good / "meta.json")], capsys, run_dir, good)


def test_diff_refuses_either_runs_files(run_dir, tmp_path, capsys):
    good = write_run(tmp_path / "good", seed=1)
    _refused(["diff", str(good), str(run_dir), "--json", str(run_dir / "meta.json")],
             capsys, run_dir, good)
    _refused(["diff", str(good), str(run_dir), "--html", str(good / "meta.json")],
             capsys, run_dir, good)


def test_an_imported_csv_log_is_protected(tmp_path, capsys, monkeypatch):
    log = write_csv_log(tmp_path / "log.csv")
    monkeypatch.chdir(tmp_path)
    _refused(["analyze", str(log), "--html", str(log)], capsys, log)
    _refused(["analyze", str(log), "--no-html", "--json", "log.csv"], capsys, log)


def test_a_tensorboard_logs_event_files_are_protected(tmp_path, capsys):
    pytest.importorskip("torch")
    logdir = tmp_path / "tb"
    events = write_tensorboard_log(logdir)
    _refused(["analyze", str(logdir), "--no-html", "--json", str(events)], capsys, logdir)
    _refused(["analyze", str(logdir), "--no-html", "--json",
              str(logdir / "events.out.tfevents.planted")], capsys, logdir)


def test_writing_next_to_the_trace_is_still_allowed(run_dir, capsys):
    assert main(["analyze", str(run_dir), "--json", str(run_dir / "findings.json"),
                 "--markdown", str(run_dir / "summary.md")]) in (0, 1)
    assert (run_dir / "report.html").is_file() and (run_dir / "findings.json").is_file()
    assert (run_dir / "summary.md").is_file()


def test_unwritable_outputs_of_diff_are_one_line(run_dir, tmp_path, capsys):
    good = write_run(tmp_path / "good", seed=1)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for target in (tmp_path, blocker / "out.json"):
        assert main(["diff", str(good), str(run_dir), "--json", str(target)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("tracelab: error: ") and err.count("\n") == 1, err
    assert blocker.read_text() == "x"


def test_import_onto_a_file_or_the_source_itself_is_one_line(tmp_path, capsys):
    log = write_csv_log(tmp_path / "log.csv")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    before = snapshot(log, blocker)
    for target in (blocker, blocker / "run", log):
        assert main(["import", "csv", str(log), str(target)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("tracelab: error: ") and err.count("\n") == 1, err
    assert snapshot(log, blocker) == before


@pytest.mark.parametrize("argv", [["analyze", "{run}", "--html", "{loop}"],
                                  ["analyze", "{run}", "--json", "{loop}/x.json"],
                                  ["batch", "{archive}", "-o", "{loop}"],
                                  ["diff", "{run}", "{run2}", "--json", "{loop}"]])
def test_an_output_through_a_symlink_loop_is_one_line(run_dir, tmp_path, capsys, argv):
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    run2 = write_run(tmp_path / "archive" / "other")
    before = snapshot(run_dir)
    code = main([a.format(run=run_dir, run2=run2, loop=loop, archive=tmp_path / "archive")
                 for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and "symbolic link loop" in err and err.count("\n") == 1, err
    assert snapshot(run_dir) == before


def test_a_file_where_an_output_needs_a_folder_is_named(run_dir, tmp_path, capsys):
    (tmp_path / "afile").write_text("mine")
    for option, name in (("--html", "r.html"), ("--json", "sub/r.json")):
        assert main(["analyze", str(run_dir), option, str(tmp_path / "afile" / name)]) == 2
        err = capsys.readouterr().err
        assert f"{tmp_path / 'afile'}: is a file, where {option} needs a folder" in err, err
    assert (tmp_path / "afile").read_text() == "mine"



def test_a_run_folder_that_cannot_be_listed_says_so(tmp_path):
    import subprocess
    import sys
    as_user = as_a_user()
    run = write_run(tmp_path / "run")
    run.chmod(0)
    try:
        proc = subprocess.run(as_user + [sys.executable, "-m", "tracelab", "analyze", str(run),
                                         "--no-html"], capture_output=True, text=True,
                              timeout=120)
    finally:
        run.chmod(0o755)
    assert proc.returncode == 2, proc.stderr
    # "cannot be read" where the folder above lets the user in, "cannot be opened" where not
    assert proc.stderr.count("\n") == 1 and "(permission denied)" in proc.stderr, proc.stderr
    assert "not a tracelab run" not in proc.stderr


def test_import_into_a_folder_holding_other_files_is_refused(tmp_path, capsys):
    events = write_tensorboard_log(tmp_path / "log")
    target = tmp_path / "notes"
    target.mkdir()
    (target / "scalars").write_text("mine")  # a name the run would need, too
    before = snapshot(events.parent, target)
    assert main(["import", "tensorboard", str(events.parent), str(target)]) == 2
    err = capsys.readouterr().err
    assert err == (f"tracelab: error: {target}: the folder holds other files; expected a new "
                   "or empty folder for the imported run\n")
    assert snapshot(events.parent, target) == before


@pytest.mark.parametrize("rule, why", [
    (r"--map=train/loss=train/\9", "invalid group reference 9"),
    (r"--map=(?P<a>train)/loss=train/\g<zz>", "unknown group name 'zz'"),
    (r"--hist-map=grads/(.*)=grad:\3", "invalid group reference 3"),
    ("--map=train/loss=train/", "expected SPLIT/NAME or skip")])
def test_a_tag_rule_naming_a_missing_group_is_one_line(tmp_path, capsys, rule, why):
    events = write_tensorboard_log(tmp_path / "log")
    assert main(["import", "tensorboard", str(events.parent), str(tmp_path / "run"), rule]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracelab: error: ") and err.count("\n") == 1 and why in err, err
    assert not (tmp_path / "run").exists()


def test_an_output_onto_a_pipe_or_device_is_refused_and_left_as_it_is(run_dir, tmp_path, capsys):
    # Written through a temporary file renamed over it, a FIFO (or, as root, /dev/null)
    # became a regular file.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for option in ("--json", "--markdown", "--html"):
        extra = ["--no-html"] if option != "--html" else []
        assert main(["analyze", str(run_dir), option, str(fifo), *extra]) == 2
        err = capsys.readouterr().err
        assert err == (f"tracelab: error: {fifo}: is not a regular file (a device, pipe or "
                       f"socket); {option} writes a file, choose a path for one\n")
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert main(["analyze", str(run_dir), "--no-html", "--json", "/dev/null"]) == 2
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


@pytest.mark.parametrize("option, value", [("--json", ""), ("--markdown", ""), ("--html", ""),
                                           ("--markdown", "-"), ("--html", "-")])
def test_an_empty_or_dash_output_path_is_one_line(run_dir, tmp_path, capsys, monkeypatch,
                                                   option, value):
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    assert main(["analyze", str(run_dir), option, value]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tracelab: error: {option} {value!r}: expected the path of a file")
    assert err.count("\n") == 1 and snapshot(tmp_path) == before  # no file named '-' either


def test_an_output_named_like_a_markdown_plot_is_refused_before_anything_is_written(
        run_dir, tmp_path, capsys):
    json_path, md = tmp_path / "j-curves.png", tmp_path / "j.md"
    assert main(["analyze", str(run_dir), "--no-html", "--json", str(json_path),
                 "--markdown", str(md)]) == 2
    err = capsys.readouterr().err
    assert "where --markdown writes its plots (j-*.png)" in err and err.count("\n") == 1, err
    assert not json_path.exists() and not md.exists()


def test_a_tensorboard_file_without_read_permission_is_listed_the_rest_imported(tmp_path):
    import subprocess
    import sys
    from torch.utils.tensorboard import SummaryWriter
    as_user = as_a_user()
    log = tmp_path / "log"
    for part, steps in (("a", range(0, 30)), ("b", range(30, 60))):  # a resumed run's two files
        with SummaryWriter(str(log), filename_suffix=part) as writer:
            for step in steps:
                writer.add_scalar("train/loss", 2.0 / (step + 1), step)
    locked = next(log.glob("events.out.tfevents.*b"))
    locked.chmod(0)
    proc = subprocess.run(as_user + [sys.executable, "-m", "tracelab", "import", "tensorboard",
                                     str(log), str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120)
    locked.chmod(0o644)
    assert proc.returncode == 0, proc.stderr
    assert "imported 30 scalar" in proc.stdout, proc.stdout
    run = __import__("tracelab").open_run(tmp_path / "run")
    assert run.loss().index.tolist() == list(range(30))
    assert run.problems == [f"{locked.name}: unreadable (permission denied)"]


@pytest.mark.parametrize("fmt", ["tensorboard", "mlflow", "wandb", "csv"])
def test_a_source_behind_a_folder_the_user_cannot_enter_is_one_line(tmp_path, fmt):
    import subprocess
    import sys
    closed = tmp_path / "closed"
    (closed / "log").mkdir(parents=True)
    closed.chmod(0)  # not even its owner may enter
    try:
        proc = subprocess.run([*as_a_user(), sys.executable, "-m", "tracelab", "import", fmt,
                               str(closed / "log"), str(tmp_path / "never-written-run")],
                              capture_output=True, text=True, timeout=120)
    finally:
        closed.chmod(0o700)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("tracelab: error: ") and proc.stderr.count("\n") == 1, \
        proc.stderr
    assert "permission denied" in proc.stderr
    assert not (tmp_path / "never-written-run").exists()
