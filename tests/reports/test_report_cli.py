"""`tracelab analyze` and its report files: default place, --html, --markdown, unwritable places."""
from __future__ import annotations

import errno
from pathlib import Path

import pytest

from report_data import synthetic_run
from tracelab.app.cli import main
from tracelab.core.writer import RunWriter


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A small run written to disk the way the recorder writes one."""
    mem = synthetic_run(steps=80)
    path = tmp_path_factory.mktemp("runs") / "mlp"
    meta = {k: v for k, v in mem.meta.items() if k not in ("schema_version", "status", "name")}
    writer = RunWriter(path, meta, flush_interval=0.05)
    for table in ("scalars", "tensors", "inputs"):
        frame = getattr(mem, table)
        writer.write((table, {c: frame[c].to_numpy() for c in frame.columns
                              if frame[c].notna().any()}))
    writer.set_samples({c: mem.samples[c].to_numpy() for c in ("split", "feature", "step",
                                                               "value")})
    writer.close()
    return path


def test_analyze_writes_the_report_into_the_run_and_prints_its_path(run_dir, capsys):
    code = main(["analyze", str(run_dir), "--fail-on", "never"])
    out = capsys.readouterr().out
    report = run_dir / "report.html"
    assert code == 0 and report.exists()
    assert out.splitlines()[-1].endswith(f"report: {report}")
    html = report.read_text(encoding="utf-8")
    assert "<h1>mlp</h1>" in html and "data:image/svg+xml;base64," in html


def test_html_and_markdown_elsewhere(run_dir, tmp_path, capsys):
    html, md = tmp_path / "out" / "r.html", tmp_path / "ticket" / "t.md"
    code = main(["analyze", str(run_dir), "--html", str(html), "--markdown", str(md),
                 "--fail-on", "never"])
    assert code == 0 and html.exists() and md.exists()
    text = md.read_text(encoding="utf-8")
    assert "| Severity | Rule | Subject | Steps | Cause | Message | Fix |" in text or \
        "No problems found" in text
    assert "full report: ../out/r.html" in text
    assert list(md.parent.glob("t-*.png"))
    assert f"markdown: {md}" in capsys.readouterr().out


@pytest.mark.parametrize("err, reason", [(errno.EROFS, "read-only file system"),
                                         (errno.EACCES, "permission denied")])
def test_read_only_run_directory_says_so_and_suggests_html(run_dir, monkeypatch, capsys,
                                                           err, reason):
    # Root ignores file modes, so the failure is simulated where the report is written.
    def refuse(diagnosis, path):
        raise OSError(err, reason.capitalize(), str(path))
    monkeypatch.setattr("tracelab.reports.write_html", refuse)
    code = main(["analyze", str(run_dir)])
    err_text = capsys.readouterr().err.strip()
    assert code == 2
    assert err_text == (f"tracelab: error: {run_dir}: not writable ({reason}); pass --html "
                        "PATH to write the report elsewhere, or --no-html")


def test_unwritable_markdown_path_is_one_line(run_dir, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code = main(["analyze", str(run_dir), "--no-html", "--markdown", str(blocker / "t.md")])
    err_text = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err_text
    assert err_text == (f"tracelab: error: {blocker}: is a file, where --markdown needs a "
                        "folder; choose another --markdown PATH")
