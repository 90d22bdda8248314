"""Run-derived text cannot hide characters or run script in the HTML pages."""
from __future__ import annotations

import base64
import hashlib
import json
import re

from _inputs import write_run
from tracelab.app.cli import main

SNEAKY = "exp\x00one\u202eevil<script>alert(1)</script>"


def _scripts_and_policy(html: str) -> tuple[list[str], str]:
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html).group(1)
    return re.findall(r"<script>(.*?)</script>", html, re.S), policy.replace("&#39;", "'")


def _assert_pinned(html: str) -> None:
    scripts, policy = _scripts_and_policy(html)
    assert "unsafe-inline" not in policy.split("script-src")[1]
    for script in scripts:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy


def test_control_and_bidi_characters_are_shown_escaped(tmp_path):
    run = write_run(tmp_path / "run")
    meta = json.loads((run / "meta.json").read_text())
    meta["config"] = {"note": SNEAKY}
    (run / "meta.json").write_text(json.dumps(meta))
    assert main(["analyze", str(run)]) in (0, 1)
    html = (run / "report.html").read_text()
    assert "\x00" not in html and "\u202e" not in html
    assert "exp\\u0000one\\u202eevil&lt;script&gt;" in html
    _assert_pinned(html)


def test_batch_index_script_is_hash_pinned(tmp_path):
    archive = tmp_path / "archive"
    write_run(archive / "exp\u202eabc")
    out = tmp_path / "out"
    assert main(["batch", str(archive), "-o", str(out), "--jobs", "1", "--reports", "none"]) == 0
    html = (out / "index.html").read_text()
    assert "\u202e" not in html and "exp\\u202eabc" in html
    _assert_pinned(html)
