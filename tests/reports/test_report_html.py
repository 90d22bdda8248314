"""The rendered files: HTML escaping and self-containment, Markdown for tickets, the index page."""
from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from report_data import EVIL, synthetic_diagnosis, synthetic_run
from tracelab import reports
from tracelab.core.findings import Diagnosis
from tracelab.reports.markdown import cell


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the text of <script> elements."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)


@pytest.fixture(scope="module")
def evil_html(tmp_path_factory):
    path = tmp_path_factory.mktemp("evil") / "report.html"
    reports.write_html(synthetic_diagnosis(evil=True, failed=True, steps=120), path)
    return path.read_text(encoding="utf-8")


def test_run_strings_with_markup_render_as_text(evil_html):
    # The layer, feature, config value, host name and run name all hold <script>alert(1)</script>.
    assert EVIL not in evil_html
    assert "alert(1)" in evil_html  # it is there, as escaped text
    assert evil_html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5
    # The exception text too.
    assert "&lt;device-side assert&gt; &amp; friends" in evil_html
    parsed = _Tags()
    parsed.feed(evil_html)
    scripts = [attrs for tag, attrs in parsed.tags if tag == "script"]
    code = [a for a in scripts if a.get("type") != "application/json"]
    assert len(code) == 1 and not code[0]  # our own inline script, nothing else
    # The rest are the charts' data blocks, which never run; run strings in them cannot
    # close the element.
    assert all(a == {"type": "application/json", "class": "chart-data"}
               for a in scripts if a.get("type") == "application/json")
    assert "alert" not in parsed.scripts[-1]
    assert all("<" not in text for text in parsed.scripts[:-1])
    handlers = [(t, a) for t, attrs in parsed.tags for a in attrs if a.startswith("on")]
    assert handlers == []


def test_report_is_self_contained(evil_html):
    parsed = _Tags()
    parsed.feed(evil_html)
    for tag, attrs in parsed.tags:
        for name in ("src", "href", "data", "action", "poster"):
            value = attrs.get(name)
            if value is not None:
                assert value.startswith(("data:", "#")), (tag, name, value[:80])
    assert not [t for t, _ in parsed.tags if t in ("link", "iframe", "object", "embed")]
    assert not re.search(r"url\(|@import|https?://", evil_html.split("<body>")[0])
    # Everything is locked down by policy as well, should a future edit add a reference.
    assert "default-src 'none'" in evil_html


def test_every_section_is_present_and_collapsible(evil_html):
    for section in ("findings", "overview", "environment", "config", "recorded", "skipped",
                    "errors"):
        assert re.search(rf'<section id="{section}"><details open>', evil_html), section
    assert evil_html.count('class="finding filterable') == 5
    for sev in ("error", "warning", "info"):
        assert f'id="show-{sev}" checked' in evil_html
    assert "@media print" in evil_html


def test_severity_is_shown_by_label_and_icon(evil_html):
    badges = re.findall(r'<span class="sev sev-(\w+)"><svg class="icon" aria-hidden="true">'
                        r'<use href="#i-(\w+)"/></svg>(\w+)</span>', evil_html)
    assert {(sev, icon, label) for sev, icon, label in badges} >= {
        ("error", "error", "Error"), ("warning", "warning", "Warning"), ("info", "info", "Info")}


def test_write_html_creates_the_directory_and_returns_the_path(tmp_path):
    target = tmp_path / "deep" / "er" / "r.html"
    out = reports.write_html(Diagnosis(synthetic_run(steps=30), [], [], []), target)
    assert out == target and target.exists()
    assert not list(target.parent.glob(".*.tmp"))
    assert "No problems found by the 0 rules that ran" in target.read_text(encoding="utf-8")


