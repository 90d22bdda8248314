"""The report in a real browser: headless Chromium opens it from file:// with the network
logged (Chrome DevTools performance log), and the page is checked as a reader would see it.

Needs the Debian packages chromium and chromium-driver (`.ci/run` installs them).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from report_data import EVIL, synthetic_diagnosis
from tracelab import reports

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

NO_CHROMIUM = ("headless Chromium is not installed (apt-get install chromium chromium-driver; "
               ".ci/run installs both)")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason=NO_CHROMIUM)

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
         "--disable-default-apps", "--disable-extensions", "--window-size=1280,2000")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (CHROMIUM and DRIVER):  # for the other modules' tests that use this browser
        pytest.skip(NO_CHROMIUM)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory) -> Path:
    """A demo scenario trained for real (a few seconds), analyzed and reported."""
    pytest.importorskip("torch", reason="the demo scenarios train with torch")
    import tracelab
    from tracelab.app.demo import SCENARIOS

    run_dir = tmp_path_factory.mktemp("demo") / "timestamp_collapse"
    SCENARIOS["timestamp_collapse"].train(run_dir)  # the quickest scenario to train
    return reports.write_html(tracelab.analyze(run_dir), run_dir / "report.html")


@pytest.fixture(scope="module")
def evil_report(tmp_path_factory) -> Path:
    """Every severity, and markup in every run-derived string."""
    path = tmp_path_factory.mktemp("evil") / "report.html"
    return reports.write_html(synthetic_diagnosis(evil=True, failed=True, steps=150), path)


def _open(driver, path: Path) -> list[dict]:
    """Load the page; return the CDP Network events logged while loading it."""
    driver.get_log("performance")  # drop what an earlier page left
    driver.get_log("browser")
    driver.get(path.resolve().as_uri())
    driver.execute_script("return document.readyState")
    events = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"].startswith("Network."):
            events.append(message)
    return events


# The browser's own pages (the new-tab page a fresh profile loads on start, in Chromium 150
# from chrome:// and chrome-untrusted://): never requests of the report, nor network.
BROWSER_INTERNAL = ("chrome:", "chrome-untrusted:", "chrome-extension:", "devtools:")


def _requests_outside(events: list[dict], page: Path) -> list[str]:
    """Requests other than the page, its data: URIs and the browser's own pages."""
    urls = [e["params"]["request"]["url"] for e in events
            if e["method"] == "Network.requestWillBeSent"]
    assert page.resolve().as_uri() in urls, "no request of the page logged: logging is broken"
    return [u for u in urls if u != page.resolve().as_uri()
            and not u.startswith(("data:",) + BROWSER_INTERNAL)]


def _assert_no_network(events: list[dict], page: Path) -> None:
    outside = _requests_outside(events, page)
    assert outside == [], f"the report requested {outside}"
    sockets = [e for e in events if e["method"].startswith("Network.webSocket")]
    assert sockets == []


def _console_errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def _visible_findings(driver) -> dict[str, bool]:
    from selenium.webdriver.common.by import By
    return {el.get_attribute("id"): el.is_displayed()
            for el in driver.find_elements(By.CSS_SELECTOR, "details.finding")}


def _screenshot(driver, tmp_path_factory, name: str) -> Path:
    driver.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(int(height) + 50, 16000))
    shot = tmp_path_factory.mktemp("screens") / f"{name}.png"
    assert driver.save_screenshot(str(shot))
    print(f"screenshot: {shot}")
    driver.set_window_size(1280, 2000)
    return shot


