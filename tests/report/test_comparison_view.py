"""compare's printed paired table fits 100 columns (it was 123) and names what rows share."""

from __future__ import annotations

import pandas as pd

from pulse_ml.report.comparison import paired_view, shared_values
from pulse_ml.report.tables import text_table


def _paired(features, seeds, versions) -> pd.DataFrame:
    n = len(features)
    return pd.DataFrame({
        "name": ["ordinal_logit"] * n, "features": features, "seed": seeds, "version": versions,
        "delta_mse": [-0.0321] * n, "mse_ci_lower": [-0.0902] * n, "mse_ci_upper": [0.0335] * n,
        "delta_r": [0.0261] * n, "r_ci_lower": [-0.1017] * n, "r_ci_upper": [0.0481] * n})


def test_the_paired_table_fits_100_columns_in_a_sweep_and_on_the_demo():
    sweep = _paired(["user", "progression", "agent", "all"], ["0", "1", "2", "3"], ["-"] * 4)
    demo = _paired(["all"] * 3, ["42"] * 3, ["-", "3", "1"])
    for paired in (sweep, demo):
        view = paired_view(paired, ["better (ΔMSE)", "worse (ΔMSE)", "no (Δr)", "no claim"][
            :len(paired)], 95)
        text = text_table(view)
        assert max(len(line) for line in text.splitlines()) <= 100, text
        assert "-0.032 [-0.090, +0.034]" in text and "+0.026 [-0.102, +0.048]" in text
    assert "features" in paired_view(sweep, ["no"] * 4, 95)
    assert "version" not in paired_view(sweep, ["no"] * 4, 95)  # none registered
    assert list(paired_view(demo, ["no"] * 3, 90).columns) == [
        "name", "version", "ΔMSE [90% CI]", "Δr [90% CI]", "significant"]
    assert shared_values(demo) == "features 'all', seed 42" and shared_values(sweep) == ""


def test_the_main_table_fits_100_columns_when_features_and_folds_vary():
    """Rows differing in features and cv.group_by: the optional columns give way, named."""
    from pulse_ml import keys
    from pulse_ml.report.comparison import expected_ref, terminal_view
    from pulse_ml.report.tables import fitted_table

    n = 4
    shown = pd.DataFrame({
        "name": ["random_forest", "ordinal_logit", "hist_gb", "judge_gemini_2_5_pro"],
        "features": ["progression", "all_judge_text", "agent", "all"], "kind": ["model"] * n,
        "mse": [1.5852] * n, "r": [0.3223] * n, "r_std": [0.0331] * n,
        "ci_red_%": [5.01] * n, "ci_red_ref_%": [5.01] * n, "version": ["12", "-", "3", "-"],
        keys.CV_GROUP_BY: ["user_id", "session", "user_id", "session"],
        "d_mse": [float("nan"), -0.0123, 0.0144, 0.0176],
        "d_mse_ci": ["reference", "", "", ""]})
    view = terminal_view(shown)
    assert "features" in view and "folds" in view
    wide = text_table(view)
    assert max(len(line) for line in wide.splitlines()) > 100  # the case that needs the rule
    table, left_out = fitted_table(view, [expected_ref(20.0), "version"])
    assert max(len(line) for line in table.splitlines()) <= 100, table
    assert left_out and left_out[0] == expected_ref(20.0)
    assert "expected_ci_red_%" in table and "folds" in table and "features" in table
    narrow, none = fitted_table(view.iloc[:, :4], [expected_ref(20.0)])
    assert none == [] and narrow == text_table(view.iloc[:, :4])  # nothing left out needlessly
