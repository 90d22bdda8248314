"""The size budget: a 100-layer, 10,000-step run's report stays under 1.5 MB."""
from __future__ import annotations

import base64
import re

from report_data import synthetic_diagnosis, synthetic_run
from tracelab import reports
from tracelab.app.engine import all_rules
from tracelab.core.findings import Diagnosis, Finding
from tracelab.reports.context import build_context

BUDGET = 1_500_000


def test_large_run_report_stays_under_budget(tmp_path):
    run = synthetic_run(layers=100, steps=10_000, modules=100, act_every=10, seed=3)
    assert len(run.tensors) == 3 * 100 * 10_000 + 100 * 1_000
    d = synthetic_diagnosis(run)
    path = reports.write_html(d, tmp_path / "report.html")
    size = path.stat().st_size
    print(f"report of 100 layers x 10,000 steps: {size / 1e6:.2f} MB")
    assert size < BUDGET, f"{size:,} bytes"
    html = path.read_text(encoding="utf-8")
    # Every overview plot and every finding's plot made it in, as inline images.
    svgs = [base64.b64decode(m) for m in
            re.findall(r'<img class="chart-static" src="data:image/svg\+xml;base64,([^"]+)"',
                       html)]
    assert len(svgs) == 5 + 4  # overview + the findings that have a plot
    # The per-layer overview views are heatmaps, not 100 lines: one embedded raster for each.
    curves, grads, ratio, acts, timing = svgs[4:]
    assert [s.count(b"<image") for s in (curves, grads, ratio, acts, timing)] == [0, 1, 1, 2, 0]
    # The line charts are interactive too, their data downsampled within the budget.
    assert html.count('class="chart-data"') >= 2
    md = reports.write_markdown(d, tmp_path / "ticket.md")
    pngs = sorted(p.name for p in tmp_path.glob("ticket-*.png"))
    assert pngs == ["ticket-curves.png", "ticket-vanishing-gradients.png"]  # the root cause
    assert all((tmp_path / p).stat().st_size < 300_000 for p in pngs)
    assert md.stat().st_size < 10_000


def test_many_findings_share_a_plot_budget(tmp_path, monkeypatch):
    monkeypatch.setattr("tracelab.reports.findings_context.MAX_FINDING_PLOTS", 3)  # fewer plots to draw
    monkeypatch.setattr("tracelab.reports.context.OVERVIEW", ())
    run = synthetic_run(layers=30, steps=600, modules=4)
    names = run.names("grad")
    many = [Finding("update-ratio", "TL206", "warning", name, (0, 599),
                    f"'{name}' barely moves.", {"worst_ratio": 1e-7}, "Raise the LR.")
            for name in names]
    d = Diagnosis(run, many, [], [], rules={s.name: s for s in all_rules()})
    ctx = build_context(d, plots=False)
    assert all(f["plot"]["uri"] is None for f in ctx["findings"])
    path = reports.write_html(d, tmp_path / "many.html")
    html = path.read_text(encoding="utf-8")
    # The first finding's plot is the diagnosis's key plot, shown once, above the findings.
    drawn = html.count('<img class="chart-static" src="data:image/svg+xml')
    assert drawn == 3
    note = f"Plot left out to keep this file small; the first {drawn} findings have theirs."
    assert html.count(note) == len(many) - drawn
    assert path.stat().st_size < BUDGET
