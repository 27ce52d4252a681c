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
        table = driver.find_element(By.ID, "effects")
        shown = {td.text for td in table.find_elements(By.CSS_SELECTOR, "tbody td")}
        assert names["plan"] in shown and names["claude4_vs_gpt5"] in shown, sorted(shown)
    finally:
        driver.quit()
