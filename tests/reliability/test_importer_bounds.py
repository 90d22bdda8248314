"""Importers' inputs that used to escape as tracebacks or run away: a YAML alias bomb in a
Lightning hparams.yaml, an MLflow meta.yaml with a bad escape, an mlflow.db with values of the
wrong type, and a CSV whose left-out rows were miscounted. Each ends in one line (exit 2) or a
named problem, and leaves the source's bytes as they were."""
from __future__ import annotations

import sqlite3

import pytest

from _hostile import RUN_ID, csv_log, mlflow_db, mlflow_run, regular_files
from tracelab.app.cli import main
from tracelab.app.sources import open_any
from tracelab.recorders.importers import csv as csv_import


def _bomb(levels: int = 9) -> str:
    """The billion laughs: each level's list holds the one before nine times."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        prev, name = chr(ord("a") + level - 1), chr(ord("a") + level)
        lines.append(f"{name}: &{name} [{','.join(['*' + prev] * 9)}]")
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_in_hparams_is_refused_and_named(tmp_path, capsys):
    pytest.importorskip("yaml")
    log = csv_log(tmp_path / "version_0")
    (log.parent / "hparams.yaml").write_text(_bomb())
    assert len((log.parent / "hparams.yaml").read_bytes()) < 350
    before = regular_files(log.parent)
    assert main(["import", "csv", str(log), str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "not read: hparams.yaml: not read as the run's config (its aliases expand it " \
           "beyond 100,000 values)" in out, out
    run = open_any(tmp_path / "run")
    assert run.meta["config"] == {} and len(run.loss()) == 30
    assert (tmp_path / "run" / "meta.json").stat().st_size < 100_000
    assert regular_files(log.parent) == before


@pytest.mark.parametrize("text, why", [
    ("a: &a [*a]\n", "an alias refers to a node that holds it"),
    ("a: " + "[" * 200 + "]" * 200 + "\n", "nested deeper than 64 levels"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 64 levels"),
    ("lr: 0.1\n" + "#" * (csv_import.MAX_CONFIG_BYTES + 1) + "\n", "larger than 1,048,576"),
])
def test_hparams_beyond_the_bounds_are_named(tmp_path, text, why):
    pytest.importorskip("yaml")
    log = csv_log(tmp_path / "version_0")
    (log.parent / "hparams.yaml").write_text(text)
    imported = csv_import.read_csv_log(log)
    assert imported.meta["config"] == {}
    assert any(p.startswith("hparams.yaml: not read") and why in p
               for p in imported.problems), imported.problems


def test_hparams_with_aliases_within_the_bounds_load(tmp_path):
    pytest.importorskip("yaml")
    log = csv_log(tmp_path / "version_0")
    (log.parent / "hparams.yaml").write_text(
        "base: &b {lr: 0.1, width: 16}\nmodel: *b\nlayers: [1, 2, 3]\n")
    imported = csv_import.read_csv_log(log)
    assert imported.meta["config"] == {"base": {"lr": 0.1, "width": 16},
                                       "model": {"lr": 0.1, "width": 16}, "layers": [1, 2, 3]}
    assert not imported.problems


def test_mlflow_meta_yaml_with_a_bad_escape_is_one_line(tmp_path, capsys):
    run = mlflow_run(tmp_path / "archive")
    meta = run / "meta.yaml"
    meta.write_text(meta.read_text().replace("run_name: sweep-1", 'run_name: "\\x"'))
    before = regular_files(tmp_path / "archive")
    assert main(["analyze", str(run), "--no-html"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracelab: error: ") and err.count("\n") == 1, err
    assert "meta.yaml: line 2: a bad escape" in err
    assert regular_files(tmp_path / "archive") == before


def test_mlflow_meta_yaml_escapes_read_as_yaml_writes_them(tmp_path):
    run = mlflow_run(tmp_path / "archive")
    meta = run / "meta.yaml"
    meta.write_text(meta.read_text().replace("run_name: sweep-1",
                                             'run_name: "caf\\xE9 \\u2603 ü"'))
    (run / "tags" / "mlflow.runName").unlink()
    assert open_any(run).name == "café ☃ ü"


@pytest.mark.parametrize("sql, said", [
    ("UPDATE metrics SET value = 'high' WHERE step = 3", "metrics: 1 row"),
    ("UPDATE metrics SET step = 'three' WHERE step = 3", "metrics: 1 row"),
    ("INSERT INTO metrics VALUES (NULL, 1.0, 1, '{run}', 4, 0)", "metrics: 1 row"),
    ("INSERT INTO params VALUES ('note', NULL, '{run}')", None),
    ("INSERT INTO params VALUES (NULL, 'x', '{run}')", "params: 1 row without a text key"),
    ("INSERT INTO tags VALUES (NULL, 'x', '{run}')", "tags: 1 row without a text key"),
])
def test_mlflow_db_values_of_the_wrong_type(tmp_path, capsys, sql, said):
    db = mlflow_db(tmp_path / "mlflow.db")
    with sqlite3.connect(db) as connection:
        connection.execute(sql.format(run=RUN_ID))
    connection.close()
    before = db.read_bytes()
    assert main(["import", "mlflow", str(db), str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    run = open_any(tmp_path / "run")
    if said is None:
        assert run.meta["config"] == {"lr": 0.01, "note": None}
    else:
        assert f"not read: {said}" in out, out
    losses = run.loss()
    assert len(losses) == (29 if said == "metrics: 1 row" and "INSERT" not in sql else 30)
    assert db.read_bytes() == before


def test_csv_rows_left_out_are_all_counted(tmp_path):
    log = csv_log(tmp_path / "version_0", steps=10)
    lines = log.read_text().splitlines()
    for at in (2, 4, 6, 8):
        lines[at] = "NaN,inf,-1,1.5".split(",")[at // 2 - 1] + lines[at][lines[at].index(","):]
    log.write_text("\n".join(lines) + "\n")
    imported = csv_import.read_csv_log(log)
    assert any(p.startswith("column 'step': 4 rows with a step that is not a whole number")
               for p in imported.problems), imported.problems
    assert len(imported.tables["scalars"]) == 6
