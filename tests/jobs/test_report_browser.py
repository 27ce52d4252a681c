"""The inference report in a real headless browser (Debian's Chromium and ChromeDriver).

`.ci/run` installs them when missing; the test skips with the reason only when they cannot be
found on this machine.
"""

from __future__ import annotations

import json
import shutil

import pytest

from pulse_ml.config import compose
from pulse_ml.jobs import infer, train
from pulse_ml.report.tables import estimator_label


def _driver():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if not chromium or not chromedriver:
        pytest.skip("Chromium/ChromeDriver not found (apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(chromedriver), options=options)


def test_report_loads_without_console_errors_and_shows_effects(small_demo, pulse_home):
    train.run(compose("train", [f"data.path={small_demo}", "tuning.n_trials=2",
                                "progress=false", "model=ordinal_logit"]))
    infer.run(compose("infer", [f"data.path={small_demo}", "permutations=500"]))
    out = pulse_home / "results" / "infer"
    effects = json.loads((out / "effects.json").read_text())["effects"]
    driver = _driver()
    try:
        driver.get((out / "report.html").as_uri())
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
        from selenium.webdriver.common.by import By

        for summary in driver.find_elements(By.TAG_NAME, "summary"):
            summary.click()  # the detail tables are collapsed under the decisions
        table = driver.find_element(By.ID, "effects")
        headers = [th.text for th in table.find_elements(By.TAG_NAME, "th")]
        rows = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
        assert len(rows) == len(effects)
        for row, want in zip(rows, effects, strict=True):
            cell = dict(zip(headers, row, strict=True))
            assert cell["case_study"] == want["case_study"]
            assert cell["estimator"] == estimator_label(want["estimator"])  # PPI++ for people
            for key in ("effect", "ci_lower", "ci_upper"):
                assert cell[key] == f"{want[key]:.3f}"
        image = driver.find_element(By.TAG_NAME, "img")
        assert driver.execute_script("return arguments[0].naturalWidth", image) > 100
    finally:
        driver.quit()


def test_report_leads_with_decision_cards_equal_to_decisions_json(small_demo, pulse_home):
    """One card per case study, first on the page, saying what decisions.json says; the page
    fits 1280 px without horizontal scrolling and names no absolute local path."""
    train.run(compose("train", [f"data.path={small_demo}", "tuning.n_trials=2",
                                "progress=false", "model=ordinal_logit"]))
    infer.run(compose("infer", [
        f"data.path={small_demo}", "permutations=500", "log_mlflow=false",
        "declare.plan.guardrails.cost_usd={better: lower, margin: 0.5, relative: true}",
        "declare.claude4_vs_gpt5.decision={rule: non_inferiority, margin: 3}"]))
    out = pulse_home / "results" / "infer"
    records = json.loads((out / "decisions.json").read_text())["decisions"]
    driver = _driver()
    try:
        driver.set_window_size(1280, 900)
        driver.get((out / "report.html").as_uri())
        from selenium.webdriver.common.by import By

        assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
        first = driver.find_element(By.CSS_SELECTOR, "h2")
        assert first.text == "Decisions"
        cards = driver.find_elements(By.CSS_SELECTOR, "#decisions .card")
        assert len(cards) == len(records) == 2
        for card, want in zip(cards, records, strict=True):
            assert card.get_attribute("data-case-study") == want["case_study"]
            assert card.find_element(By.CLASS_NAME, "decision").text == want["decision"]
            assert card.find_element(By.CLASS_NAME, "effect").text == f"{want['effect']:+.3f}"
            assert card.find_element(By.CLASS_NAME, "interval").text == (
                f"[{want['ci_lower']:+.3f}, {want['ci_upper']:+.3f}]")
            shown = [li.text for li in card.find_elements(By.TAG_NAME, "li")]
            assert shown[:len(want["reasons"])] == want["reasons"]
            rows = card.find_elements(By.CSS_SELECTOR, "tr.guardrail")
            assert len(rows) == len(want["guardrails"])
        assert {r["decision"] for r in records} >= {"ship"}
        width = driver.execute_script("return [document.documentElement.scrollWidth, "
                                      "document.documentElement.clientWidth]")
        assert width[0] <= width[1], width
        assert str(pulse_home) not in driver.page_source
        assert str(small_demo.parent) not in driver.page_source
    finally:
        driver.quit()


def test_report_shows_hostile_names_as_text(small_demo, pulse_home, tmp_path, trained_home):
    """Names are data in the browser too: markup and formulas in case-study and condition names
    are shown as typed, nothing runs (issue 26)."""
    import pandas as pd
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    trained_home("progress=false", "model=mean")
    names = {"plan": "<img src=x onerror=alert(1)> plan (ü)",
             "claude4_vs_gpt5": '=HYPERLINK("http://x")'}
    frame = pd.read_parquet(small_demo)
    frame["case_study"] = frame["case_study"].map(lambda v: names.get(v, v))
    frame["condition"] = frame["condition"].replace({"no-plan": "<b>$x^2$</b> (control)"})
    path = tmp_path / "hostile.parquet"
    frame.to_parquet(path, index=False)
    infer.run(compose("infer", [f"data.path={path}", "permutations=200"]))
    out = pulse_home / "results" / "infer"
    driver = _driver()
    try:
        driver.get((out / "report.html").as_uri())
        try:
            text = driver.switch_to.alert.text
            pytest.fail(f"a name ran as script (alert {text!r})")
        except NoAlertPresentException:
            pass
        assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
        assert driver.find_elements(By.CSS_SELECTOR, "img[src='x']") == []
        assert driver.find_elements(By.CSS_SELECTOR, "#effects b") == []
        for summary in driver.find_elements(By.TAG_NAME, "summary"):
            summary.click()  # the detail tables are collapsed under the decisions
        cards = {c.get_attribute("data-case-study")
                 for c in driver.find_elements(By.CSS_SELECTOR, "#decisions .card")}
        assert names["plan"] in cards  # a card's names are text too
        table = driver.find_element(By.ID, "effects")
        shown = {td.text for td in table.find_elements(By.CSS_SELECTOR, "tbody td")}
        assert names["plan"] in shown and names["claude4_vs_gpt5"] in shown, sorted(shown)
    finally:
        driver.quit()