def test_demo_report_in_chromium(browser, demo_report, tmp_path_factory):
    from selenium.webdriver.common.by import By

    events = _open(browser, demo_report)
    _assert_no_network(events, demo_report)
    assert _console_errors(browser) == []

    findings = browser.find_elements(By.CSS_SELECTOR, "details.finding")
    assert findings and all(f.is_displayed() for f in findings)
    first = findings[0]
    assert "input-collapse" in browser.find_element(By.ID, "findings").text
    message = first.find_element(By.CSS_SELECTOR, ".message")
    assert message.is_displayed() and message.text
    # Every plot decoded: an image that failed would have no natural width.
    widths = browser.execute_script(
        "return Array.from(document.images).map(i => i.complete ? i.naturalWidth : 0)")
    assert widths and all(w > 0 for w in widths)

    severity = first.get_attribute("class").split("sev-")[1].split()[0]
    browser.find_element(By.CSS_SELECTOR, f"label.sev-{severity}").click()
    assert not first.is_displayed()
    browser.find_element(By.CSS_SELECTOR, f"label.sev-{severity}").click()
    assert first.is_displayed()

    shot = _screenshot(browser, tmp_path_factory, "demo-report")
    assert shot.stat().st_size > 10_000


def test_filter_hides_exactly_the_unchecked_severities(browser, evil_report, tmp_path_factory):
    from selenium.webdriver.common.by import By

    events = _open(browser, evil_report)
    _assert_no_network(events, evil_report)
    assert _console_errors(browser) == []
    # The markup in run strings stayed text: no alert opened, and the name reads literally.
    assert browser.find_element(By.TAG_NAME, "h1").text == f"run {EVIL}"
    # One script runs; the charts' data blocks (type application/json) never execute.
    assert browser.execute_script(
        "return document.querySelectorAll('script:not([type=\"application/json\"])').length"
    ) == 1

    def shown():
        return {sev: [vis for fid, vis in _visible_findings(browser).items()
                      if browser.find_element(By.ID, fid).get_attribute("class")
                      .endswith(f"sev-{sev}")] for sev in ("error", "warning", "info")}

    before = shown()
    assert all(before[s] and all(before[s]) for s in before), before
    browser.find_element(By.CSS_SELECTOR, "label.sev-warning").click()
    browser.find_element(By.CSS_SELECTOR, "label.sev-info").click()
    after = shown()
    assert all(after["error"]) and not any(after["warning"]) and not any(after["info"])
    # The summary table follows the filter too.
    rows = browser.find_elements(By.CSS_SELECTOR, "table.glance tbody tr")
    errors = ["sev-error" in r.get_attribute("class") for r in rows]
    assert sum(errors) == 2 and [r.is_displayed() for r in rows] == errors
    browser.find_element(By.CSS_SELECTOR, "label.sev-warning").click()
    browser.find_element(By.CSS_SELECTOR, "label.sev-info").click()
    assert all(all(v) for v in shown().values())

    # Collapsing a section hides its content; expanding brings it back.
    env = browser.find_element(By.CSS_SELECTOR, "#environment > details")
    env.find_element(By.TAG_NAME, "summary").click()
    assert not env.find_element(By.TAG_NAME, "table").is_displayed()
    env.find_element(By.TAG_NAME, "summary").click()
    assert env.find_element(By.TAG_NAME, "table").is_displayed()
    _screenshot(browser, tmp_path_factory, "every-severity")


def test_without_javascript_all_content_is_present(browser, evil_report):
    """Disable JS through CDP: every finding, plot and section must still be in the page."""
    from selenium.webdriver.common.by import By

    browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        _open(browser, evil_report)
        assert all(_visible_findings(browser).values())
        assert len(_visible_findings(browser)) == 5
        for section in ("overview", "environment", "config", "recorded", "skipped"):
            assert browser.find_element(By.ID, section).is_displayed()
        # The CSS filter does not need JS either.
        browser.find_element(By.CSS_SELECTOR, "label.sev-error").click()
        assert not any(v for fid, v in _visible_findings(browser).items()
                       if "sev-error" in browser.find_element(By.ID, fid).get_attribute("class"))
        # The JS-only buttons stay hidden.
        assert not browser.find_element(By.CSS_SELECTOR, ".js-only").is_displayed()
    finally:
        browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})
