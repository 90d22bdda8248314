"""A run name holding terminal escapes (ESC, OSC, BEL) or U+202E reaches no terminal line, file
name or Markdown file raw: each such character is shown as a \\uXXXX escape, as the HTML
shows it, and the report's file name holds none."""
from __future__ import annotations

import io
import json
import os
import sys

import pytest

from _hostile import mlflow_run, regular_files
from tracelab.app.cli import main

HOSTILE = "run\x1b]0;owned\x07\x1b[2J\x9b31m\u202egnp.exe\u2066"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u2066")


def _raw_in(text: str) -> list[str]:
    return [c for c in RAW if c in text]


@pytest.fixture
def hostile_run(tmp_path):
    run = mlflow_run(tmp_path / "archive", name="plain")
    (run / "tags" / "mlflow.runName").write_text(HOSTILE)
    return run


def test_analyze_prints_writes_and_names_files_without_raw_controls(hostile_run, tmp_path,
                                                                    capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = regular_files(tmp_path / "archive")
    md = tmp_path / "summary.md"
    assert main(["analyze", str(hostile_run), "--markdown", str(md)]) in (0, 1)
    captured = capsys.readouterr()
    assert not _raw_in(captured.out + captured.err), captured.out
    reports = [n for n in os.listdir(tmp_path) if n.endswith("-report.html")]
    assert reports == ["run_]0;owned__[2J_31m_gnp.exe_-report.html"], reports
    assert f"report: {tmp_path / reports[0]}" in captured.out
    assert "## tracelab: run\\u001b\\]0;owned\\u0007" in md.read_text(encoding="utf-8")
    text = md.read_text(encoding="utf-8")
    assert not _raw_in(text) and "\\u202e" in text
    assert not _raw_in((tmp_path / reports[0]).read_text(encoding="utf-8"))
    assert regular_files(tmp_path / "archive") == before


def test_json_on_stdout_stays_json_holding_the_name(hostile_run, capsys):
    assert main(["analyze", str(hostile_run), "--no-html", "--json", "-"]) in (0, 1)
    out = capsys.readouterr().out
    assert not _raw_in(out)
    assert json.loads(out)["run"]["name"] == HOSTILE


def test_import_and_errors_print_names_escaped(hostile_run, tmp_path, capsys):
    assert main(["import", "mlflow", str(hostile_run), str(tmp_path / "imported")]) == 0
    assert main(["analyze", str(tmp_path / "imported"), "--no-html"]) in (0, 1)
    missing = tmp_path / "no\x1b[2Jsuch\u202erun"
    assert main(["analyze", str(missing)]) == 2
    captured = capsys.readouterr()
    assert not _raw_in(captured.out + captured.err)
    assert "no\\u001b[2Jsuch\\u202erun" in captured.err and captured.err.count("\n") == 1


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_batch_progress_bar_keeps_its_carriage_returns(tmp_path, monkeypatch):
    from _hostile import csv_log
    csv_log(tmp_path / "archive" / "version_0")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["batch", str(tmp_path / "archive"), "--out", str(tmp_path / "out"),
                 "--reports", "none"]) == 0
    drawn = terminal.getvalue()
    assert "tracelab batch" in drawn and "\r" in drawn and "\\u000d" not in drawn
