"""The report's charts: data from the chart builder, downsampled keeping extremes, a static SVG
for readers without JavaScript, and in headless Chromium zoom to one step, hover values and
series toggles, with no console error and no network request."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tracelab
from tracelab import reports
from tracelab.core.run import Run
from tracelab.reports.chart import Chart
from tracelab.reports.chart_html import chart_json
from tracelab.reports.plots import draw_series
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


def test_a_panel_gives_its_lines_spans_and_scales_as_data():
    chart = Chart(2.0, 8.0)
    ax = chart.panel()
    ax.line([1, 2, 3], [1, 10, 100], label="loss", color="#ff0000")
    ax.span(1.5, 2.5, color="#00ff00", alpha=0.3)
    ax.hline(5.0, color="#0000ff")
    ax.log("y")
    ax.title = "t <b>"
    spec = chart.spec()
    (p,) = spec["panels"]
    assert p["ylog"] and p["title"] == "t <b>"
    assert p["series"][0]["label"] == "loss" and list(p["series"][0]["y"]) == [1, 10, 100]
    assert p["spans"][0]["x0"] == 1.5 and p["spans"][0]["x1"] == 2.5
    assert p["hlines"][0]["y"] == 5.0
    # matplotlib's default limits: the data plus 5% each side, in log space on a log axis
    assert p["xlim"] == pytest.approx([0.9, 3.1])
    assert p["ylim"] == pytest.approx([10 ** -0.1, 10 ** 2.1])
    assert "<b>" not in chart_json(spec).replace("<", "\\u003c")


def test_draw_series_of_a_short_series_is_its_values_and_a_long_one_keeps_its_spike():
    chart = Chart(2.0, 8.0)
    ax = chart.panel()
    draw_series(ax, pd.Series([3.0, 1.0, 2.0], index=[10, 11, 12]), name="loss", color="#123456")
    (p,) = chart.spec()["panels"]
    (s,) = p["series"]
    assert (s["label"], s["color"], s["width"]) == ("loss", "#123456", 1.2)
    assert list(s["x"]) == [10, 11, 12] and list(s["y"]) == [3, 1, 2] and not p["bands"]
    # 6,000 steps are binned to a mean line and a min/max band: the spike is the band's top
    run = spiky_run()
    chart = Chart(2.0, 8.0)
    draw_series(chart.panel(), run.loss("train"), name="train")
    (p,) = json.loads(chart_json(chart.spec(), points=400))
    (band,) = p["bands"]
    assert max(band["hi"]) == pytest.approx(SPIKE, rel=1e-4)
    assert band["x"][int(np.argmax(band["hi"]))] <= SPIKE_STEP


def test_shared_x_axes_take_one_range_and_a_grid_is_laid_out_as_matplotlib_does():
    chart = Chart(4.0, 8.0)
    top, bottom = chart.grid(2, 1, sharex=True)
    top.line([0, 100], [1, 2])
    bottom.line([50, 60], [1, 2])
    a, b = chart.spec()["panels"]
    assert a["xlim"] == b["xlim"] == pytest.approx([-5, 105])
    assert a["box"] == pytest.approx([0.125, 0.53, 0.775, 0.35], abs=1e-9)
    assert b["box"] == pytest.approx([0.125, 0.11, 0.775, 0.35], abs=1e-9)


def test_bars_start_at_their_base_and_marks_along_the_top_leave_the_range_alone():
    chart = Chart(2.0, 8.0)
    bars, rug = chart.grid(1, 2)
    bars.hist([1.0, 2.0, 2.5, 3.0], bins=[0, 1, 2, 3], density=False, color="#111111")
    rug.line([0, 10], [1.0, 3.0])
    rug.rug([4, 7], color="#c62828", label="steps with NaN/Inf")
    left, right = chart.spec()["panels"]
    assert [r["h"] for r in left["rects"]] == [0, 1, 3] and left["ylim"][0] == 0.0
    assert right["ylim"] == pytest.approx([0.9, 3.1])
    marks = right["series"][-1]
    assert marks["points"] and list(marks["x"]) == [4, 7]
    assert marks["y"] == pytest.approx([0.9 + 0.97 * 2.2] * 2)


def test_heatmap_colours_are_matplotlibs():
    from tracelab.reports.heatmap_pixels import HEAT, to_rgba
    mcolors = pytest.importorskip("matplotlib.colors")
    import matplotlib
    data = np.random.default_rng(0).normal(size=(20, 50)) * 2
    data[3, 5] = np.nan
    for diverging in (False, True):
        cmap = (matplotlib.colormaps["RdBu_r"] if diverging
                else mcolors.LinearSegmentedColormap.from_list("h", list(HEAT)))
        want = cmap.with_extremes(bad="#00e5ff")(mcolors.Normalize(-1.3, 2.1)(
            np.ma.masked_invalid(data)), bytes=True)
        assert (to_rgba(data, -1.3, 2.1, diverging=diverging) == want).all()


def test_the_html_report_imports_no_matplotlib(tmp_path):
    code = ("import sys; sys.path.insert(0, %r); import tracelab; from tracelab import reports; "
            "from report_data import synthetic_diagnosis; "
            "reports.write_html(synthetic_diagnosis(steps=120), %r); "
            "reports.write_json(synthetic_diagnosis(steps=120), %r); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))"
            % (str(Path(__file__).parent), str(tmp_path / "r.html"), str(tmp_path / "r.json")))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    assert 'class="chart-data"' in (tmp_path / "r.html").read_text(encoding="utf-8")


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


from test_report_browser import (_console_errors, _open, _requests_outside,  # noqa: E402,F401
                                 browser)


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
