"""The report's charts: data read from the figures, downsampled keeping extremes, a static SVG
for readers without JavaScript, and in headless Chromium zoom to one step, hover values and
series toggles, with no console error and no network request."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tracelab
from tracelab import reports
from tracelab.core.run import Run
from tracelab.reports.charts import chart_json, figure_chart
from tracelab.reports.downsample import minmax

SPIKE_STEP, SPIKE = 3217, 40.0


def spiky_run(steps: int = 6000) -> Run:
    rng = np.random.default_rng(0)
    s = np.arange(steps)
    loss = 2.0 * np.exp(-s / 1500) + 0.2 + 0.01 * rng.random(steps)
    loss[SPIKE_STEP] = SPIKE
    scalars = pd.DataFrame({"step": s, "split": "train", "name": "loss", "value": loss,
                            "wall_time": 0.01 * s})
    return Run.from_frames({"name": "spiky"}, scalars=scalars)


def test_minmax_keeps_a_one_step_spike_and_gaps():
    x = np.arange(100_000, dtype=float)
    y = np.sin(x / 500)
    y[54_321], y[77_000] = 9.0, np.nan
    dx, dy = minmax(x, y, 300)
    assert len(dx) <= 2 * 300 + 300 + 2 and (np.diff(dx) > 0).all()
    assert 54_321 in dx and dy[dx == 54_321][0] == 9.0
    assert np.isnan(dy).sum() == 1 and dx[0] == 0 and dx[-1] == 99_999


def test_figure_chart_reads_lines_spans_and_scales():
    from matplotlib.figure import Figure
    fig = Figure()
    ax = fig.subplots()
    ax.plot([1, 2, 3], [1, 10, 100], label="loss", color="#ff0000")
    ax.axvspan(1.5, 2.5, color="#00ff00", alpha=0.3)
    ax.axhline(5.0, color="#0000ff")
    ax.set_yscale("log")
    ax.set_title("t <b>")
    chart = figure_chart(fig)
    (p,) = chart["panels"]
    assert p["ylog"] and p["title"] == "t <b>"
    assert p["series"][0]["label"] == "loss" and list(p["series"][0]["y"]) == [1, 10, 100]
    assert p["spans"][0]["x0"] == 1.5 and p["spans"][0]["x1"] == 2.5
    assert p["hlines"][0]["y"] == 5.0
    assert "<b>" not in chart_json(chart).replace("<", "\\u003c")


def test_figure_chart_keeps_titles_drawn_in_the_reports_style():
    from tracelab.reports.plots import style
    from matplotlib.figure import Figure
    with style():  # titles on the left, as every report figure has them
        fig = Figure()
        left, right = fig.subplots(1, 2)
        left.plot([0, 1], [1, 2])
        right.plot([0, 1], [2, 1])
        left.set_title("distinct values per batch")
        right.set_title("centre", loc="center")
    panels = figure_chart(fig)["panels"]
    assert [p["title"] for p in panels] == ["distinct values per batch", "centre"]


@pytest.fixture(scope="module")
def spiky_report(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("charts") / "report.html"
    return reports.write_html(tracelab.analyze(spiky_run()), path)


def test_every_chart_has_a_static_image_for_readers_without_javascript(spiky_report):
    html = spiky_report.read_text(encoding="utf-8")
    figures = re.findall(r'<figure class="chart">.*?</figure>', html, flags=re.S)
    assert figures and any('class="chart-data"' in f for f in figures)
    for f in figures:
        assert re.search(r'<img class="chart-static" src="data:image/(svg\+xml|png);base64,', f)
    assert "@media print" in html


from test_report_browser import _console_errors, _open, browser  # noqa: E402,F401


def _requests_outside(events: list[dict], page: Path) -> list[str]:
    """Requests other than the page and its data: URIs (chrome:// is the browser's own UI,
    which a fresh profile may load while starting)."""
    urls = [e["params"]["request"]["url"] for e in events
            if e["method"] == "Network.requestWillBeSent"]
    assert page.resolve().as_uri() in urls, "no request logged: network logging is broken"
    return [u for u in urls if u != page.resolve().as_uri()
            and not u.startswith(("data:", "chrome:", "chrome-extension:"))]


def test_chart_zooms_to_one_step_hovers_and_toggles(browser, spiky_report):  # noqa: F811
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    events = _open(browser, spiky_report)
    assert _requests_outside(events, spiky_report) == []
    assert not [e for e in events if e["method"].startswith("Network.webSocket")]
    assert browser.find_elements(By.CSS_SELECTOR, ".chart.live")
    panel = browser.find_element(By.CSS_SELECTOR, ".chart.live .chart-panel")
    static = panel.find_element(By.XPATH, "ancestor::figure//img[@class='chart-static']")
    assert not static.is_displayed()
    over = panel.find_element(By.CSS_SELECTOR, ".u-over")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", over)
    before = browser.execute_script("var u = arguments[0].uplot; return [u.scales.x.min, "
                                    "u.scales.x.max]", panel)
    # A mouse drag zooms in.
    w = over.size["width"]
    ActionChains(browser).move_to_element_with_offset(over, -w // 4, 0).click_and_hold() \
        .move_by_offset(w // 3, 0).release().perform()
    after = browser.execute_script("var u = arguments[0].uplot; return [u.scales.x.min, "
                                   "u.scales.x.max]", panel)
    assert after[1] - after[0] < 0.6 * (before[1] - before[0])
    # Down to a single step: the spike is there, at its recorded value.
    value = browser.execute_script(
        "var u = arguments[0].uplot; u.setScale('x', {min: arguments[1] - 0.5, "
        "max: arguments[1] + 0.5}); var i = u.data[0].indexOf(arguments[1]);"
        "return i < 0 ? null : Math.max.apply(null, u.data.slice(1).map("
        "function (s) { return s[i] == null ? -Infinity : s[i]; }));", panel, SPIKE_STEP)
    assert value == pytest.approx(SPIKE, rel=1e-4)
    # Hovering shows the value under the cursor.
    browser.execute_script("arguments[0].uplot.setScale('x', {min: arguments[1] - 50, "
                           "max: arguments[1] + 50})", panel, SPIKE_STEP)
    ActionChains(browser).move_to_element(over).perform()
    legend = [e.text for e in panel.find_elements(By.CSS_SELECTOR, ".u-legend .u-value")]
    assert any(re.search(r"\d", t) for t in legend[1:]), legend
    # Clicking a legend entry hides its series.
    entry = panel.find_elements(By.CSS_SELECTOR, ".u-legend .u-series")[1]
    entry.click()
    assert browser.execute_script("return arguments[0].uplot.series[1].show", panel) is False
    assert _console_errors(browser) == []
