"""CSV import: Lightning CSVLogger's metrics.csv layout."""
import sys
from pathlib import Path

import pytest

import tracelab
from tracelab.app.cli import main
from tracelab.core.errors import TraceError
from tracelab.recorders.importers.csv import import_csv, read_csv_log
from tracelab.recorders.importers.common import TagMap

sys.path.insert(0, str(Path(__file__).parents[1] / "core"))
from _archive_runs import csv_log, tree_state  # noqa: E402


@pytest.fixture
def metrics(tmp_path):
    return csv_log(tmp_path / "lightning_logs" / "version_0")


def test_lightning_columns_map_to_splits_and_names(metrics):
    run = read_csv_log(metrics).as_run(metrics.parent)
    # train_loss_step wins over the epoch means of the same series
    assert run.loss().to_dict() == {0: 1.20, 1: 1.05, 2: 0.98, 3: 0.90, 4: 0.81, 5: 0.77}
    assert run.loss("val").to_dict() == {2: 0.97, 5: 0.80}
    assert run.scalar("acc", "val").to_dict() == {2: 0.55, 5: 0.68}
    assert run.scalar("lr/0").to_dict() == {0: 0.1}
    assert set(run.scalars["name"]) == {"loss", "acc", "lr/0"}  # epoch is bookkeeping
    assert run.name == "version_0"
    try:
        import yaml  # noqa: F401  (hparams.yaml is read when PyYAML is installed)
        assert run.meta["config"] == {"lr": 0.1, "batch_size": 32, "model": {"width": 16}}
    except ImportError:
        assert run.meta["config"] == {}
    assert run.meta["source"]["format"] == "csv"


def test_epoch_means_are_kept_when_they_are_all_there_is(tmp_path):
    file = tmp_path / "m.csv"
    file.write_text("step,train_loss_epoch,val_loss_epoch\n9,0.5,0.6\n19,0.4,0.55\n")
    run = read_csv_log(file).as_run(file)
    assert run.loss().to_dict() == {9: 0.5, 19: 0.4}
    assert run.loss("val").to_dict() == {9: 0.6, 19: 0.55}


def test_step_column_and_mapping_options(tmp_path):
    file = tmp_path / "log.csv"
    file.write_text("iteration,objective,holdout_score,note\n0,2.0,0.1,a\n1,1.5,0.2,b\n")
    with pytest.raises(TraceError, match="no step column"):
        read_csv_log(file)
    tags = TagMap(scalars=["objective=train/loss", r"holdout_(\w+)=val/\1"])
    run = read_csv_log(file, tags, step_column="iteration").as_run(file)
    assert run.loss().to_dict() == {0: 2.0, 1: 1.5}
    assert run.scalar("score", "val").to_dict() == {0: 0.1, 1: 0.2}
    assert "note" not in set(run.scalars["name"])  # text columns are not metrics


@pytest.mark.parametrize("text, message", [
    ("", "unreadable as CSV"),
    ("step\n1\n2\n", "no numeric metric columns"),
    ("step,loss\nx,1.0\n", "no numeric steps"),
])
def test_bad_files_are_one_line_errors(tmp_path, text, message):
    file = tmp_path / "bad.csv"
    file.write_text(text)
    with pytest.raises(TraceError, match=message):
        read_csv_log(file)


def test_import_and_analyze_from_the_cli(metrics, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    before = tree_state(metrics.parent)
    assert main(["import", "csv", str(metrics), "imported"]) == 0
    run = tracelab.open_run("imported")
    assert run.status["state"] == "completed" and len(run.loss()) == 6
    assert main(["analyze", str(metrics.parent), "--no-html", "--fail-on", "never"]) == 0
    out = capsys.readouterr().out
    assert "version_0" in out and "skipped" in out and "gradient stats" in out
    assert tree_state(metrics.parent) == before
    assert import_csv(metrics, tmp_path / "again").is_dir()


def test_an_import_under_a_file_names_that_file(tmp_path, capsys):
    metrics = tmp_path / "metrics.csv"
    metrics.write_text("step,loss\n0,1.0\n1,0.5\n")
    (tmp_path / "notes").write_text("mine")
    assert main(["import", "csv", str(metrics), str(tmp_path / "notes" / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"({tmp_path / 'notes'} is a file, not a folder)" in err
    assert (tmp_path / "notes").read_text() == "mine"
