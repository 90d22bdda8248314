"""A folder built beside its target (an import's run) and the leftovers of a build that died."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tracelab.core.files import building_folder, remove_abandoned

pytestmark = pytest.mark.skipif(os.name == "nt", reason="no file locks to tell a dead build")

_BUILDER = """
import sys, time
from pathlib import Path
from tracelab.core.files import building_folder
with building_folder(Path(sys.argv[1]), ".importing") as folder:
    (folder / "part.parquet").write_bytes(b"x" * 1000)
    print(folder, flush=True)
    time.sleep(120)
"""


def _building(target: Path) -> tuple[subprocess.Popen, Path]:
    """A process in the middle of building `target`, and its folder."""
    child = subprocess.Popen([sys.executable, "-c", _BUILDER, str(target)],
                             stdout=subprocess.PIPE, text=True)
    line = child.stdout.readline().strip()
    assert line, "the builder did not start"
    return child, Path(line)


def test_a_build_in_progress_is_kept_and_a_killed_ones_folder_is_removed_by_the_next(tmp_path):
    child, folder = _building(tmp_path / "run")
    try:
        assert folder.parent == tmp_path and folder.name.startswith(".run.")
        remove_abandoned(tmp_path, ".importing")
        with building_folder(tmp_path / "other", ".importing"):
            pass
        assert (folder / "part.parquet").is_file()  # its process still holds it
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert (folder / "part.parquet").is_file()  # a SIGKILL runs no cleanup
    with building_folder(tmp_path / "run", ".importing") as again:
        assert again != folder and not folder.exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            [again.name, again.name + ".lock"])
    assert list(tmp_path.iterdir()) == []


def test_the_block_leaves_nothing_when_it_ends_or_fails(tmp_path):
    with building_folder(tmp_path / "run", ".importing") as folder:
        (folder / "x").write_text("built")
        os.rename(folder, tmp_path / "run")
    assert os.listdir(tmp_path) == ["run"]
    with pytest.raises(ValueError):
        with building_folder(tmp_path / "b", ".importing") as folder:
            (folder / "x").write_text("half")
            raise ValueError
    assert os.listdir(tmp_path) == ["run"]
    os.umask(umask := os.umask(0o022))
    with building_folder(tmp_path / "c", ".importing") as folder:
        assert folder.stat().st_mode & 0o777 == 0o777 & ~umask  # as mkdir makes a folder


def test_leftovers_are_never_followed_through_links_or_taken_from_other_kinds(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("the user's")
    parent = tmp_path / "runs"
    parent.mkdir()
    os.symlink(elsewhere, parent / ".run.abcdefgh.importing")  # planted as a leftover's folder
    (parent / ".run.abcdefgh.importing.lock").write_text("")
    os.symlink(elsewhere / "keep", parent / ".run.defghijk.importing.lock")  # a linked lock
    (parent / ".run.defghijk.importing").mkdir()
    os.mkfifo(parent / ".run.fifofifo.importing.lock")  # opening it would wait for a writer
    (parent / ".run.fifofifo.importing").mkdir()
    (parent / ".run.ghijklmn.other.lock").write_text("")  # another kind's
    (parent / ".run.ghijklmn.other").mkdir()
    (parent / ".run.notempty.importing.lock").write_text("notes")  # not a lock file we make
    (parent / ".run.notempty.importing").mkdir()
    (parent / ".notes.importing").mkdir()  # named otherwise than building_folder names
    (parent / ".notes.importing.lock").write_text("")
    before = sorted(os.listdir(parent))
    remove_abandoned(parent, ".importing")
    assert (elsewhere / "keep").read_text() == "the user's"
    assert sorted(os.listdir(parent)) == before


def test_without_file_locks_a_build_still_runs(tmp_path, monkeypatch):
    import errno
    import fcntl

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")
    monkeypatch.setattr(fcntl, "flock", no_locks)
    with building_folder(tmp_path / "run", ".importing") as folder:
        (folder / "x").write_text("built")
        os.rename(folder, tmp_path / "run")
    assert os.listdir(tmp_path) == ["run"]


def test_a_long_name_of_wide_characters_fits(tmp_path):
    name = "\U0001F600" * 58  # 232 bytes: a valid file name
    with building_folder(tmp_path / name, ".importing") as folder:
        assert len(os.fsencode(folder.name + ".lock")) <= 255
        os.rename(folder, tmp_path / name)
    assert os.listdir(tmp_path) == [name]


def test_a_leftover_lock_alone_or_with_a_newline_in_its_name_is_removed(tmp_path):
    (tmp_path / ".run.abcdefgh.importing.lock").write_text("")  # killed before its folder
    odd = ".run\nx.abcdefgh.importing"
    (tmp_path / odd).mkdir()
    (tmp_path / (odd + ".lock")).write_text("")
    remove_abandoned(tmp_path, ".importing")
    assert os.listdir(tmp_path) == []
