"""batch -o: the batch writes only into a folder of its own, never into a run or over a file
it did not write; a bad run is one row, never the end of the batch."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from _inputs import snapshot, write_run
from tracelab.app.cli import main


@pytest.fixture
def archive(tmp_path):
    root = tmp_path / "archive"
    write_run(root / "a")
    write_run(root / "b", seed=1)
    return root


def _refused(argv, capsys, *roots, says=""):
    before = snapshot(*roots)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracelab: error: ") and err.count("\n") == 1, err
    assert says in err
    assert snapshot(*roots) == before


def test_the_archive_itself_is_not_an_output_folder(archive, capsys, monkeypatch):
    monkeypatch.chdir(archive)
    _refused(["batch", ".", "-o", "."], capsys, archive, says="is the archive")
    _refused(["batch", str(archive), "-o", str(archive.parent)], capsys, archive,
             says="holds it")


def test_never_into_a_run(archive, capsys):
    _refused(["batch", str(archive), "-o", str(archive / "a")], capsys, archive,
             says="inside the run")
    _refused(["batch", str(archive), "-o", str(archive / "a" / "triage")], capsys, archive,
             says="inside the run")


def test_never_over_files_it_did_not_write(archive, tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "index.html").write_text("my own index")
    _refused(["batch", str(archive), "-o", str(folder)], capsys, archive, folder,
             says="did not write")


def test_its_own_folder_is_written_again(archive, tmp_path, capsys):
    out = tmp_path / "triage"
    assert main(["batch", str(archive), "-o", str(out), "--jobs", "1"]) == 0
    assert main(["batch", str(archive), "-o", str(out), "--jobs", "1"]) == 0
    assert "unchanged 2" in capsys.readouterr().out
    assert sorted(p.name for p in archive.iterdir()) == ["a", "b"]
    assert not any(p.name in ("report.html", "result.json") for p in archive.rglob("*"))


def test_an_output_folder_inside_the_archive_is_fine(archive, capsys):
    out = archive / "triage"
    assert main(["batch", str(archive), "-o", str(out), "--jobs", "1"]) == 0
    assert len(pd.read_parquet(out / "runs.parquet")) == 2


def test_unwritable_output_folders_are_one_line(archive, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    _refused(["batch", str(archive), "-o", str(blocker)], capsys, archive, blocker,
             says="not a directory")
    _refused(["batch", str(archive), "-o", str(blocker / "sub")], capsys, archive, blocker)


def test_a_run_with_a_malformed_status_is_one_row(archive, tmp_path, capsys):
    meta = json.loads((archive / "b" / "meta.json").read_text())
    meta["status"] = {"state": 5}
    (archive / "b" / "meta.json").write_text(json.dumps(meta))
    out = tmp_path / "triage"
    for _ in range(2):  # the second run reads the first one's cached rows
        assert main(["batch", str(archive), "-o", str(out), "--jobs", "1"]) == 0
        runs = pd.read_parquet(out / "runs.parquet").set_index("run")
        assert len(runs) == 2 and runs.loc["a", "status"] == "completed"
        assert runs.loc["b", "status"] != "completed"
