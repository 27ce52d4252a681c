"""The promotion rules (pure): better, significant (paired user bootstrap), manual."""

from __future__ import annotations

import numpy as np
import pytest

from pulse_ml.errors import PulseError
from pulse_ml.registry.promotion import decision_tags
from pulse_ml.stats.paired import paired_bootstrap
from pulse_ml.training import promotion_rule
from pulse_ml.training.metrics import pearson


def test_should_promote_rules():
    assert promotion_rule.should_promote("cv_mse", 1.0, "a", None, None)[0]
    assert promotion_rule.should_promote("cv_mse", 1.0, "a", 1.2, "a")[0]
    assert not promotion_rule.should_promote("cv_mse", 1.3, "a", 1.2, "a")[0]
    assert not promotion_rule.should_promote("cv_mse", 1.2, "a", 1.2, "a")[0]
    assert promotion_rule.should_promote("cv_pearson", 0.3, "a", 0.2, "a")[0]
    ok, why = promotion_rule.should_promote("cv_mse", 0.1, "b", 1.2, "a")
    assert not ok and "other data" in why


def _predictors(seed: int, gain: float):
    """Ratings of 300 users x ~3 sessions and two predictors with independent errors.

    ``new``'s error sd is ``1 - gain`` times ``ref``'s (user-level and session-level parts).
    """
    rng = np.random.default_rng(seed)
    users = np.repeat(np.arange(300), rng.integers(1, 6, 300))
    n = users.size
    signal = rng.normal(size=n)
    y = np.clip(np.round(4 + 0.6 * signal + rng.normal(0, 0.9, n)), 1, 5)

    def noise():
        return rng.normal(0, 0.6, n) + rng.normal(0, 0.4, 300)[users]

    ref = 4 + 0.6 * signal + noise()
    new = 4 + 0.6 * signal + (1 - gain) * noise()
    return y, new, ref, users


def _mse(y, p):
    return float(np.mean((p - y) ** 2))


def test_noise_level_improvement_promoted_only_by_better():
    y, new, ref, users = _predictors(7, gain=0.01)  # 1% less error sd; this draw: ΔMSE -0.026
    paired = paired_bootstrap(y, new, ref, users, n_boot=2000, seed=0)
    assert paired.delta_mse < 0 < paired.mse_ci_upper  # better, but within the noise
    args = ("cv_mse", _mse(y, new), "fp", _mse(y, ref), "fp")
    ok_better, _ = promotion_rule.should_promote(*args, rule="better", paired=paired)
    ok_sig, why = promotion_rule.should_promote(*args, rule="significant", paired=paired)
    assert ok_better and not ok_sig
    assert "includes 0" in why and "[" in why  # the interval is in the reason
    ok_manual, why = promotion_rule.should_promote(*args, rule="manual", paired=paired)
    assert not ok_manual and "promote by hand" in why


def test_real_improvement_promoted_by_both_rules_and_pearson_uses_delta_r():
    y, new, ref, users = _predictors(2, gain=0.5)
    paired = paired_bootstrap(y, new, ref, users, n_boot=2000, seed=0)
    assert paired.mse_ci_upper < 0 and paired.r_ci_lower > 0
    for rule in ("better", "significant"):
        assert promotion_rule.should_promote("cv_mse", _mse(y, new), "fp", _mse(y, ref), "fp",
                                        rule=rule, paired=paired)[0]
    r_new, r_ref = pearson(y, new), pearson(y, ref)
    ok, why = promotion_rule.should_promote("cv_pearson", r_new, "fp", r_ref, "fp",
                                       rule="significant", paired=paired)
    assert ok and "Δr" in why
    # the reverse comparison is significantly worse: never promoted
    worse = paired_bootstrap(y, ref, new, users, n_boot=2000, seed=0)
    ok, why = promotion_rule.should_promote("cv_mse", _mse(y, ref), "fp", _mse(y, new), "fp",
                                       rule="significant", paired=worse)
    assert not ok and "wrong side of 0" in why


