"""Malformed and awkward inputs: one line naming the file or field, exit 2, never a traceback;
and the inputs' bytes unchanged."""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _inputs import as_a_user, snapshot, write_csv_log, write_run, write_tensorboard_log
from tracelab.app.cli import main
from tracelab.app.sources import open_any


def _one_line(argv, capsys, *roots, code=2, says=""):
    before = snapshot(*roots)
    assert main(argv) == code
    captured = capsys.readouterr()
    assert snapshot(*roots) == before
    if code == 2:
        assert captured.err.startswith("tracelab: error: ") and captured.err.count("\n") == 1, \
            captured.err
        assert says in captured.err, captured.err
    return captured


@pytest.mark.parametrize("field, value", [
    ("status", "completed"), ("status", ["completed"]), ("status", {"state": 5}),
    ("start_time", "yesterday"), ("end_time", "2024-01-01"), ("environment", "linux"),
    ("model", []), ("optimizer", 3), ("recorder", "defaults"), ("config", [1, 2])])
def test_malformed_meta_fields(run_dir, capsys, field, value):
    meta = json.loads((run_dir / "meta.json").read_text())
    meta[field] = value
    (run_dir / "meta.json").write_text(json.dumps(meta))
    name = "status.state" if field == "status" and isinstance(value, dict) else field
    _one_line(["analyze", str(run_dir)], capsys, run_dir, says=f"meta.json: field '{name}'")


@pytest.mark.parametrize("edit, name", [
    (lambda m: m["recorder"].update(cost="y"), "recorder.cost"),
    (lambda m: m.update(optimizer={"type": 7}), "optimizer.type"),
    (lambda m: m.update(start_time=10 ** 400), "start_time"),
    (lambda m: m.update(model={"modules": "x"}), "model.modules"),
    (lambda m: m.update(model={"parameters": [{"name": "a"}, {"name": 5}]}),
     "model.parameters[1].name"),
    (lambda m: m.update(model={"parameters": [{"name": "a", "shape": "32x8"}]}),
     "model.parameters[0].shape"),
    (lambda m: m.update(model={"parameters": [{"name": "a", "shape": [32, "8"]}]}),
     "model.parameters[0].shape[1]"),
    (lambda m: m.update(status={"state": "killed", "last_step": "abc"}), "status.last_step"),
    (lambda m: m.update(status={"state": "failed", "last_step": -5}), "status.last_step"),
    (lambda m: m.update(schema_version=True), "schema_version"),
    (lambda m: m["environment"].update(cuda_available="yes"), "environment.cuda_available")])
@pytest.mark.parametrize("command", ["analyze", "diff"])
def test_malformed_nested_meta_fields(run_dir, tmp_path, capsys, edit, name, command):
    other = write_run(tmp_path / "other")
    meta = json.loads((run_dir / "meta.json").read_text())
    meta.setdefault("recorder", {})
    meta.setdefault("environment", {})
    edit(meta)
    (run_dir / "meta.json").write_text(json.dumps(meta))
    argv = ["analyze", str(run_dir)] if command == "analyze" else ["diff", str(other), str(run_dir)]
    _one_line(argv, capsys, run_dir, says=f"meta.json: field '{name}'")


def test_metadata_nested_beyond_reading_is_one_line(run_dir, capsys):
    (run_dir / "meta.json").write_text("[" * 100_000 + "]" * 100_000)
    _one_line(["analyze", str(run_dir)], capsys, run_dir, says="nested too deeply")


def test_a_part_whose_steps_are_null_is_skipped_with_a_problem(run_dir, capsys):
    part = next((run_dir / "scalars").glob("r0-*.parquet"))
    table = pq.read_table(part)
    nulls = table.set_column(0, "step", pa.nulls(table.num_rows, pa.int64()))
    pq.write_table(nulls, run_dir / "scalars" / "r0-000001.parquet")
    out = _one_line(["analyze", str(run_dir), "--no-html"], capsys, run_dir, code=0).out
    assert "rows without a step skipped" in out
    part.unlink()  # now no step at all
    _one_line(["analyze", str(run_dir), "--no-html"], capsys, run_dir,
              says="holds no recorded steps")


