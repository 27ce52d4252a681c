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
