"""The promotion rule (pure)."""

from __future__ import annotations

from pulse_ml.registry import promotion


def test_should_promote_rules():
    assert promotion.should_promote("cv_mse", 1.0, "a", None, None)[0]
    assert promotion.should_promote("cv_mse", 1.0, "a", 1.2, "a")[0]
    assert not promotion.should_promote("cv_mse", 1.3, "a", 1.2, "a")[0]
    assert not promotion.should_promote("cv_mse", 1.2, "a", 1.2, "a")[0]
    assert promotion.should_promote("cv_pearson", 0.3, "a", 0.2, "a")[0]
    ok, why = promotion.should_promote("cv_mse", 0.1, "b", 1.2, "a")
    assert not ok and "other data" in why