def test_rows_without_a_split_are_skipped_and_every_report_is_written(run_dir, tmp_path,
                                                                       capsys):
    # A null split sorted against the others' strings: a TypeError in the HTML and Markdown.
    part = next((run_dir / "scalars").glob("r0-*.parquet"))
    data = pq.read_table(part)
    split = data.column("split").to_pylist()
    split[1] = None
    pq.write_table(data.set_column(data.schema.get_field_index("split"), "split",
                                   pa.array(split, pa.string())), part)
    out = _one_line(["analyze", str(run_dir), "--html", str(tmp_path / "r.html"), "--markdown",
                     str(tmp_path / "r.md")], capsys, code=0).out
    assert f"scalars/{part.name}: 1 of {data.num_rows} rows without a split skipped" in out, out
    assert (tmp_path / "r.html").is_file() and (tmp_path / "r.md").is_file()


@pytest.mark.parametrize("bad", ["inf", "1e30", "2.5", "-inf", "-1", "x"])
def test_csv_steps_that_are_not_whole_numbers_are_left_out_and_listed(tmp_path, capsys, bad):
    log = write_csv_log(tmp_path / "log.csv")
    lines = log.read_text().splitlines()
    lines[5] = bad + lines[5][lines[5].index(","):]
    log.write_text("\n".join(lines) + "\n")
    before = log.read_bytes()
    listed = f"column 'step': 1 row with a step that is not a whole number in 0..2**62 left out"
    assert main(["analyze", str(log), "--no-html"]) in (0, 1)
    assert listed in capsys.readouterr().out
    assert main(["import", "csv", str(log), str(tmp_path / "run")]) == 0
    run = open_any(tmp_path / "run")
    assert any(p.startswith(listed) for p in run.problems), run.problems
    assert len(run.loss()) == len(lines) - 2 and run.loss().index.min() >= 0
    assert log.read_bytes() == before


def test_a_csv_log_with_no_whole_step_at_all(tmp_path, capsys):
    log = tmp_path / "log.csv"
    log.write_text("step,loss\n0.5,1.0\n1.5,0.9\n")
    _one_line(["analyze", str(log), "--no-html"], capsys, log, says="no whole-number steps")
    _one_line(["import", "csv", str(log), str(tmp_path / "run")], capsys, log,
              says="no whole-number steps")
    assert not (tmp_path / "run").exists()


def test_a_binary_config_file(run_dir, tmp_path, capsys):
    config = tmp_path / "tracelab.toml"
    config.write_bytes(bytes(range(256)) * 4)
    _one_line(["analyze", str(run_dir), "--config", str(config)], capsys, run_dir, config,
              says="tracelab.toml")


def test_symlink_loops_in_an_archive_a_run_and_a_log(tmp_path, capsys):
    archive = tmp_path / "archive"
    run = write_run(archive / "a")
    (archive / "loop").symlink_to(archive)               # the archive contains itself
    (run / "scalars" / "r0-000007.parquet").symlink_to(run / "scalars" / "r0-000007.parquet")
    (run / "elsewhere").symlink_to(run / "elsewhere")
    out = tmp_path / "out"
    _one_line(["batch", str(archive), "-o", str(out), "--jobs", "1"], capsys, run, code=0)
    captured = _one_line(["analyze", str(run), "--no-html"], capsys, run, code=0)
    assert "r0-000007.parquet: unreadable" in captured.out
    pytest.importorskip("torch")
    logdir = tmp_path / "tb"
    write_tensorboard_log(logdir, steps=30)
    (logdir / "events.out.tfevents.loop").symlink_to(logdir / "events.out.tfevents.loop")
    (logdir / "sub").symlink_to(logdir)
    before = snapshot(run)
    code = main(["analyze", str(logdir), "--no-html"])
    err = capsys.readouterr().err
    assert code in (0, 1, 2) and "Traceback" not in err and err.count("\n") <= 1
    assert snapshot(run) == before


def test_a_directory_name_that_is_not_utf8(tmp_path, capsys):
    root = os.fsencode(tmp_path) + b"/runs-\xff\xfe"
    name = os.fsdecode(root)
    run = write_run(tmp_path / name / "exp")
    good = write_run(tmp_path / name / "good", seed=1)
    captured = _one_line(["analyze", str(run), "--no-html"], capsys, run, code=0)
    assert "steps 0-119" in captured.out
    _one_line(["diff", str(good), str(run)], capsys, run, good, code=0)
    _one_line(["batch", str(tmp_path / name), "-o", str(tmp_path / "out"), "--jobs", "1"],
              capsys, run, good, code=0)


