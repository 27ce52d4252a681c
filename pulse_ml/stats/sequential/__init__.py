"""Anytime-valid monitoring of an A/B effect: every look at once, naive and PPI++.

An A/B test is looked at K times (daily, say). At look k the data are the sessions visible by
then; for each look this module computes, in one pass over the data (per-look sums, cumulated):

* the naive effect (difference of labeled means) and the PPI++ effect (per arm
  ``mean(Y) + lam (mean(f~) - mean(f))``, lam estimated only from the data up to look k), their
  standard errors, i.i.d. or cluster-robust by user, exactly as :func:`compare_arms` computes them
  on the data up to that look;
* the fixed-horizon Wald interval ``effect -/+ z_{1-alpha/2} se`` (what a daily dashboard shows;
  acting on the first look at which it excludes 0 inflates the false-positive rate);
* an anytime-valid asymptotic confidence sequence (AsympCS) ``effect -/+ m_k se``, valid
  uniformly over all looks, so a test may stop at the first look at which it excludes 0.

Estimators at a look (formulas of :mod:`pulse_ml.stats.arm_effect`). I.i.d. mode (no users):
per arm ``se^2 = Var0(Y - lam f)/n + lam^2 Var0(f~)/N`` with the power-tuned
``lam = clip(Cov0(Y, f) / ((1 + n/N) Var1(f_all)), 0, 1)`` of ppi_py; the arms add. Clustered
mode: per user g and arm a the influence sums ``A_g = sum (Y - Ybar)/n``, ``B_g = sum (f - fbar)/n``
(labeled) and ``C_g = sum (f~ - f~bar)/N`` (unlabeled), ``D_g = C_g - B_g``, CR1 factor
``s_a = sqrt(G_a/(G_a - 1))`` (G_a users seen in the arm), and the effect's variance
``V = sum_g (s_t (A_tg + lam_t D_tg) - s_c (A_cg + lam_c D_cg))^2``, which keeps the cross term
of users seen in both arms. ``lambda_rule="arm"`` takes ``lam_a = clip(-sum A D / sum D^2, 0, 1)``
per arm (as compare_arms); ``"joint"`` minimizes V over ``[0, 1]^2`` (identical to "arm" when no
user is in both arms). All these are quadratic forms in the per-user vector
``x_g = (n_g, sum Y, sum f, N_g, sum f~)`` of both arms, so each look needs only the Gram matrix
``sum_g x_g x_g^T`` (10 x 10) and the arm totals; they are updated look by look from the users
that have new sessions at that look (``x_new x_new^T - x_old x_old^T``), one pair of matrix
products per look. An arm with no unlabeled session yet has lam = 0; a look at which an arm has
fewer than 2 labels (or, clustered, fewer than 2 users) has NaN numbers.

The confidence sequence. For a standardized process whose variance grows linearly in a time t
(i.i.d. sums, after strong approximation), the two-sided Gaussian-mixture boundary of Robbins
gives ``P(exists t: |S_t| >= sigma sqrt(2 (t rho^2 + 1)/rho^2 log(sqrt(t rho^2 + 1)/alpha))) <=
alpha``. Waudby-Smith et al. (2024, Thm 2.2) turn this into the AsympCS

    mu_hat_t -/+ sigma_hat_t sqrt(2 (t rho^2 + 1) / (t^2 rho^2) log(sqrt(t rho^2 + 1) / alpha)),

and Kilian, Cortinovis & Caron (2025) apply it to PPI/PPI++. With ``sigma_hat_t^2 = t V_t`` the
half-width is ``se_t m(t)``, ``m(t) = sqrt(2 (t rho^2 + 1)/(t rho^2) log(sqrt(t rho^2 + 1)/alpha))``
(:func:`cs_multiplier`). The mixture parameter ``rho^2 = (2 log(1/alpha) + log(1 + 2 log(1/alpha)))
/ t*`` makes the boundary (nearly) tightest at the target time t* (Waudby-Smith et al. 2024,
Sec. 2.4; :func:`mixture_rho`); then ``t rho^2 = c t/t*``, so only the ratio ``t/t*`` matters.

Notes:
    What "t" is here. The boundary needs a clock proportional to the information of the error
    process, ``1/V_t``; only ``t/t*`` enters. We take t = the labeled sessions seen so far over
    both arms (clustered or not) and ``sigma_hat_t^2 = t V_t`` (a per-label variance that, with
    users, includes the design effect). Reasons: (i) t is a count fixed by the arrival process
    (ancillary to the ratings), so the boundary does not move with the noise of a variance
    estimate (the Lyapunov-type AsympCS clocks on an estimated variance instead, but then t* has
    to be set on a variance scale nobody knows in advance). (ii) With labeled and unlabeled
    sessions arriving in stable proportions the PPI++ variance is
    ``(1 - rho^2 N/(n + N)) sigma^2 / n``, proportional to ``1/n``: naive and PPI++ share one
    clock, their multipliers are equal at every look, and the width ratio of the sequences is the
    se ratio. Unlabeled sessions change sigma, not the clock. (iii) With users, the per-user sums
    are the independent units of the variance (CR1), but counting labeled *users* as the clock is
    wrong when users come back: the user count saturates while the information keeps growing
    with their new sessions, so early looks get too small a multiplier. In the seeded null
    simulation of the tests (21 daily looks, alpha = 5%, 1000 replications, 60 returning users,
    users in both arms, no burn-in) the PPI++ sequence ever excluded 0 in 8.3% of replications
    with a labeled-users clock, 5.9% with the estimated-information clock ``1/V_hat_t`` and
    3.8% with the labeled-sessions clock (naive: 4.0%, 2.8%, 2.1%). If the design effect grows
    over time (information grows slower than labels) the sessions clock errs on the
    conservative side.
    The guarantee is asymptotic. With few labels or few users the CR1 variance, and more so
    the PPI++ one with its fitted lambda, is too small (about 12% too small a se with 10 labels
    per arm), and the sequence is only protected by its large multiplier at small ``t/t*``;
    intervals are therefore reported only from the look at which each arm has
    ``min_units_per_arm`` labeled units (users when clustered, sessions otherwise). With only
    30 users in all and strong user effects the PPI++ sequence still overshoots alpha (about
    10% instead of 5%; naive about 5%): the asymptotics need tens of labeled users per arm.

    The target t*. The boundary is valid for any fixed rho; t* only decides where it is
    tightest. For a strict guarantee t* is fixed before the data are seen (``target_labels``,
    e.g. the labels expected by the planned last day, :func:`plan_monitoring`). Otherwise t* is
    the label count at ``target_look`` (default the last look); a target look beyond the data
    is extrapolated from the labels per look so far, which moves only with arrival counts.

    Planning (:func:`plan_monitoring`). With daily volumes per arm, ``Delta_hat_d`` has variance
    ``V_1/d`` and independent increments, so ``W_d = d Delta_hat_d / sqrt(V_1)`` is a Gaussian
    random walk with drift ``theta = Delta/sqrt(V_1)`` per day and the sequence stops when
    ``|W_d| >= m(d/t*) sqrt(d)``. The distribution of the stopping day is computed exactly (for
    the Gaussian approximation) by recursive numerical integration over the continuation region,
    as for group-sequential designs (Armitage, McPherson & Rowe 1969;
    :func:`first_crossing_probabilities`).

References:
    I. Waudby-Smith, D. Arbour, R. Sinha, E. H. Kennedy, A. Ramdas. Time-uniform central limit
    theory and asymptotic confidence sequences. Annals of Statistics, 2024 (arXiv:2103.06476).
    A. Kilian, S. Cortinovis, F. Caron. Anytime-valid, Bayes-assisted, prediction-powered
    inference. arXiv:2505.18000, 2025.
    H. Robbins. Statistical methods related to the law of the iterated logarithm. Annals of
    Mathematical Statistics 41(5), 1970.
    S. R. Howard, A. Ramdas, J. McAuliffe, J. Sekhon. Time-uniform, nonparametric,
    nonasymptotic confidence sequences. Annals of Statistics 49(2), 2021.
    A. N. Angelopoulos, J. C. Duchi, T. Zrnic. PPI++: Efficient prediction-powered inference.
    arXiv:2311.01453, 2023.
    P. Armitage, C. K. McPherson, B. C. Rowe. Repeated significance tests on accumulating data.
    JRSS A 132(2), 1969.
"""

from pulse_ml.stats.sequential.boundary import cs_multiplier, mixture_rho
from pulse_ml.stats.sequential.monitor import (
    ESTIMATORS,
    TABLE_COLUMNS,
    MonitorResult,
    monitor_effect,
)
from pulse_ml.stats.sequential.planning import (
    MonitorPlan,
    SequentialPlan,
    first_crossing_probabilities,
    plan_monitoring,
)
from pulse_ml.stats.sequential.simulation import simulate_monitoring

__all__ = [
    "ESTIMATORS",
    "TABLE_COLUMNS",
    "MonitorPlan",
    "MonitorResult",
    "SequentialPlan",
    "cs_multiplier",
    "first_crossing_probabilities",
    "mixture_rho",
    "monitor_effect",
    "plan_monitoring",
    "simulate_monitoring",
]
