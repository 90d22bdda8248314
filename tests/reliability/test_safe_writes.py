"""Temporary files are created fresh, never through a name planted in advance; a user's file in
the way of an implicit output is refused; JSON is strict."""
from __future__ import annotations

import json

from _inputs import snapshot, write_run
from tracelab.app.cli import main


def test_a_symlink_planted_at_the_old_temporary_name_is_not_written_through(run_dir, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    for name in (".report.html.tmp", "report.html.tmp", ".report.html.tmp.html"):
        (run_dir / name).symlink_to(victim)
    assert main(["analyze", str(run_dir), "--json", str(run_dir / "out.json")]) in (0, 1)
    assert victim.read_text() == "keep me"
    assert "<html" in (run_dir / "report.html").read_text()[:500].lower()
    assert not any(p.name.endswith(".tmp") and not p.is_symlink() for p in run_dir.iterdir())


def test_a_report_over_a_symlink_replaces_the_link_not_its_target(run_dir, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (run_dir / "report.html").symlink_to(victim)
    assert main(["analyze", str(run_dir)]) in (0, 1)
    assert victim.read_text() == "keep me"
    assert not (run_dir / "report.html").is_symlink()


def test_markdown_plots_never_replace_a_users_file(run_dir, tmp_path, capsys):
    notes = tmp_path / "notes"
    notes.mkdir()
    mine = notes / "summary-curves.png"
    mine.write_bytes(b"\x89PNG my own picture")
    before = snapshot(notes, run_dir)
    assert main(["analyze", str(run_dir), "--no-html", "--markdown",
                 str(notes / "summary.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "summary-curves.png" in err
    assert snapshot(notes, run_dir) == before
    mine.unlink()
    assert main(["analyze", str(run_dir), "--no-html", "--markdown",
                 str(notes / "summary.md")]) in (0, 1)
    # its own plots from the last run are replaced on the next
    assert main(["analyze", str(run_dir), "--no-html", "--markdown",
                 str(notes / "summary.md")]) in (0, 1)
    assert (notes / "summary-curves.png").read_bytes().startswith(b"\x89PNG")


def test_diff_json_is_strict(tmp_path, capsys):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b", seed=1)
    assert main(["diff", str(a), str(b), "--json", str(tmp_path / "d.json")]) == 0
    text = (tmp_path / "d.json").read_text()

    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")
    json.loads(text, parse_constant=refuse)