def test_names_longer_than_the_filesystem_allows(run_dir, tmp_path, capsys):
    long = "x" * 300
    _one_line(["analyze", str(run_dir), "--html", str(tmp_path / f"{long}.html")], capsys,
              run_dir)
    _one_line(["analyze", str(tmp_path / long)], capsys, run_dir)
    _one_line(["batch", str(tmp_path), "-o", str(tmp_path / long)], capsys, run_dir)


def test_a_run_that_lost_its_metadata_is_never_written_over(run_dir, tmp_path, capsys):
    (run_dir / "meta.json").unlink()
    before = snapshot(run_dir)
    log = write_csv_log(tmp_path / "log.csv")
    _one_line(["import", "csv", str(log), str(run_dir)], capsys, run_dir, says="already holds")
    from tracelab.core.errors import RunExistsError
    from tracelab.core.writer import RunWriter
    with pytest.raises(RunExistsError, match="scalars/r0-"):
        RunWriter(run_dir)
    assert snapshot(run_dir) == before


def test_a_table_folder_without_read_permission(run_dir):
    import subprocess
    import sys
    drop = as_a_user()
    os.chmod(run_dir / "scalars", 0o000)
    try:
        proc = subprocess.run([*drop, sys.executable, "-m", "tracelab", "analyze", str(run_dir),
                               "--no-html"], capture_output=True, text=True)
    finally:
        os.chmod(run_dir / "scalars", 0o755)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "holds no recorded steps" in proc.stderr and "scalars/: unreadable" in proc.stderr


def test_diff_says_what_it_could_not_read(run_dir, tmp_path, capsys):
    good = write_run(tmp_path / "good", seed=1)
    (run_dir / "scalars" / "r0-000005.parquet").write_bytes(b"not parquet")
    captured = _one_line(["diff", str(good), str(run_dir), "--html", str(tmp_path / "d.html")],
                         capsys, run_dir, good, code=0)
    assert "unreadable in B, skipped: scalars/r0-000005.parquet" in captured.out
    html = (tmp_path / "d.html").read_text()
    assert "unreadable in B, skipped: scalars/r0-000005.parquet" in html


def test_a_rule_that_broke_is_in_the_verdict_not_hidden_by_a_clean_one(run_dir, capsys,
                                                                       monkeypatch):
    from dataclasses import replace
    from tracelab.app import engine
    specs = engine.all_rules()

    def broken(run, **thresholds):
        raise TypeError("'>=' not supported between instances of 'str' and 'int'")
    monkeypatch.setattr(engine, "all_rules", lambda: [
        replace(s, func=broken) if s.name == "loss-plateau" else s for s in specs])
    out = _one_line(["analyze", str(run_dir), "--no-html"], capsys, run_dir, code=0).out
    assert "internal-error loss-plateau: TypeError" in out
    assert out.splitlines()[-1].startswith("ok: no problems found; 1 rule broke "
                                           "(internal error)"), out


def test_a_part_with_a_damaged_footer_is_the_files_fault_and_one_line(run_dir, capsys):
    part = next((run_dir / "scalars").glob("r0-*.parquet"))
    good = part.read_bytes()
    part.write_bytes(good[:-20] + good[-8:])  # Arrow says OSError, with a newline, no errno
    # The run's only scalars part: no steps are left, one line says why (a newline in Arrow's
    # message would have made it two).
    _one_line(["analyze", str(run_dir), "--no-html"], capsys, run_dir,
              says="expected a whole Parquet file of this table (it was cut short, damaged")


def test_a_part_without_read_permission_says_so(run_dir):
    import subprocess
    import sys
    drop = as_a_user()
    part = next((run_dir / "scalars").glob("r0-*.parquet"))
    os.chmod(part, 0)
    try:
        done = subprocess.run([*drop, sys.executable, "-m", "tracelab", "analyze", str(run_dir),
                               "--no-html"], capture_output=True, text=True)
    finally:
        os.chmod(part, 0o644)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"scalars/{part.name}: unreadable (permission denied), skipped)" in done.stderr