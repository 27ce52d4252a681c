"""``monitor`` with ``request_prob``: uniform asking unchanged, varying asking weighted, covered.

The weighted sequence's arithmetic is checked against an oracle in
tests/stats/test_sequential_weighted.py; here: the wiring from a session table (uniform
``request_prob`` leaves every number bit for bit as without the column; varying probabilities
change only their own case study), the response model's predictability (a look's response
rates never change when later looks arrive), and a seeded simulation of time-uniform coverage
that fails when the weights are dropped (tests/support/monitor_active_sim.py; 2,000
replications in perf/monitor_active_coverage.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from monitor_active_sim import one_replication, simulate

from pulse_ml.inference.monitor import MonitorSettings, monitor
from pulse_ml.inference.monitor_active import predictable_response
from pulse_ml.sessions.feature_sets import FeatureSet, FeatureSpec
from pulse_ml.sessions.table import validate_frame
from pulse_ml.stats.sequential.simulation import simulate_monitoring

FEATURES = FeatureSet("x", (FeatureSpec("x", "numeric"),))
START = pd.Timestamp("2025-06-02", tz="UTC")
NOW = pd.Timestamp("2026-01-01", tz="UTC")


def _frame(seed: int = 0) -> pd.DataFrame:
    """Two case studies over 8 days, users with several sessions."""
    data = simulate_monitoring(2, n_days=8, labeled_per_day=8, unlabeled_per_day=25,
                               effect=0.2, n_users=40, seed=seed)[0]
    rng = np.random.default_rng(seed)
    n = data["arm"].size
    seconds = data["look"] * 86_400 + rng.integers(0, 86_400, n)
    return pd.DataFrame({
        "session_id": [f"s{i}" for i in range(n)],
        "user_id": [f"u{u}" for u in data["users"]],
        "case_study": np.array(["cs0", "cs1"], dtype=object)[data["group"]],
        "condition": np.where(data["arm"] == 1, "b", "a"),
        "rating": data["rating"],
        "x": data["prediction"],
        "started_at": START + pd.to_timedelta(seconds, unit="s"),
    })


def _run(frame: pd.DataFrame):
    table = validate_frame(frame, "sessions.csv", FEATURES, {})
    return monitor(table, table.frame["x"].to_numpy(), MonitorSettings(), now=NOW)


def test_uniform_request_prob_leaves_every_number_unchanged():
    frame = _frame()
    plain = _run(frame)
    per_arm = np.where(frame["condition"] == "b", 0.3, 0.5)  # one value per arm
    asked = _run(frame.assign(request_prob=np.where(frame["case_study"] == "cs0", per_arm, 0.2)))
    pd.testing.assert_frame_equal(plain.frame, asked.frame, check_exact=True)
    pd.testing.assert_frame_equal(plain.stops, asked.stops, check_exact=True)
    assert plain.notes == asked.notes


def test_varying_request_prob_weights_its_case_study_only():
    frame = _frame(1)
    rng = np.random.default_rng(1)
    pi = np.where(frame["case_study"] == "cs0", rng.uniform(0.2, 0.9, len(frame)), 0.4)
    plain, asked = _run(frame), _run(frame.assign(request_prob=pi))
    cs1 = plain.frame["case_study"] == "cs1"
    pd.testing.assert_frame_equal(plain.frame[cs1], asked.frame[cs1], check_exact=True)
    assert not np.allclose(plain.frame.loc[~cs1, "se"], asked.frame.loc[~cs1, "se"],
                           equal_nan=True)
    last = asked.frame[~cs1].tail(2)
    assert np.isfinite(last[["cs_lower", "cs_upper", "ci_lower", "ci_upper"]]).all().all()
    assert np.isfinite(last["time_shift"]).all()  # the drift check (weighted analogue)
    notes = [n for n in asked.notes if "varying request_prob" in n]
    assert len(notes) == 2 and all("cs0" in n and "expected asked" in n for n in notes)
    both = frame.groupby(["case_study", "user_id"])["condition"].nunique().loc["cs0"]
    joint = [w for w in asked.warnings if "lambda_rule=joint is not applied" in w]
    assert (both > 1).any() and len(joint) == 1 and "'cs0'" in joint[0]
    arm_rule = monitor(validate_frame(frame.assign(request_prob=pi), "sessions.csv", FEATURES, {}),
                       frame["x"].to_numpy(), MonitorSettings(lambda_rule="arm"), now=NOW)
    assert not [w for w in arm_rule.warnings if "lambda_rule" in w]
    assert not [w for w in asked.warnings if "answering changed" in w]
    few = [w for w in asked.warnings if "fixed-n intervals" in w]  # 64 rated < 200: warned
    assert len(few) == 1 and "'cs0'" in few[0] and "confidence sequence" in few[0]
    assert not [w for w in plain.warnings if "fixed-n intervals" in w]
    # answering that falls over the test (late ratings dropped): the response check warns
    days = (frame["started_at"] - START).dt.days.to_numpy()
    drop = rng.random(len(frame)) < np.clip((days - 1) / 4, 0, 1)
    fell = frame.assign(request_prob=pi, rating=frame["rating"].where(~drop | (pi == 0.4)))
    warned = [w for w in _run(fell).warnings if "answering changed" in w]
    assert len(warned) == 1 and "'cs0'" in warned[0], warned


@pytest.mark.slow
def test_response_check_flags_a_trend_in_answering_not_its_absence():
    """Answering whose logit falls by 5 over the test is flagged; stable answering is not."""
    from pulse_ml.inference.monitor_active import RESPONSE_DRIFT_Z, response_drift

    def fires(**kw):
        out = []
        for seed in range(25):
            d = simulate(seed, n_users=600, **kw)
            r = predictable_response(d["x"], d["rated"], d["pi"], d["look"], d["users"], seed)
            out.append(abs(response_drift(d["rated"], d["pi"], r, d["look"],
                                          d["users"])[2]) >= RESPONSE_DRIFT_Z)
        return float(np.mean(out))

    assert fires(response_trend=5.0) >= 0.8
    assert fires() <= 0.08 and fires(ask_trend=2.3) <= 0.08  # at most 2 of 25


def test_response_rates_of_a_look_come_from_earlier_looks_only():
    d = simulate(2, n_users=400)
    full = predictable_response(d["x"], d["rated"], d["pi"], d["look"], d["users"], seed=2)
    early = d["look"] <= 4
    part = predictable_response(d["x"][early], d["rated"][early], d["pi"][early],
                                d["look"][early], d["users"][early], seed=2)
    np.testing.assert_array_equal(full[early], part)
    assert np.ptp(full) > 0.1  # the features matter here: not a constant rate


def test_a_rerun_with_more_days_keeps_every_earlier_band():
    """New users arriving later and rows out of time order do not move the first look's folds."""
    frame = _frame(1).sample(frac=1.0, random_state=0).reset_index(drop=True)
    rng = np.random.default_rng(1)
    frame["request_prob"] = np.where(frame["case_study"] == "cs0",
                                     rng.uniform(0.2, 0.9, len(frame)), 0.4)
    later = (frame["started_at"] - START).dt.days >= 5
    frame.loc[later, "user_id"] = frame.loc[later, "user_id"] + "x"  # users first seen on day 5+
    cut = START + pd.Timedelta(days=5)

    def run(f: pd.DataFrame, now: pd.Timestamp) -> pd.DataFrame:
        table = validate_frame(f, "sessions.csv", FEATURES, {})
        return monitor(table, table.frame["x"].to_numpy(), MonitorSettings(min_units_per_arm=5),
                       now=now).frame

    early = run(frame[frame["started_at"] < cut].reset_index(drop=True), cut)
    full = run(frame, NOW)
    key = ["case_study", "look", "estimator"]
    both = early.merge(full, on=key, suffixes=("_early", "_full"))
    both = both[both["case_study"] == "cs0"]
    assert len(both) >= 8 and both["effect_early"].notna().sum() >= 6
    for col in ("effect", "se", "cs_lower", "cs_upper"):
        np.testing.assert_allclose(both[f"{col}_early"], both[f"{col}_full"], rtol=0, atol=1e-12)


