import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pulse_ml.errors import PulseError
from pulse_ml.stats.feature_tests import compare_features, labeled_shift

KINDS = {"fail": "flag", "msgs": "count", "cat": "categorical"}


def _frames(seed=0):
    rng = np.random.default_rng(seed)
    c = pd.DataFrame(
        {
            "fail": rng.binomial(1, 0.2, 80),
            "msgs": rng.poisson(4, 80),
            "cat": rng.choice(["bug", "feature", "docs"], 80, p=[0.5, 0.3, 0.2]),
        }
    )
    t = pd.DataFrame(
        {
            "fail": rng.binomial(1, 0.45, 90),
            "msgs": rng.poisson(6, 90),
            "cat": rng.choice(["bug", "feature", "docs"], 90, p=[0.3, 0.3, 0.4]),
        }
    )
    return c, t


def test_stats_features_fisher_welch_against_scipy():
    c, t = _frames()
    out = compare_features(c, t, KINDS)
    assert list(out.columns) == [
        "feature",
        "level",
        "kind",
        "mean_control",
        "mean_treatment",
        "diff",
        "p_value",
        "test",
        "q_value",
    ]
    flag = out[out.feature == "fail"].iloc[0]
    table = [[c.fail.sum(), (1 - c.fail).sum()], [t.fail.sum(), (1 - t.fail).sum()]]
    assert flag.p_value == pytest.approx(stats.fisher_exact(table).pvalue, rel=1e-12)
    assert flag.test == "fisher" and flag["diff"] == pytest.approx(t.fail.mean() - c.fail.mean())
    cnt = out[out.feature == "msgs"].iloc[0]
    ref = stats.ttest_ind(c.msgs, t.msgs, equal_var=False).pvalue
    assert cnt.p_value == pytest.approx(ref, rel=1e-12) and cnt.test == "welch"
    cat = out[out.feature == "cat"]
    assert sorted(cat.level) == ["bug", "docs", "feature"]
    docs = cat[cat.level == "docs"].iloc[0]
    a, b = (c.cat == "docs").sum(), (t.cat == "docs").sum()
    ref = stats.fisher_exact([[a, len(c) - a], [b, len(t) - b]]).pvalue
    assert docs.p_value == pytest.approx(ref, rel=1e-12)
    assert docs.mean_treatment == pytest.approx(b / len(t))


def test_stats_features_bh_q_values_monotone_and_match_scipy():
    c, t = _frames(3)
    out = compare_features(c, t, KINDS)
    np.testing.assert_allclose(out.q_value, stats.false_discovery_control(out.p_value))
    ordered = out.sort_values("p_value")
    assert (np.diff(ordered.q_value.to_numpy()) >= -1e-15).all()
    assert (out.q_value >= out.p_value - 1e-15).all()


def test_stats_features_constant_columns_and_errors():
    c = pd.DataFrame({"k": [1.0, 1.0, 1.0], "fail": [0, 0, 0]})
    out = compare_features(c, c.copy(), {"k": "numeric", "fail": "flag"})
    assert out.p_value.tolist() == [1.0, 1.0]
    with pytest.raises(PulseError, match="column 'nope' is missing"):
        compare_features(c, c, {"nope": "flag"})
    with pytest.raises(PulseError, match="unknown kind"):
        compare_features(c, c, {"k": "weird"})
    with pytest.raises(PulseError, match="only 0/1"):
        compare_features(c, c.assign(fail=[0, 2, 1]), {"fail": "flag"})


def test_stats_features_rank_biserial_hand_example():
    labeled = pd.DataFrame({"msgs": [3, 4, 5]})
    unlabeled = pd.DataFrame({"msgs": [1, 2, 3, 4]})
    # pairs (l, u): l>u counts 1, ties 0.5. l=3: 2+0.5; l=4: 3+0.5; l=5: 4 -> U = 10
    out = labeled_shift(labeled, unlabeled, {"msgs": "count"})
    row = out.iloc[0]
    assert row.rank_biserial == pytest.approx(2 * 10 / 12 - 1)  # = 0.6667, labeled larger
    assert bool(row.large) and row.n_labeled == 3 and row.n_unlabeled == 4
    flipped = labeled_shift(unlabeled, labeled, {"msgs": "count"}).iloc[0]
    assert flipped.rank_biserial == pytest.approx(-row.rank_biserial)
    small = labeled_shift(
        pd.DataFrame({"msgs": [1, 2, 3, 4]}),
        pd.DataFrame({"msgs": [1, 2, 3, 5]}),
        {"msgs": "count"},
    ).iloc[0]
    assert abs(small.rank_biserial) < 0.3 and not bool(small.large)


def test_stats_features_shift_categorical_levels_and_constant():
    lab = pd.DataFrame({"cat": ["a", "a", "b"], "k": [1, 1, 1]})
    unl = pd.DataFrame({"cat": ["b", "b", "b", "a"], "k": [1, 1, 1, 1]})
    out = labeled_shift(lab, unl, {"cat": "categorical", "k": "count"})
    a = out[(out.feature == "cat") & (out.level == "a")].iloc[0]
    assert a.rank_biserial > 0 and a.mean_labeled == pytest.approx(2 / 3)
    k = out[out.feature == "k"].iloc[0]
    assert k.rank_biserial == 0.0 and not bool(k.large)
