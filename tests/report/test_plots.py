"""Figure content read from matplotlib's text artists (labels, numbers, level, watermark)."""

from __future__ import annotations

import pandas as pd
import pytest

from pulse_ml.report.plots import forest_figure, pyplot


def _effects() -> pd.DataFrame:
    return pd.DataFrame({
        "case_study": ["plan", "plan", "tone", "tone"],
        "control": ["old_plan", "old_plan", "terse", "terse"],
        "treatment": ["new_plan", "new_plan", "warm", "warm"],
        "estimator": ["naive", "augmented", "naive", "augmented"],
        "effect": [0.25, 0.2, -0.01, 0.02], "ci_lower": [0.01, 0.05, -0.2, -0.1],
        "ci_upper": [0.5, 0.35, 0.18, 0.14],
        "ci_reduction_pct": [float("nan"), 40.0, float("nan"), -3.5]})


def _texts(fig) -> list[str]:
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    for ax in fig.axes:
        texts += [t.get_text() for t in ax.get_yticklabels()]
        texts += [ax.get_xlabel(), ax.get_title()]
    return [t for t in texts if t]


@pytest.fixture
def texts():
    made = []

    def draw(**kwargs) -> str:
        fig = forest_figure(_effects(), **kwargs)
        made.append(fig)
        return "\n".join(_texts(fig))

    yield draw
    for fig in made:
        pyplot().close(fig)


def test_forest_rows_name_treatment_minus_control_and_print_the_numbers(texts):
    page = texts(title="Effects in sessions.parquet", subtitle="model m (v3, lightgbm)")
    assert "new_plan − old_plan" in page and "warm − terse" in page
    assert "+0.200 [+0.050, +0.350]  CI 40.0% narrower" in page
    assert "+0.020 [-0.100, +0.140]  CI 3.5% wider" in page
    assert "+0.250 [+0.010, +0.500]" in page  # naive row: numbers, no CI reduction
    assert "Effects in sessions.parquet\nmodel m (v3, lightgbm)" in page
    assert "95% CI" in page and "NOT VALID" not in page


def test_forest_level_follows_alpha_and_in_sample_is_watermarked(texts):
    page = texts(alpha=0.1, invalid=True)
    assert "90% CI" in page and "95%" not in page
    assert "NOT VALID" in page
