"""SIGTERM, as a job scheduler or `kill` sends it, at some moment of a command: it ends as
Ctrl-C does (exit 130, one line), with no process left behind and nothing half-written."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import types

import pytest

from _inputs import snapshot, write_run, write_tensorboard_log
from tracelab.app.cli import main

TRACELAB = [sys.executable, "-m", "tracelab"]


def _group_gone(pgid: int, timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("delay, sig, group", [
    (1.5, signal.SIGTERM, False), (2.5, signal.SIGTERM, False), (4.0, signal.SIGTERM, False),
    # Ctrl-C and a scheduler's SIGTERM reach the whole process group: the forkserver and the
    # workers too, even while the forkserver still imports what it preloads.
    (1.5, signal.SIGINT, True), (2.5, signal.SIGINT, True), (2.5, signal.SIGTERM, True)])
def test_an_interrupted_batch_leaves_no_worker_running(tmp_path, delay, sig, group):
    archive = tmp_path / "archive"
    for i in range(6):
        write_run(archive / f"run{i}", seed=i)
    before = snapshot(archive)
    proc = subprocess.Popen(TRACELAB + ["batch", str(archive), "-o", str(tmp_path / "out"),
                                        "-j", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    time.sleep(delay)
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 130, -sig), err
    assert "Traceback" not in err, err
    if proc.returncode == -sig:
        # Killed by the signal itself only once the batch had ended, or for SIGTERM, before
        # the command began (Ctrl-C then still ends in one line).
        assert "index:" in out or (sig == signal.SIGTERM and not (tmp_path / "out").exists()), \
            (out, err)
    if proc.returncode == 130:
        assert err.strip().splitlines()[-1] == "tracelab: interrupted", err
    try:
        assert _group_gone(proc.pid), "a worker outlived the batch"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert snapshot(archive) == before


def test_importing_a_log_with_nothing_readable_makes_no_run(tmp_path, capsys):
    log = tmp_path / "log"
    log.mkdir()
    (log / "events.out.tfevents.1.host").write_bytes(os.urandom(3000))
    assert main(["import", "tensorboard", str(log), str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "nothing readable to import" in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()
    events = write_tensorboard_log(tmp_path / "good")
    assert main(["import", "tensorboard", str(events.parent), str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "meta.json").is_file()


def test_ctrl_c_while_the_command_still_loads_ends_in_one_line(monkeypatch, capsys):
    from tracelab.__main__ import run

    loading = types.ModuleType("tracelab.app.cli")

    def interrupted(name):
        raise KeyboardInterrupt
    loading.__getattr__ = interrupted
    monkeypatch.setitem(sys.modules, "tracelab.app.cli", loading)
    assert run() == 130
    assert capsys.readouterr().err == "tracelab: interrupted\n"


# The import, SIGKILLed while it writes the run (in the folder it builds the run in).
_KILLED_IMPORT = """
import os, signal, sys
from tracelab.core.writer import RunWriter
from tracelab.app.cli import main
RunWriter.close = lambda self, status=None: os.kill(os.getpid(), signal.SIGKILL)
main(["import", "tensorboard", sys.argv[1], sys.argv[2]])
"""


@pytest.mark.slow
def test_an_import_killed_while_it_writes_leaves_nothing_once_another_has_run(tmp_path):
    import tracelab
    events = write_tensorboard_log(tmp_path / "log")
    before = snapshot(events.parent)
    runs = tmp_path / "runs"
    killed = subprocess.run([sys.executable, "-c", _KILLED_IMPORT, str(events.parent),
                             str(runs / "first")], capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL
    assert [p for p in runs.iterdir() if p.name.startswith(".")]  # what a kill leaves
    assert main(["import", "tensorboard", str(events.parent), str(runs / "first")]) == 0
    assert os.listdir(runs) == ["first"]
    assert tracelab.open_run(runs / "first").status["state"] == "completed"
    assert snapshot(events.parent) == before


@pytest.mark.parametrize("owner", ["mine", "nobody's"])
def test_an_import_into_an_empty_folder_of_its_owner_keeps_its_permissions(tmp_path, owner):
    events = write_tensorboard_log(tmp_path / "log")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    os.chmod(run_dir, 0o750)
    if owner == "nobody's":
        if os.geteuid() != 0:
            pytest.skip("giving a folder to another user takes root")
        os.chown(run_dir, 65534, 65534)
    want = run_dir.stat()
    assert main(["import", "tensorboard", str(events.parent), str(run_dir)]) == 0
    got = run_dir.stat()
    assert (run_dir / "meta.json").is_file()
    if owner == "mine":
        assert (got.st_mode & 0o7777, got.st_uid) == (want.st_mode & 0o7777, want.st_uid)
    else:  # ownership is never handed on: the run is readable as a new folder is
        os.umask(umask := os.umask(0o022))
        assert (got.st_mode & 0o7777, got.st_uid) == (0o777 & ~umask, os.geteuid())


def test_an_import_into_an_empty_mount_point_writes_the_run_in_it(tmp_path, monkeypatch):
    """Nothing can be renamed onto a mount point (EBUSY): the run is written in place."""
    import errno
    import tracelab
    events = write_tensorboard_log(tmp_path / "log")
    mount = tmp_path / "volume"
    mount.mkdir()
    rename = os.rename

    def onto_a_mount(src, dst, *args, **kwargs):
        if os.fspath(dst) == os.fspath(mount):
            raise OSError(errno.EBUSY, "Device or resource busy", os.fspath(dst))
        return rename(src, dst, *args, **kwargs)
    monkeypatch.setattr(os, "rename", onto_a_mount)
    assert main(["import", "tensorboard", str(events.parent), str(mount)]) == 0
    assert sorted(os.listdir(tmp_path)) == ["log", "volume"]  # no building folder left
    assert tracelab.open_run(mount).status["state"] == "completed"