def test_decide_candidates_and_missing_pairing():
    champ = promotion_rule.Champion(version="3", run_id="r", fingerprint="fp",
                               values={"cv_mse": 1.2}, family="lightgbm")
    d = promotion_rule.decide("significant", "cv_mse", 1.1, "fp", champ, None)
    assert not d.promote and not d.candidate and "cannot decide" in d.reason
    assert d.champion_version == "3" and decision_tags(d)["vs_champion_version"] == "3"
    d = promotion_rule.decide("manual", "cv_mse", 1.1, "fp", champ, None)
    assert not d.promote and d.candidate  # better: registered for a promotion by hand
    d = promotion_rule.decide("significant", "cv_mse", 1.5, "fp", None, None)
    assert d.promote and d.candidate and d.reason == "no champion yet"
    assert not promotion_rule.decide("manual", "cv_mse", 1.5, "fp", None, None).promote
    # another feature set on the same sessions and ratings is compared (label fingerprint)
    other = promotion_rule.Champion(version="3", run_id="r", fingerprint="fp-user",
                               values={"cv_mse": 1.2}, family="lightgbm",
                               label_fingerprint="labels", feature_set="user")
    d = promotion_rule.decide("better", "cv_mse", 1.1, "fp-all", other, None, "labels")
    assert d.promote and "champion v3 (lightgbm/user)" in d.reason
    d = promotion_rule.decide("better", "cv_mse", 1.1, "fp-all", other, None, "other-labels")
    assert not d.promote and "other data" in d.reason
    with pytest.raises(PulseError, match="promotion.rule"):
        promotion_rule.should_promote("cv_mse", 1.0, "a", 1.2, "a", rule="sometimes")


def test_folds_grouped_otherwise_are_never_paired_or_promoted():
    """A session-split (leaky) model never beats a user-grouped champion automatically."""
    y, new, ref, users = _predictors(2, gain=0.5)  # a real gain: significant when comparable
    paired = paired_bootstrap(y, new, ref, users, n_boot=500, seed=0)
    assert paired.mse_ci_upper < 0
    grouped = promotion_rule.Champion(version="3", run_id="r", fingerprint="fp",
                                 values={"cv_mse": _mse(y, ref)}, family="lightgbm",
                                 cv_group_by="user_id")
    for rule in ("significant", "better", "manual"):
        d = promotion_rule.decide(rule, "cv_mse", _mse(y, new), "fp", grouped, paired,
                             new_cv_group_by="none")
        assert not d.promote and not d.candidate, rule
        assert "grouped differently" in d.reason and "leaky" in d.reason
        assert d.paired is None and not any(k.startswith("vs_champion_d") for k in decision_tags(d))
    same = promotion_rule.decide("significant", "cv_mse", _mse(y, new), "fp", grouped, paired,
                            new_cv_group_by="user_id")
    assert same.promote and "significantly better" in same.reason
    # an old champion without the tag: no significant claim; `better` compares and says so
    old = promotion_rule.Champion(version="2", run_id="r", fingerprint="fp",
                             values={"cv_mse": _mse(y, ref)}, family="lightgbm")
    d = promotion_rule.decide("significant", "cv_mse", _mse(y, new), "fp", old, paired,
                         new_cv_group_by="user_id")
    assert not d.promote and not d.candidate
    assert "grouping of champion v2 is unknown" in d.reason
    assert "champion v2 stays" in d.reason and "[" in d.reason  # the interval is still shown
    d = promotion_rule.decide("better", "cv_mse", _mse(y, new), "fp", old, paired,
                         new_cv_group_by="user_id")
    assert d.promote and "unknown" in d.reason
    # callers that do not know the grouping keep the old behaviour
    assert promotion_rule.decide("significant", "cv_mse", _mse(y, new), "fp", old, paired).promote
