"""The decision rule's error rates, by seeded simulation (see ``decision_sims.py``).

Targets of issue 22: non-inferiority false ship at the margin <= 5% (naive and PPI++), Holm's
family-wise error <= 5% over 3 variants, the whole rule's false ship rate under the null <= 5%.
The rule tests each bound one-sided at alpha / 2 = 2.5% (two-sided 95% intervals), so each rate
is also held to 2.5% plus three Monte Carlo standard errors: a rule testing at 5% one-sided, or
skipping Holm, fails.
"""

from __future__ import annotations

import numpy as np
import pytest
from decision_sims import arm, cost_guards, mc_se, ship_rates

from pulse_ml.inference.decision_rule import Success, decide
from pulse_ml.stats.arm_batch import compare_batch

pytestmark = pytest.mark.slow
ALPHA = 0.05
NOMINAL = ALPHA / 2
N, BIG_N = 175, 3500  # the demo's size: rated sessions per arm, 20 unrated per rated one


def test_non_inferiority_false_ship_at_the_margin():
    """The treatment is exactly `margin` stars worse: shipping it is wrong."""
    reps, margin = 3000, 0.1
    rng = np.random.default_rng(2201)
    control, _, _ = arm(rng, reps, N, BIG_N)
    treatment, _, _ = arm(rng, reps, N, BIG_N, effect=-margin, offset=10**7)
    rates = ship_rates(compare_batch(control, treatment), -margin)
    for name, rate in rates.items():
        limit = NOMINAL + 3 * mc_se(NOMINAL, reps)
        assert rate <= limit, f"{name}: false ship {rate:.4f} > {limit:.4f} ({reps} reps)"
        assert rate <= 0.05


def test_holm_family_wise_error_over_three_variants():
    """Three treatments equal to the control: shipping any is a family-wise error."""
    reps, k = 3000, 3
    rng = np.random.default_rng(2202)
    control, _, _ = arm(rng, reps, N, BIG_N)
    batches = [compare_batch(control, arm(rng, reps, N, BIG_N, offset=(j + 1) * 10**7)[0])
               for j in range(k)]
    any_holm, any_raw = [], []
    for i in range(reps):
        succ = [Success(b.aug_effect[i], b.aug_se[i], b.result.aug_df[i], 0.0) for b in batches]
        verdicts = decide(succ, [[]] * k, ALPHA, None, [])
        any_holm.append(any(v.decision == "ship" for v in verdicts))
        raw = [decide([s], [[]], ALPHA, None, [])[0].decision == "ship" for s in succ]
        any_raw.append(any(raw))
    fwer, raw_fwer = float(np.mean(any_holm)), float(np.mean(any_raw))
    limit = NOMINAL + 3 * mc_se(NOMINAL, reps)
    assert fwer <= limit, f"Holm FWER {fwer:.4f} > {limit:.4f}"
    # the test can see a missing correction: unadjusted, the family errs about 3x as often
    assert raw_fwer > limit, f"unadjusted FWER {raw_fwer:.4f} should exceed {limit:.4f}"


@pytest.mark.parametrize("case", ["rating_at_margin", "cost_at_margin"])
def test_whole_rule_false_ship_under_the_null(case):
    """Non-inferiority (0.1 stars) AND a cost guardrail (+5% relative): the null's two edges.

    ``rating_at_margin``: the rating is 0.1 stars worse, the cost 20% lower;
    ``cost_at_margin``: the rating is equal, the cost exactly 5% higher.
    """
    reps, margin, cost_margin = 1500, 0.1, 0.05
    rng = np.random.default_rng(2203 if case == "rating_at_margin" else 2204)
    effect, ratio = (-margin, 0.8) if case == "rating_at_margin" else (0.0, 1 + cost_margin)
    control, cost_c, ids_c = arm(rng, reps, N, BIG_N)
    treatment, cost_t, ids_t = arm(rng, reps, N, BIG_N, effect=effect, cost_ratio=ratio,
                                   offset=10**7)
    guards = cost_guards(cost_c, ids_c, cost_t, ids_t, cost_margin)
    rates = ship_rates(compare_batch(control, treatment), -margin, guards)
    for name, rate in rates.items():
        limit = NOMINAL + 3 * mc_se(NOMINAL, reps)
        assert rate <= limit, f"{case}, {name}: false ship {rate:.4f} > {limit:.4f}"


def test_cheaper_model_ships_by_non_inferiority_where_superiority_does_not():
    """Equal satisfaction, 20% lower cost, margin 0.15 stars, cost guardrail +5%: the rule ships
    by non-inferiority in >= 80% of experiments, superiority in <= 10%.

    At the demo's size (175 rated sessions per arm) these heavy-tailed users leave the PPI++
    s.e. near 0.14 and non-inferiority ships in only ~19% (see the report); 80% needs ~2,000
    rated sessions per arm here, the size this test uses (8,000 unrated per arm).
    """
    reps, n, big_n, margin = 400, 2000, 8000, 0.15
    rng = np.random.default_rng(2205)
    control, cost_c, ids_c = arm(rng, reps, n, big_n)
    treatment, cost_t, ids_t = arm(rng, reps, n, big_n, effect=0.0, cost_ratio=0.8,
                                   offset=10**7)
    guards = cost_guards(cost_c, ids_c, cost_t, ids_t)
    batch = compare_batch(control, treatment)
    ni = ship_rates(batch, -margin, guards)["augmented"]
    sup = ship_rates(batch, 0.0, guards)["augmented"]
    assert ni >= 0.80, f"non-inferiority ships {ni:.3f} ({reps} reps)"
    assert sup <= 0.10, f"superiority ships {sup:.3f}"
