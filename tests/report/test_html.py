"""The HTML report: self-contained, escaped, the effects table carries the numbers."""

from __future__ import annotations

import pandas as pd

from pulse_ml.report.html import html_table, inference_report


def _effects() -> pd.DataFrame:
    return pd.DataFrame({
        "case_study": ["plan", "plan"], "control": ["a<b>", "a<b>"],
        "treatment": ["t", "t"], "estimator": ["naive", "augmented"],
        "effect": [0.25, 0.2], "ci_lower": [0.01, 0.02], "ci_upper": [0.5, 0.4],
        "ci_reduction_pct": [0.0, 6.5], "p_value": [0.04, 0.03],
        "n_labeled_control": [10, 10], "n_labeled_treatment": [11, 11],
        "n_unlabeled_control": [100, 100], "n_unlabeled_treatment": [90, 90]})


def test_report_is_self_contained_escaped_and_shows_the_numbers(tmp_path):
    path = inference_report(tmp_path / "report.html", _effects(),
                            {"model": "m", "model_version": "3", "mode": "crossfit",
                             "alpha": 0.05, "notes": ["n1"]},
                            {"version": "3", "family": "lightgbm"})
    page = path.read_text()
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert "a&lt;b&gt;" in page and "a<b>" not in page
    assert "0.250" in page and "6.500" in page and "95% intervals" in page
    assert "lightgbm" in page and "note: n1" in page


def test_in_sample_report_says_not_valid(tmp_path):
    path = inference_report(tmp_path / "r.html", _effects(), {"alpha": 0.05}, {}, valid=False,
                            invalid_reason="NOT valid: in-sample")
    assert 'class="warning">NOT valid: in-sample' in path.read_text()


def test_html_table_blanks_missing_values():
    html = html_table(pd.DataFrame({"a": [1.0, float("nan")], "b": ["x", None]}))
    assert html.count("<td></td>") == 1 and "<td class=\"text\"></td>" in html


def test_level_follows_alpha_in_the_page_and_the_terminal_view(tmp_path):
    from pulse_ml.jobs.infer import printable

    page = inference_report(tmp_path / "r.html", _effects(), {"alpha": 0.1}, {}).read_text()
    assert "90% intervals" in page and "95%" not in page
    view = printable(_effects(), {}, alpha=0.1)
    assert "effect [90% CI]" in view.columns
    assert "effect [95% CI]" in printable(_effects(), {}).columns
