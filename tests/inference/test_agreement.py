"""Wilson intervals, the tie rule and per-category agreement on hand-made examples."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pulse_ml.errors import DataError
from pulse_ml.inference.agreement import (
    ALL,
    agreement_outcomes,
    agreement_table,
    predicted_preference,
    validate_pairs,
    wilson_interval,
)


def _wilson_formula(x: float, n: float, z: float = 1.959963984540054) -> tuple[float, float]:
    p = x / n
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


@pytest.mark.parametrize(("x", "n", "expected"), [
    (8, 10, (0.4902, 0.9433)),
    (0, 10, (0.0, 0.2775)),
    (10, 10, (0.7225, 1.0)),
    (50, 100, (0.4038, 0.5962)),
])
def test_wilson_known_values(x, n, expected):
    lo, hi = wilson_interval(x, n)
    assert float(lo) == pytest.approx(expected[0], abs=5e-4)
    assert float(hi) == pytest.approx(expected[1], abs=5e-4)
    assert (float(lo), float(hi)) == pytest.approx(_wilson_formula(x, n), abs=1e-12)


def test_wilson_matches_statsmodels_vectorized_and_nan_for_empty():
    smp = pytest.importorskip("statsmodels.stats.proportion")
    x = np.array([0, 1, 3, 7, 19, 20, 33])
    n = np.array([20, 20, 20, 20, 20, 20, 40])
    lo, hi = wilson_interval(x, n, alpha=0.1)
    ref_lo, ref_hi = smp.proportion_confint(x, n, alpha=0.1, method="wilson")
    np.testing.assert_allclose(lo, ref_lo, atol=1e-12)
    np.testing.assert_allclose(hi, ref_hi, atol=1e-12)
    lo0, hi0 = wilson_interval(0, 0)
    assert np.isnan(lo0) and np.isnan(hi0)


def test_wilson_coverage_by_seeded_simulation():
    rng = np.random.default_rng(11)
    p, n = 0.7, 40
    x = rng.binomial(n, p, size=40_000)
    lo, hi = wilson_interval(x, n)
    coverage = np.mean((lo <= p) & (p <= hi))
    assert 0.935 < coverage < 0.965  # Wilson is close to nominal at n = 40


def test_predicted_preference_margin_and_missing():
    got = predicted_preference([3.0, 1.0, 2.05, 2.0, np.nan], [2.0, 2.0, 2.0, 2.0, 1.0], 0.1)
    np.testing.assert_array_equal(got[:4], [1, -1, 0, 0])
    assert np.isnan(got[4])


def test_tie_rule_on_hand_made_pairs():
    # human:      a     b     tie    a     tie
    # score diff: +1    +1    +0.05  0.0   -1    -> predicted (margin 0.1): a a tie tie b
    human = np.array([1, -1, 0, 1, 0])
    sa = np.array([3.0, 3.0, 2.05, 2.0, 1.0])
    sb = np.array([2.0, 2.0, 2.0, 2.0, 2.0])
    half = agreement_outcomes(human, sa, sb, ties="half", tie_margin=0.1)
    np.testing.assert_array_equal(half, [1.0, 0.0, 1.0, 0.5, 0.5])
    excl = agreement_outcomes(human, sa, sb, ties="exclude", tie_margin=0.1)
    np.testing.assert_array_equal(excl[[0, 1, 3]], [1.0, 0.0, 0.5])
    assert np.isnan(excl[[2, 4]]).all()
    assert np.nanmean(half) == pytest.approx(0.6) and np.nanmean(excl) == pytest.approx(0.5)
    # margin 0: the 0.05 difference is now a preference for a; a human tie earns 1/2
    strict = agreement_outcomes(human, sa, sb, ties="half", tie_margin=0.0)
    np.testing.assert_array_equal(strict, [1.0, 0.0, 0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="ties"):
        agreement_outcomes(human, sa, sb, ties="drop")


def test_per_category_table_mean_sd_and_intervals():
    cats = np.array(["game", "game", "game", "game", "web", "web", "web"])
    seed1 = np.array([1, 1, 1, 0, 1, 0, np.nan])  # last pair not counted (e.g. human tie)
    seed2 = np.array([1, 1, 0, 0, 0.5, 0, np.nan])
    summary, per_source = agreement_table(cats, {"rm": {"s1": seed1, "s2": seed2}})
    s = summary.set_index("category")
    assert list(s.index) == ["game", "web", ALL]
    assert s.loc["game", "n_pairs"] == 4 and s.loc["web", "n_pairs"] == 2
    assert s.loc[ALL, "n_pairs"] == 6 and s.loc[ALL, "n_sources"] == 2
    assert s.loc["game", "agreement_pct"] == pytest.approx(100 * (0.75 + 0.5) / 2)
    assert s.loc["web", "agreement_pct"] == pytest.approx(100 * (0.5 + 0.25) / 2)
    assert s.loc[ALL, "agreement_pct"] == pytest.approx(100 * (4 / 6 + 2.5 / 6) / 2)
    assert s.loc["game", "sd_pct"] == pytest.approx(100 * np.std([0.75, 0.5], ddof=1))
    lo, hi = _wilson_formula(0.625 * 4, 4)
    assert s.loc["game", "ci_lower_pct"] == pytest.approx(100 * lo)
    assert s.loc["game", "ci_upper_pct"] == pytest.approx(100 * hi)
    p = per_source.set_index(["source", "category"])
    assert p.loc[("s1", "web"), "agreement_pct"] == pytest.approx(50.0)
    assert p.loc[("s2", ALL), "n_pairs"] == 6
    pooled, _ = agreement_table(cats, {"rm": {"s1": seed1, "s2": seed2}}, interval_n="pooled")
    q = pooled.set_index("category")
    assert q.loc["game", "agreement_pct"] == pytest.approx(s.loc["game", "agreement_pct"])
    lo8, hi8 = _wilson_formula(5, 8)
    assert q.loc["game", "ci_lower_pct"] == pytest.approx(100 * lo8)
    assert q.loc["game", "ci_upper_pct"] - q.loc["game", "ci_lower_pct"] < \
        s.loc["game", "ci_upper_pct"] - s.loc["game", "ci_lower_pct"]


def test_single_source_has_no_sd_and_no_category_gives_one_row():
    summary, _ = agreement_table(np.array([ALL] * 3), {"j": {"c": np.array([1.0, 0.0, 1.0])}})
    assert len(summary) == 1 and summary["category"].iloc[0] == ALL
    assert summary["agreement_pct"].iloc[0] == pytest.approx(200 / 3)
    assert np.isnan(summary["sd_pct"].iloc[0])


def test_validate_pairs_lists_every_problem_with_rows():
    pairs = pd.DataFrame({"pair_id": ["p1", "p2", "p3", "p3"],
                          "session_a": ["s1", "s2", "zz", "s1"],
                          "session_b": ["s2", "s2", "s1", "s3"],
                          "preference": ["A", "left", "tie", "b"],
                          "category": ["web", "web", "game", None]})
    with pytest.raises(DataError) as err:
        validate_pairs(pairs, "pairs.csv", ["s1", "s2", "s3"], "category", "sessions.csv")
    msg = str(err.value)
    assert msg.startswith("pairs.csv: 4 problem(s)")
    assert "column 'preference': values 'left' in 1 row(s): row 2 (pair_id=p2)" in msg
    assert "column 'session_a': session id(s) 'zz' not in sessions.csv" in msg
    assert "column 'pair_id': duplicate ids ('p3')" in msg
    assert "compared with itself" in msg
    ok = validate_pairs(pairs.iloc[[0, 3]].assign(pair_id=["p1", "p4"]), "pairs.csv",
                        ["s1", "s2", "s3"])
    assert list(ok["human"]) == [1, -1] and list(ok["category"]) == ["web", "(none)"]
