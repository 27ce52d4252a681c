"""The HTML report: self-contained, escaped, the effects table carries the numbers."""

from __future__ import annotations

import pandas as pd

from pulse_ml.report.html import html_table, inference_report


def _effects() -> pd.DataFrame:
    return pd.DataFrame({
        "case_study": ["plan", "plan"], "control": ["a<b>", "a<b>"],
        "treatment": ["t", "t"], "estimator": ["naive", "augmented"],
        "effect": [0.25, 0.2], "ci_lower": [0.01, 0.02], "ci_upper": [0.5, 0.4],
        "ci_reduction_pct": [float("nan"), 6.5], "p_value": [0.04, 0.03],
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


def _siblings(root, identity: dict) -> None:
    import json

    (root / "audit").mkdir(parents=True)
    (root / "monitor").mkdir()
    (root / "infer").mkdir()
    split = {"augmented": {"rate": 0.947, "mc_se": 0.007, "verdict": "looks valid"},
             "naive": {"rate": 0.951, "mc_se": 0.0069, "verdict": "looks valid"}}
    (root / "audit" / "audit_plan.json").write_text(json.dumps(
        {"case_study": "plan", "split_half": split, "verdict": "looks valid", **identity}))
    (root / "audit" / "audit_old.json").write_text(json.dumps(
        {"case_study": "old", "some_rate": 0.5}))  # no identity: another run
    (root / "monitor" / "monitor.json").write_text(json.dumps(
        {**identity, "model_version": "2"}))  # another model version
    pd.DataFrame({"case_study": ["plan"], "estimator": ["augmented"], "look": [1],
                  "effect": [0.1]}).to_csv(root / "monitor" / "monitor.csv", index=False)


def test_audit_and_monitor_shown_only_when_model_and_data_match(tmp_path):
    identity = {"model_version": "3", "data_fingerprint": "abc"}
    _siblings(tmp_path, identity)
    page = inference_report(tmp_path / "infer" / "report.html", _effects(),
                            {"alpha": 0.05, **identity}, {}, results_root=tmp_path).read_text()
    assert "Audit: plan" in page and "split_half" in page
    assert "0.947" in page and "0.007" in page and "looks valid" in page  # per-method verdicts
    assert "built 20" in page and "UTC" in page
    assert "Audit: old" not in page and "Monitoring (last look)" not in page
    assert "from another run, not matched" in page
    assert "audit_old.json" in page and "monitor.csv" in page


def test_no_sibling_result_matches_another_data_fingerprint(tmp_path):
    _siblings(tmp_path, {"model_version": "3", "data_fingerprint": "abc"})
    page = inference_report(tmp_path / "infer" / "report.html", _effects(),
                            {"alpha": 0.05, "model_version": "3", "data_fingerprint": "xyz"},
                            {}, results_root=tmp_path).read_text()
    assert "Audit: plan" not in page and "audit_plan.json" in page


def test_people_read_ppi_plus_plus_where_the_files_say_augmented(tmp_path):
    """One name for the estimator: the page, the terminal view and the plot say PPI++."""
    from pulse_ml.jobs.infer import printable
    from pulse_ml.report.plots import forest_figure

    identity = {"model_version": "3", "data_fingerprint": "abc"}
    _siblings(tmp_path, identity)
    page = inference_report(tmp_path / "infer" / "report.html", _effects(),
                            {"alpha": 0.05, **identity}, {}, results_root=tmp_path).read_text()
    cells = page.split('id="effects"')[1].split("</table>")[0]
    assert ">PPI++<" in cells and "augmented" not in cells
    audit = page.split("Audit: plan")[1]
    assert ">PPI++<" in audit.split("</table>")[0]  # the split-half row of the PPI++ method
    assert list(printable(_effects(), {})["estimator"]) == ["naive", "PPI++"]
    fig = forest_figure(_effects())
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(label.startswith("PPI++") for label in labels)
    assert not any("augmented" in label for label in labels)
