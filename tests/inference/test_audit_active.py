"""The audit on a case study asked by ``request_prob``: weighted checks keep their rate.

Data (tests/support/active_sim.py): 1-5 star ratings skewed to 4-5, users with Pareto-many
sessions (users in both arms unless ``by_user``), heteroscedastic errors, pi ~ sqrt(expected
squared error) at a 10% budget clipped at budget / 4 (pi varies with the features), ~20% of
the asked do not answer depending on a feature (``response=0.88``). The analysis under audit is
infer's: weights 1 / (pi r_hat), r_hat cross-fitted by user; the audit reuses those weights in
every half. Measured with 1,000 splits per data set (perf/audit_active.py, same seeds, more
data sets): valid weighted analyses flagged "too narrow" in 0.019 ± 0.004 of 1,000 data sets
(variance check 0.004, bias check 0.016; mean variance-check pass rate 0.946, nominal 0.95);
i.i.d. intervals on user-randomized data with a strong user effect (user_sd 1.0) in 0.885 ±
0.023 of 200 (variance check); predictions that memorize 80% of their labeled residual
(arm-blind predictions, effect 0.8 latent stars; the leaky interval covers 0 of 200) in 0.905 ±
0.021 of 200 (bias check). Here 60 / 30 / 30 of those data sets.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from active_sim import simulate, weighted_arms

from pulse_ml.inference.audit import consistency, split_half
from pulse_ml.inference.effects import InferenceSettings
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.feature_sets import feature_set_from_mapping
from pulse_ml.sessions.table import validate_frame
from pulse_ml.stats.half_checks import audit_halves

SPLITS = 1000
TWENTY_PCT = {"response": 0.88}  # ~20% of the asked do not answer (depends on a feature)


def _audits(scenario: str, seeds, **kw):
    out = []
    for seed in seeds:
        d = simulate(10_000 + seed, **TWENTY_PCT, **kw)
        f = np.where(d.rated, d.f + 0.8 * (d.y - d.f), d.f) if scenario == "leak" else None
        control, treatment = weighted_arms(d, seed, f=f)
        method = "augmented_iid" if scenario == "iid" else "augmented"
        out.append(audit_halves(control, treatment, method=method, replications=SPLITS,
                                seed=seed))
    flagged = float(np.mean([a.verdict == "too narrow" for a in out]))
    print(f"{scenario}: flagged {flagged:.3f} +- {np.sqrt(flagged * (1 - flagged) / len(out)):.3f}")
    return flagged, out


@pytest.mark.slow
def test_valid_weighted_analyses_keep_the_checks_rate():
    # 60 data sets: a true flag rate 0.05 gives <= 6 flags with probability 0.91, 0.025
    # (measured) with 0.99; weights that broke the variance formula (pass rate ~0.9) would
    # flag most data sets
    flagged, audits = _audits("valid", range(60))
    assert all(a.variance.method == "augmented" for a in audits)
    assert flagged <= 0.1
    rate = np.mean([a.variance.rate for a in audits])  # s.d. over data sets ~0.010
    assert 0.94 <= rate <= 0.96, rate
    assert np.mean([a.bias.flagged for a in audits if a.bias is not None]) <= 0.1


@pytest.mark.slow
def test_iid_intervals_on_clustered_weighted_data_are_flagged():
    flagged, audits = _audits("iid", range(30), by_user=True, user_sd=1.0)
    assert flagged >= 0.6  # 0.80 on these 30, 0.885 on 200
    assert np.mean([a.variance.rate for a in audits]) < 0.9


@pytest.mark.slow
def test_in_sample_predictions_are_flagged_in_weighted_data():
    flagged, audits = _audits("leak", range(30), f_effect=0.0, effect=0.8)
    assert flagged >= 0.8  # 0.97 on these 30, 0.905 on 200; by the bias check
    assert all(a.variance.verdict != "too narrow" for a in audits)


FEATURES = feature_set_from_mapping({"name": "t", "columns": {"n": {"kind": "count"}}})
STUDY = CaseStudy("cs", "a", "b")


def _table(pi_of_n: bool, seed: int = 0):
    """Users in both arms; pi ~ the count ``n`` (or one value); ~15% of the asked not answering."""
    rng = np.random.default_rng(seed)
    users = np.repeat(np.arange(300), 1 + rng.poisson(4, 300))
    n = rng.poisson(3, users.size)
    cond = np.where(rng.random(users.size) < 0.5, "a", "b")
    u = rng.normal(0, 0.4, 300)[users]
    y = np.clip(np.round(4 + 0.2 * (n - 3) + u + 0.2 * (cond == "b")
                         + rng.normal(0, 0.5 + 0.25 * n)), 1, 5)
    pi = np.clip(0.1 + 0.08 * n, 0.05, 1.0) if pi_of_n else np.full(users.size, 0.33)
    rated = rng.random(users.size) < pi * 0.85
    frame = pd.DataFrame({"session_id": [f"s{i}" for i in range(users.size)],
                          "user_id": [f"u{g}" for g in users], "case_study": "cs",
                          "condition": cond, "rating": np.where(rated, y, np.nan), "n": n,
                          "request_prob": pi})
    preds = 4 + 0.2 * (n - 3) + u + rng.normal(0, 0.2, users.size)
    return frame, preds


def _audit(frame: pd.DataFrame, preds: np.ndarray):
    table = validate_frame(frame, "t.parquet", FEATURES, {"cs": STUDY})
    settings = InferenceSettings(seed=3)
    return (split_half(table, preds, STUDY, settings, replications=300, seed=1),
            consistency(table, preds, STUDY, settings, replications=100, seed=1))


def test_the_audit_weights_a_case_study_asked_by_request_prob():
    frame, preds = _table(pi_of_n=True)
    res, check = _audit(frame, preds)
    assert len(res.notes) == 2 and all("asked by request_prob" in n for n in res.notes)
    assert res.notes[0].startswith("control arm 'a'") and "weights 1/(request_prob" in res.notes[0]
    assert res.verdict != "too narrow"
    plain, plain_check = _audit(frame.drop(columns="request_prob"), preds)
    assert plain.notes == ()
    per, per_plain = (r.audits["augmented"].per_replication for r in (res, plain))
    assert not np.allclose(per["delta_a"], per_plain["delta_a"])  # the weights were used
    assert not np.allclose(check.per_replication["naive_effect"],
                           plain_check.per_replication["naive_effect"])


def test_uniform_request_prob_is_todays_audit():
    frame, preds = _table(pi_of_n=False)
    res, check = _audit(frame, preds)
    plain, plain_check = _audit(frame.drop(columns="request_prob"), preds)
    assert res.notes == () and res.verdict == plain.verdict
    pd.testing.assert_frame_equal(res.audits["augmented"].per_replication,
                                  plain.audits["augmented"].per_replication)
    pd.testing.assert_frame_equal(check.per_replication, plain_check.per_replication)
