"""Importers read only regular files inside the folder they were given: a FIFO, a link to
/dev/zero or a link out of the log is refused and named, never read (item 4 and 5 of the
importers' issue). Each command runs in a child process with a timeout, so that a reader that
blocks on a FIFO fails its test instead of hanging the suite; the verdict is the output."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from _hostile import csv_log, mlflow_db, mlflow_run, plant, regular_files, tracelab

KINDS = ("fifo", "zero", "outside")
SECRET = "hunter2"


@pytest.fixture
def outside(tmp_path) -> Path:
    """A file beyond every log's folder, which no import may read."""
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(f"{SECRET}: a line that must not reach any output\n")
    return secret


def _analyze(source: Path, tmp_path: Path, *, every_output: bool = False) -> tuple[int, str]:
    """`analyze SOURCE` with its JSON (every_output: its HTML and Markdown too): (exit code,
    all it printed and wrote)."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    pages = ["--html", str(out / "r.html"), "--markdown", str(out / "r.md")] if every_output \
        else ["--no-html"]
    done = tracelab("analyze", str(source), *pages, "--json", str(out / "r.json"), cwd=tmp_path)
    written = "".join(f.read_text(errors="replace") for f in sorted(out.iterdir())
                      if f.suffix in (".html", ".json", ".md"))
    if done.returncode == 2:
        assert done.stderr.startswith("tracelab: error: ") and done.stderr.count("\n") == 1, \
            done.stderr
    else:
        assert done.returncode in (0, 1), done.stderr
        assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout + done.stderr + written


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("part", ["params/env", "tags/mlflow.runName", "metrics/acc"])
def test_mlflow_file_store_skips_and_names_what_is_not_its_own(tmp_path, outside, kind, part):
    run = mlflow_run(tmp_path / "archive")
    plant(run / part, kind, outside)
    before = regular_files(tmp_path / "archive")
    code, said = _analyze(run, tmp_path)
    assert code in (0, 1)
    assert f"not read: {part}: unreadable" in said, said
    assert SECRET not in said
    if part.startswith("tags"):  # the name falls back to meta.yaml's run_name
        assert "sweep-1" in said
    assert regular_files(tmp_path / "archive") == before


def test_a_param_linked_to_the_environment_is_not_the_config(tmp_path):
    if not os.path.exists("/proc/self/environ"):
        pytest.skip("no /proc here")
    run = mlflow_run(tmp_path / "archive")
    (run / "params" / "env").symlink_to("/proc/self/environ")
    code, said = _analyze(run, tmp_path, every_output=True)
    assert code in (0, 1) and SECRET not in said and "SECRET_FROM_THE_ENVIRONMENT" not in said
    assert "not read: params/env: unreadable (a link to a file outside its folder)" in said


@pytest.mark.parametrize("kind", KINDS)
def test_mlflow_meta_yaml_that_is_not_the_runs_is_one_line(tmp_path, outside, kind):
    run = mlflow_run(tmp_path / "archive")
    plant(run / "meta.yaml", kind, outside)
    code, said = _analyze(run, tmp_path)
    assert code == 2 and "meta.yaml: unreadable (" in said and SECRET not in said, said


@pytest.mark.parametrize("kind", KINDS)
def test_mlflow_database_that_is_not_a_regular_file_inside(tmp_path, outside, kind):
    archive = tmp_path / "archive"
    archive.mkdir()
    db = plant(archive / "mlflow.db", kind, outside)
    code, said = _analyze(db, tmp_path)
    assert code == 2 and "mlflow.db" in said and SECRET not in said


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("side", ["-wal", "-journal"])
def test_mlflow_database_side_file_not_its_own_is_left_unread(tmp_path, outside, kind, side):
    archive = tmp_path / "archive"
    archive.mkdir()
    db = mlflow_db(archive / "mlflow.db")
    plant(archive / f"mlflow.db{side}", kind, outside)
    before = regular_files(archive)
    code, said = _analyze(db, tmp_path)
    assert code in (0, 1) and SECRET not in said
    assert f"not read: mlflow.db{side}: unreadable (" in said, said
    assert regular_files(archive) == before


@pytest.mark.parametrize("kind", KINDS)
def test_tensorboard_event_file_that_is_not_the_logs(tmp_path, outside, kind):
    pytest.importorskip("tensorboard")
    from _inputs import write_tensorboard_log
    log = tmp_path / "archive" / "tb"
    write_tensorboard_log(log)
    plant(log / "events.out.tfevents.1.planted", kind, outside)
    before = regular_files(log)
    code, said = _analyze(log, tmp_path)
    assert code in (0, 1)
    assert "not read: events.out.tfevents.1.planted: unreadable" in said, said
    assert SECRET not in said
    assert regular_files(log) == before


@pytest.mark.parametrize("kind", KINDS)
def test_wandb_run_file_that_is_not_a_regular_file_inside(tmp_path, outside, kind):
    folder = tmp_path / "archive" / "wandb" / "offline-run-20240101_000000-abc123"
    file = plant(folder / "run-abc123.wandb", kind, outside)
    code, said = _analyze(folder if kind == "outside" else file, tmp_path)
    assert "run-abc123.wandb" in said and SECRET not in said, said
    if code != 2:  # a link is found as the folder's run file, and refused
        assert "not read: run-abc123.wandb: unreadable" in said


@pytest.mark.parametrize("kind", KINDS)
def test_csv_log_that_is_not_a_regular_file_inside(tmp_path, outside, kind):
    log = csv_log(tmp_path / "archive" / "version_0")
    plant(log, kind, outside)
    code, said = _analyze(log, tmp_path)
    assert code == 2 and "metrics.csv" in said and SECRET not in said, said


@pytest.mark.parametrize("kind", KINDS)
def test_lightning_hparams_that_is_not_a_regular_file_inside(tmp_path, outside, kind):
    log = csv_log(tmp_path / "archive" / "version_0")
    plant(log.parent / "hparams.yaml", kind, outside)
    before = regular_files(log.parent)
    code, said = _analyze(log, tmp_path)
    assert code in (0, 1)
    assert "not read: hparams.yaml: not read as the run's config" in said, said
    assert SECRET not in said
    assert regular_files(log.parent) == before


def test_batch_over_an_archive_with_a_fifo_in_each_format_ends(tmp_path, outside):
    archive = tmp_path / "archive"
    run = mlflow_run(archive / "mlflow")
    plant(run / "params" / "env", "fifo", outside)
    plant(run / "tags" / "note", "outside", outside)
    log = csv_log(archive / "csv" / "version_0")
    plant(log.parent / "hparams.yaml", "fifo", outside)
    (archive / "db").mkdir()
    mlflow_db(archive / "db" / "mlflow.db")
    plant(archive / "wandb" / "offline-run-x-abc" / "run-abc.wandb", "fifo", outside)
    before = regular_files(archive)
    done = tracelab("batch", str(archive), "--out", str(tmp_path / "out"), "--reports",
                    "none", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    written = regular_files(tmp_path / "out")
    assert written and not any(SECRET.encode() in data for data in written.values())
    assert regular_files(archive) == before


def test_import_into_a_folder_beside_a_fifo_meta_json_ends(tmp_path, outside):
    log = csv_log(tmp_path / "archive" / "version_0")
    parent = tmp_path / "runs"
    plant(parent / "meta.json", "fifo", outside)  # is `runs` a run? asked without blocking
    done = tracelab("import", "csv", str(log), str(parent / "imported"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (parent / "imported" / "meta.json").is_file()


def test_open_inside_follows_links_only_within_the_folder(tmp_path, outside):
    from tracelab.core.files import open_inside, read_inside
    folder = tmp_path / "log"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "data").write_bytes(b"12345")
    (folder / "inner").symlink_to(folder / "sub" / "data")
    assert read_inside(folder / "inner", folder) == b"12345"
    assert read_inside(folder / "sub" / "data", folder / "sub", limit=5) == b"12345"
    with pytest.raises(OSError, match="larger than 4 bytes"):
        read_inside(folder / "sub" / "data", folder, limit=4)
    (folder / "sub" / "up").symlink_to(outside)
    with pytest.raises(OSError, match="a link to a file outside its folder"):
        open_inside(folder / "sub" / "up", folder)
    (folder / "top").write_bytes(b"top")
    (folder / "sub" / "sideways").symlink_to(Path("..") / "top")
    assert read_inside(folder / "sub" / "sideways", folder) == b"top"
    with pytest.raises(OSError, match="a link to a file outside its folder"):
        open_inside(folder / "sub" / "sideways", folder / "sub")
    # A FIFO is left to the tests above, in a child process: one that blocked would hang here.
    with pytest.raises(OSError, match="a link to a file outside its folder"):
        open_inside(plant(folder / "zero", "zero", outside), folder)
    with pytest.raises(OSError, match="not a regular file"):
        open_inside(folder / "sub", folder)  # a folder inside: no file
