"""What the README states about platforms: files are written and a run's liveness is probed
without the POSIX-only calls Windows lacks (os.fchmod; os.kill as a probe)."""
from __future__ import annotations

import os
import socket
import stat

import pytest

import tracelab.core.files as files
from tracelab.core import run_status
from tracelab.core.schema import heartbeat_filename


@pytest.fixture
def no_fchmod(monkeypatch):
    """A Python without os.fchmod, as on Windows; what chmod is asked to do is kept."""
    monkeypatch.delattr(os, "fchmod", raising=False)
    calls = []
    chmod = os.chmod

    def recording_chmod(path, mode, *args, **kwargs):
        calls.append((str(path), mode))
        return chmod(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "chmod", recording_chmod)
    return calls


@pytest.mark.parametrize("write", [files.write_atomic, files.create_new])
def test_files_are_written_with_the_default_mode_without_fchmod(tmp_path, no_fchmod, write):
    target = tmp_path / "report.html"
    write(target, "<html>ok</html>")
    assert target.read_text() == "<html>ok</html>"
    assert [mode for _, mode in no_fchmod] == [0o666 & files.folder_mode()]
    assert no_fchmod[0][0] != str(target)  # the temporary file, before it took the name
    if os.name == "posix":
        assert stat.S_IMODE(target.stat().st_mode) == 0o666 & files.folder_mode()
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temporary left


def test_an_atomic_replacement_keeps_the_old_file_when_the_write_fails_without_fchmod(
        tmp_path, no_fchmod):
    target = tmp_path / "meta.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with files.atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["meta.json"]


def test_create_new_still_refuses_an_existing_file_without_fchmod(tmp_path, no_fchmod):
    target = tmp_path / "meta.json"
    files.create_new(target, "first")
    with pytest.raises(FileExistsError):
        files.create_new(target, "second")
    assert target.read_text() == "first"


def _running_meta(tmp_path, pid):
    (tmp_path / heartbeat_filename(0)).write_text("")
    return {"writer": {"pid": pid, "hostname": socket.gethostname()}}


def test_a_live_writer_on_windows_is_judged_by_its_heartbeat_and_never_sent_a_signal(
        tmp_path, monkeypatch):
    sent = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.setattr(run_status.os, "name", "nt")
    meta = _running_meta(tmp_path, os.getpid())
    assert not run_status.writer_gone(tmp_path, meta, 0)  # a fresh heartbeat
    old = os.stat(tmp_path / heartbeat_filename(0)).st_mtime - 2 * run_status.KILLED_AFTER_S
    os.utime(tmp_path / heartbeat_filename(0), (old, old))
    assert run_status.writer_gone(tmp_path, meta, 0)  # a silent one
    assert sent == []


@pytest.mark.skipif(os.name != "posix", reason="the process probe is POSIX's")
def test_a_writer_whose_process_is_gone_reads_as_gone_at_once_on_posix(tmp_path, monkeypatch):
    def no_such_process(pid, sig):
        assert sig == 0
        raise ProcessLookupError(pid)

    monkeypatch.setattr(os, "kill", no_such_process)
    assert run_status.writer_gone(tmp_path, _running_meta(tmp_path, 12345), 0)
