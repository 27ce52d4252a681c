"""The train summary: the paired sentence follows the objective; the pipeline's words."""

from __future__ import annotations

import pytest
from paired_sample import paired_sample

from pulse_ml.jobs import train
from pulse_ml.training.metrics import CVMetrics


def _result(objective: str) -> train.TrainResult:
    paired = paired_sample(0.7)
    metrics = CVMetrics(0.9, 0.7, 0.5, 0.5, (0.9,) * 5, (0.7,) * 5, (0.5,) * 5)
    return train.TrainResult(
        family="lightgbm", feature_set="all", run_id="r", best_params={}, metrics=metrics,
        n_trials=3, seconds=1.0, version="2", promoted=True, promotion_reason="because",
        data_fingerprint="fp", paired=paired, champion_version="1", objective=objective,
        n_labeled=240, n_unlabeled=960, ci_reduction=0.1, ci_reduction_ref=0.12)


@pytest.mark.parametrize(("objective", "first", "second"),
                         [("cv_mse", "ΔMSE (new - champion)", "Δr ="),
                          ("cv_pearson", "Δr (new - champion)", "ΔMSE =")])
def test_paired_sentence_follows_the_objective(objective, first, second, pulse_home):
    text = " ".join(train.summary(_result(objective)).split())
    line = text[text.index("vs champion v1:"):]
    assert line.index(first) < line.index(second)  # the decision's difference comes first
    assert f"{second.split()[0]} (new" not in line
    header = train.summary(_result(objective)).splitlines()[0].split()
    assert "r" in header and "champion" in header  # the pipeline's words
    assert "cv_pearson" not in header and "promoted" not in header
