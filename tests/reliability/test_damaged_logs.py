"""A damaged TensorBoard log is imported as far as it reads, and the analysis says what was not."""
from __future__ import annotations

import pytest

from _inputs import snapshot, write_tensorboard_log
from tracelab.app.cli import main

pytest.importorskip("torch")


def _log(path):
    return write_tensorboard_log(path, steps=100)


def _analyze(logdir, capsys):
    before = snapshot(logdir)
    code = main(["analyze", str(logdir), "--no-html"])
    out = capsys.readouterr().out
    assert snapshot(logdir) == before
    return code, out


def test_flipped_bytes_are_reported(tmp_path, capsys):
    events = _log(tmp_path / "tb")
    data = bytearray(events.read_bytes())
    data[len(data) // 3] ^= 0xFF
    events.write_bytes(bytes(data))
    code, out = _analyze(tmp_path / "tb", capsys)
    assert "not read:" in out
    assert "checksum mismatch" in out or "damaged record length" in out
    assert "(1 part not read)" in out.splitlines()[-1]


def test_a_truncated_file_is_reported(tmp_path, capsys):
    events = _log(tmp_path / "tb")
    data = events.read_bytes()
    events.write_bytes(data[: int(len(data) * 0.6) + 3])
    code, out = _analyze(tmp_path / "tb", capsys)
    assert "the file ends inside a record" in out


def test_a_whole_log_reports_nothing(tmp_path, capsys):
    _log(tmp_path / "tb")
    code, out = _analyze(tmp_path / "tb", capsys)
    assert "unreadable" not in out


def test_import_lists_what_it_skipped(tmp_path, capsys):
    events = _log(tmp_path / "tb")
    events.write_bytes(events.read_bytes()[:-7])
    assert main(["import", "tensorboard", str(tmp_path / "tb"), str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "not read:" in out and "ends inside a record" in out