# -- Markdown -------------------------------------------------------------------------------------
def test_markdown_has_verdict_table_and_key_plots(tmp_path):
    d = synthetic_diagnosis(evil=True, failed=True, steps=120)
    md_path = reports.write_markdown(d, tmp_path / "ticket.md")
    md = md_path.read_text(encoding="utf-8")
    assert "**⛔ ERROR: 2 errors, 2 warnings, 1 info**" in md
    assert "| Severity | Rule | Subject | Steps | Cause | Message | Fix |" in md
    # The diagnosis comes first: the root cause, its fix and what it explains.
    head = md[:md.index("| Severity")]
    assert head.index("### Diagnosis") < head.index("1. ⛔ **Root cause: vanishing-gradients**")
    assert "- **Fix:** Use ReLU-family" in head and "- Explains: metric-stagnation (val/acc" in head
    rows = [line for line in md.splitlines() if line.startswith("| ") and "TL" in line]
    assert len(rows) == len(d.findings)
    assert rows[0].startswith("| ⚠️ Warning | TL201 vanishing-gradients |")
    assert rows[1].startswith("| ⛔ Error | TL106 metric-stagnation | val/acc | 0–119 | "
                              "1. vanishing-gradients |") and rows[1].endswith(" |  |")
    assert all(line.count(" | ") == 6 for line in rows)  # no cell broke the table
    assert EVIL not in md and "\\<script\\>alert(1)\\</script\\>" in md
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert images == ["ticket-vanishing-gradients.png", "ticket-curves.png"]
    for name in images:
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")


def test_markdown_cells_stay_one_line_and_inert():
    assert cell("a | b\nc") == "a \\| b c"
    assert cell("<img src=x>") == "\\<img src=x\\>"
    assert cell("`x` *y* _z_ [l](u)") == "\\`x\\` \\*y\\* \\_z\\_ \\[l\\](u)"


def test_markdown_without_findings(tmp_path):
    md = reports.write_markdown(Diagnosis(synthetic_run(steps=30), [], [], []),
                                tmp_path / "ok.md").read_text(encoding="utf-8")
    assert "**✅ OK: no problems found**" in md and "| Severity" not in md
    assert "![loss and metrics](ok-curves.png)" in md


def test_markdown_plot_links_hold_spaces_and_parentheses(tmp_path):
    md = reports.write_markdown(Diagnosis(synthetic_run(steps=30), [], [], []),
                                tmp_path / "my report (v2).md").read_text(encoding="utf-8")
    assert "![loss and metrics](my%20report%20%28v2%29-curves.png)" in md
    assert (tmp_path / "my report (v2)-curves.png").is_file()


@pytest.mark.parametrize("huge", [1e308, -1.7e308])
def test_markdown_of_values_near_the_float64_limit_is_written(tmp_path, huge):
    # matplotlib cannot set axis limits around them (the padding overflows to inf).
    run = synthetic_run(steps=30)
    scalars = run.scalars
    scalars.loc[(scalars.split == "val") & (scalars.name == "loss"), "value"] = huge
    md = reports.write_markdown(Diagnosis(run, [], [], []), tmp_path / "big.md").read_text(
        encoding="utf-8")
    assert "**✅ OK" in md
    assert "left out: its values are too large to draw" in md or "big-curves.png" in md


# -- index ----------------------------------------------------------------------------------------
def test_index_links_every_report_and_escapes(tmp_path):
    entries = [
        {"name": "healthy", "report": "healthy/report.html", "verdict": "no problems found",
         "worst": None, "counts": {}, "description": "A well-behaved MLP."},
        {"name": "nan-loss", "report": "nan loss/report.html", "verdict": "1 error",
         "worst": "error", "counts": {"error": 1}, "description": f"LR too high {EVIL}"},
        ("tuple-form", "t/report.html", "2 warnings"),
        {"name": "x", "report": "javascript:alert(1)", "verdict": ""},
    ]
    html = reports.write_index(entries, tmp_path / "index.html").read_text(encoding="utf-8")
    hrefs = re.findall(r'<a href="([^"]*)">', html)
    assert hrefs == ["healthy/report.html", "nan loss/report.html", "t/report.html",
                     "./javascript:alert(1)"]
    assert EVIL not in html and "LR too high &lt;script&gt;" in html
    assert "1 error" in html and "2 warnings" in html and "tuple-form" in html


def test_json_output_is_the_diagnosis_document(tmp_path):
    import json
    d = synthetic_diagnosis(steps=30)
    doc = json.loads(reports.write_json(d, tmp_path / "d.json").read_text(encoding="utf-8"))
    assert doc["verdict"]["worst"] == "error"
    assert [f["rule"] for f in doc["findings"]] == [f.rule for f in d.findings]
    assert doc == json.loads(reports.json_text(d))