REPS = 120  # MC s.e. of a 0.95 coverage: 0.020 (2,000 replications in perf/)


@pytest.mark.slow
def test_time_uniform_coverage_with_weights_fails_without_them():
    """Every look's sequence covers the true difference; dropping the weights breaks it.

    Hard sessions are asked ~2.5x as often and gain more from the treatment: the rated
    sessions over-represent them. With 1/(pi r) (r from earlier looks) the sequences cover
    at every look in >= 0.95 - 2 MC s.e. of the data sets and the last effect is unbiased;
    with every rated session alike (the weights dropped) both fail.
    """
    for weights, ok in (("predictable", True), ("uniform", False)):
        df = pd.DataFrame([one_replication(s, weights) for s in range(REPS)])
        for name in ("naive", "augmented"):
            cover = df[f"{name}_covers_all"].mean()
            err = df[f"{name}_error_last"]
            unbiased = abs(err.mean()) < 3 * err.std() / np.sqrt(REPS)
            assert (cover >= 0.95 - 2 * 0.020) == ok, (weights, name, cover)
            assert unbiased == ok, (weights, name, err.mean())


DRIFT = {  # strong predictor (lambda ~1), 15% budget, 10 looks; the response model lags a trend
    "drift": dict(strength=1.5, drift=0.6, response_trend=5.0),
    "no drift": dict(strength=1.5, response_trend=5.0),
    "known asking": dict(strength=1.5, drift=0.6, ask_trend=2.3),
}
DRIFT_REPS = 50


@pytest.mark.slow
def test_drift_check_fires_with_drift_and_stays_quiet_without():
    """The weighted time shift: fires when the weights lag in time AND the predictions drift.

    'drift': the treatment arm's predictions rise by 0.6 stars over the test (the ratings do
    not) while answering falls (logit -5 over the test) and each look's response model comes
    from earlier looks: the PPI++ effect gains the shift as a bias. 'no drift': the same fall
    in answering, flat predictions. 'known asking': request_prob falls ~10x over the test (known:
    the weights correct it) with the drift. Paired by seed, the shift measures most of the bias
    the drift adds (0.053 of 0.070 at 50 replications; MC s.e. 0.0014 of the added bias): at
    least half, and not more than all of it.
    """
    from pulse_ml.stats.sequential.small_sample import DRIFT_WARN_SE

    runs = {k: pd.DataFrame([one_replication(s, **kw) for s in range(DRIFT_REPS)])
            for k, kw in DRIFT.items()}
    fires = {k: float((df["augmented_shift_se_last"].abs() >= DRIFT_WARN_SE).mean())
             for k, df in runs.items()}
    assert fires["drift"] >= 0.4 and fires["no drift"] <= 0.05 and fires["known asking"] <= 0.05
    added = runs["drift"]["augmented_error_last"] - runs["no drift"]["augmented_error_last"]
    shift = runs["drift"]["augmented_shift_last"]
    se = lambda x: x.std() / np.sqrt(len(x))  # noqa: E731
    assert shift.mean() > 5 * se(shift)
    assert 0.5 * added.mean() < shift.mean() < added.mean() + 3 * se(added - shift)
