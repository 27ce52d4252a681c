"""Split-half audit: it flags invalid analyses and passes valid ones on data of known truth.

Each case audits D = 30 simulated data sets (``validity_sims.audit_dataset``) with 1000 splits
each and counts the "too narrow" verdicts. Targets: invalid analyses flagged in >= 80% of the data
sets (>= 24 of 30), valid ones in <= 10% (<= 3 of 30). Monte-Carlo reasoning: the benchmark
(perf/validity_bench.py, 100 other data sets x 1000 splits) measures flag rates of 0.94-0.98
for the invalid designs used here and 0.00-0.03 for the valid ones; with 30 data sets a true
rate of 0.94 gives >= 24 flags with probability 0.99 and a true 0.03 gives <= 3 with
probability 0.94, while an audit that cannot tell (the old hiding check read valid intervals
0.78 and invalid ones 0.93) fails both assertions.
"""

from dataclasses import replace

import numpy as np
import pytest
import validity_sims as sims

from pulse_ml.stats.arm_effect import compare_arms
from pulse_ml.stats.arm_inputs import Arm
from pulse_ml.stats.consistency import labeled_unlabeled_consistency
from pulse_ml.stats.split_half import split_half_audit, verdict

DATASETS, SPLITS = 30, 1000


def _flag_rate(method, **design):
    verdicts, covered = [], []
    for d in range(DATASETS):
        (c, t), tau = sims.audit_dataset(7000 + d, **design)
        verdicts.append(split_half_audit(c, t, method=method, replications=SPLITS, seed=d).verdict)
        if d < 10:  # true coverage of the audited interval, for the message
            arms = ((replace(c, users=None, users_unl=None), replace(t, users=None, users_unl=None))
                    if method.endswith("iid") else (c, t))
            res = compare_arms(*arms)
            est = res.naive if method.startswith("naive") else res.augmented
            covered.append(est.ci_lower <= tau <= est.ci_upper)
    flagged = float(np.mean(np.array(verdicts) == "too narrow"))
    print(f"{method} {design}: flagged {flagged:.2f}, coverage of 10 data sets "
          f"{np.mean(covered):.1f}")
    return flagged


@pytest.mark.slow
@pytest.mark.parametrize("method", ["naive_iid", "augmented_iid"])
def test_stats_split_half_flags_iid_intervals_on_clustered_data(method):
    assert _flag_rate(method) >= 0.8  # users randomized to arms, intra-user correlation 1/3


@pytest.mark.slow
def test_stats_split_half_flags_in_sample_predictions():
    assert _flag_rate("augmented", leak=0.8, tau=0.5, by_user=False) >= 0.8


@pytest.mark.slow
@pytest.mark.parametrize(
    "method,design",
    [("naive", {}), ("augmented", {}), ("augmented", {"by_user": False})],
)
def test_stats_split_half_passes_valid_analyses(method, design):
    assert _flag_rate(method, **design) <= 0.1


def test_stats_split_half_vectorized_equals_one_call_per_split():
    (c, t), _ = sims.audit_dataset(3, n_users=60)

    def augmented(ch, th):
        res = compare_arms(Arm(ch.y, ch.f, ch.f_unl, users=ch.users, users_unl=ch.users_unl),
                           Arm(th.y, th.f, th.f_unl, users=th.users, users_unl=th.users_unl),
                           cr2=False, lambda_noise=False)
        return res.augmented.effect, res.augmented.se, res.augmented.df

    fast = split_half_audit(c, t, replications=40, seed=5)
    slow = split_half_audit(c, t, method=augmented, replications=40, seed=5)
    cols = ["delta_a", "se_a", "df_a", "delta_b", "se_b"]
    np.testing.assert_allclose(fast.per_replication[cols], slow.per_replication[cols],
                               rtol=1e-9, atol=1e-12)
    assert slow.method == "augmented" and fast.rate == slow.rate
    # unlabeled="all": every unlabeled session in half A (halves correlated, more lenient)
    lenient = split_half_audit(c, t, replications=40, seed=5, unlabeled="all")
    assert not np.allclose(lenient.per_replication["delta_a"], fast.per_replication["delta_a"])
    np.testing.assert_allclose(lenient.per_replication["delta_b"],
                               fast.per_replication["delta_b"])


def test_stats_split_half_verdict_rule_and_refusals():
    # one-sided binomial test against 1 - alpha - tolerance = 0.93
    assert verdict(950, 1000, 0.05, 0.02)[0] == "valid"
    label, p, reason = verdict(900, 1000, 0.05, 0.02)
    assert label == "too narrow" and p < 1e-3 and "0.900" in reason
    assert verdict(92, 100, 0.05, 0.02)[0] == "inconclusive"  # 100 splits cannot tell
    (c, t), _ = sims.audit_dataset(4, n_users=24)
    small = split_half_audit(c, t, replications=50)
    assert small.verdict == "inconclusive" and "too few" in small.reason
    with pytest.raises(ValueError, match="clusters=True"):
        split_half_audit(c, t, clusters=False, method="augmented_clustered")
    with pytest.raises(ValueError, match="method must be one of"):
        split_half_audit(c, t, method="bootstrap")


def test_stats_consistency_check_sees_a_shift_but_not_dependence():
    (c, t), _ = sims.audit_dataset(11)
    same = labeled_unlabeled_consistency(c, t, replications=300)
    # the treatment arm's unlabeled predictions run 1 star high: a labeled-vs-unlabeled shift
    shifted = replace(t, f_unl=t.f_unl + 1.0)
    moved = labeled_unlabeled_consistency(c, shifted, replications=300)
    print(same.rate_naive, same.rate_augmented, moved.rate_augmented)
    assert same.rate_augmented >= 0.85 and same.rate_naive >= 0.85
    assert moved.rate_augmented < same.rate_augmented - 0.15  # it reacts to the shift ...
    # ... but i.i.d. intervals on these clustered data (users randomized to arms) read as fine,
    # although the split-half audit flags them (test above): nested estimates share the labels
    iid = labeled_unlabeled_consistency(c, t, replications=300, clusters=False)
    assert iid.rate_naive >= 0.9
