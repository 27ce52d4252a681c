"""THE KEY TEST: predictions that saw the labeled sessions make PPI intervals invalid.

A seeded coverage simulation of the whole PULSE inference step with a real
RandomForestRegressor. In-sample mode (the model predicts the very labeled sessions it was trained
on, as in the paper) must under-cover the true effect; honest mode (5-fold cross-fit: out-of-fold
predictions for labeled sessions, mean of the 5 fold models for unlabeled ones — cross-prediction
PPI, Zrnic & Candes 2024) must cover at the nominal level and still narrow the interval.
If a leak of training labels into the rectifier is reintroduced, this test fails.
"""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor
from sklearn.model_selection import KFold

from pulse_ml.stats.arm_effect import compare_arms
from pulse_ml.stats.arm_inputs import Arm

N_LABELED, N_UNLABELED, N_FEATURES, TAU = 100, 1000, 4, 0.3
REPS, N_TREES, FOLDS = 200, 10, 5


def _signal(x):
    return 1.0 * x[:, 0] + 0.7 * x[:, 1] + 0.5 * x[:, 2] * x[:, 3]


def _forest(seed):
    return RandomForestRegressor(n_estimators=N_TREES, random_state=seed, n_jobs=1)


def _one_replication(rep):
    """Return (covered, width ratio aug/naive) for in-sample and honest predictions."""
    rng = np.random.default_rng(10_000 + rep)
    per_arm = N_LABELED + N_UNLABELED
    x = rng.normal(size=(2 * per_arm, N_FEATURES))
    arm = np.repeat([0, 1], per_arm)
    y = 3.0 + TAU * arm + _signal(x) + rng.normal(size=arm.size)  # true effect = TAU
    labeled = np.zeros(arm.size, dtype=bool)
    labeled[:N_LABELED] = labeled[per_arm : per_arm + N_LABELED] = True
    x_lab, y_lab, arm_lab = x[labeled], y[labeled], arm[labeled]
    x_unl, arm_unl = x[~labeled], arm[~labeled]

    full = _forest(rep).fit(x_lab, y_lab)  # trained on every labeled session
    in_sample = (full.predict(x_lab), full.predict(x_unl))

    oof, unl = np.empty(y_lab.size), np.zeros(x_unl.shape[0])
    folds = KFold(FOLDS, shuffle=True, random_state=rep).split(x_lab)
    for k, (train, test) in enumerate(folds):
        model = _forest(rep * FOLDS + k).fit(x_lab[train], y_lab[train])
        oof[test] = model.predict(x_lab[test])
        unl += model.predict(x_unl) / FOLDS
    honest = (oof, unl)

    out = []
    for f_lab, f_unl in (in_sample, honest):
        c, t = arm_lab == 0, arm_lab == 1
        res = compare_arms(Arm(y_lab[c], f_lab[c], f_unl[arm_unl == 0]),
                           Arm(y_lab[t], f_lab[t], f_unl[arm_unl == 1]))
        aug = res.augmented
        out.append((aug.ci_lower <= TAU <= aug.ci_upper, aug.width / res.naive.width))
    return out


@pytest.mark.slow
def test_stats_honesty_in_sample_predictions_undercover_cross_fit_covers():
    results = np.array([_one_replication(rep) for rep in range(REPS)], dtype=float)
    cov_in, ratio_in = results[:, 0, 0].mean(), results[:, 0, 1].mean()
    cov_honest, ratio_honest = results[:, 1, 0].mean(), results[:, 1, 1].mean()
    print(
        f"in-sample coverage={cov_in:.3f} width ratio={ratio_in:.3f}; "
        f"honest coverage={cov_honest:.3f} width ratio={ratio_honest:.3f}"
    )
    assert cov_in <= 0.85, "in-sample predictions should make the PPI interval invalid"
    assert cov_honest >= 0.93, "cross-fitted predictions must give valid intervals"
    assert ratio_honest < 0.9, "honest PPI should still narrow the interval on average"
    assert ratio_in < ratio_honest  # the leak looks better — which is exactly the trap
