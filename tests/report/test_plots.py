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


def _title_texts(fig) -> str:
    return "\n".join([fig._suptitle.get_text() if fig._suptitle else ""]
                     + [ax.get_title() for ax in fig.axes])


def test_comparison_agreement_and_scatter_titles_name_data_and_model(tmp_path):
    from pulse_ml.report.plots import agreement_chart, comparison_plot, task_delta_scatter

    frame = pd.DataFrame({"name": ["lightgbm", "judge"], "features": ["all", "-"],
                          "kind": ["model", "llm judge"], "r": [0.3, 0.2],
                          "r_std": [0.02, 0.03], "version": ["3", "-"]})
    fig = comparison_plot(frame, tmp_path / "c.png", "3",
                          subtitle="data fingerprint ab12; reference champion v3")
    assert "data fingerprint ab12; reference champion v3" in _title_texts(fig)
    summary = pd.DataFrame({"category": ["a", "b"], "predictor": ["model", "model"],
                            "agreement_pct": [60.0, 55.0], "ci_lower_pct": [50.0, 45.0],
                            "ci_upper_pct": [70.0, 65.0], "n_pairs": [40, 30]})
    fig = agreement_chart(summary, tmp_path / "a.png", "exclude", alpha=0.1,
                          subtitle="pairs p.csv, sessions s.parquet; model: models:/m/3")
    titles = _title_texts(fig)
    assert "90% Wilson" in titles and "sessions s.parquet; model: models:/m/3" in titles
    deltas = pd.DataFrame({"comparison": ["x", "x", "x"], "used": [True, True, True],
                           "delta_h": [1.0, 2.0, -1.0], "delta_h_ci_lower": [0.5, 1.0, -2.0],
                           "delta_h_ci_upper": [1.5, 3.0, 0.0], "delta_b": [2.0, 3.0, -1.0],
                           "source": ["model"] * 3, "delta_h_paper": [1.1, 1.9, -0.8],
                           "benchmark": ["b1", "b2", "b3"]})
    corr = pd.DataFrame({"comparison": ["x"], "source": ["model"], "pearson_r": [0.9],
                         "paper_printed_r": [0.8]})
    fig = task_delta_scatter(deltas, corr, tmp_path / "s.png",
                             subtitle="Delta_H from d.parquet, model models:/m/3")
    assert "Delta_H from d.parquet, model models:/m/3" in _title_texts(fig)
    assert all((tmp_path / n).is_file() for n in ("c.png", "a.png", "s.png"))


def test_forest_plot_is_written_without_importing_pyplot(tmp_path):
    """``infer``'s forest.png is drawn on a bare Figure: pyplot's import is off its path."""
    import subprocess
    import sys

    code = ("import sys; import pandas as pd; from pulse_ml.report.plots import forest_plot; "
            f"forest_plot(pd.DataFrame({_effects().to_dict(orient='list')!r}), "
            f"{str(tmp_path / 'forest.png')!r}, invalid=True); "
            "print('matplotlib.pyplot' in sys.modules, 'matplotlib.figure' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code.replace("nan", "float('nan')")],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
    assert (tmp_path / "forest.png").stat().st_size > 10_000
