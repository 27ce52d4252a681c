"""Anytime-valid monitoring of an A/B effect: every look at once, naive and PPI++.

An A/B test is looked at K times (daily, say). At look k the data are the sessions visible by
then; for each look this module computes, in one pass over the data (per-look sums, cumulated):

* the naive effect (difference of labeled means) and the PPI++ effect (per arm
  ``mean(Y) + lam (mean(f~) - mean(f))``, lam estimated only from the data up to look k), their
  standard errors and degrees of freedom, i.i.d. or cluster-robust by user;
* the fixed-horizon interval ``effect -/+ t_{df, 1-alpha/2} se`` (what a daily dashboard
  shows; acting on the first look at which it excludes 0 inflates the false-positive rate);
* an anytime-valid asymptotic confidence sequence (AsympCS) ``effect -/+ m_k se``, valid
  uniformly over all looks, so a test may stop at the first look at which it excludes 0.

Estimators at a look: exactly those of ``infer``
(:func:`pulse_ml.stats.arm_effect.compare_arms`), because the same code computes them. The
per-look additive statistics :class:`~pulse_ml.stats.cluster_moments.Moments` of the sessions
visible by then (:func:`~pulse_ml.stats.sequential.engine.look_moments`: cumulated sums, and the
Gram matrix of per-user sums updated look by look from the users with new sessions) go in one
batch to :func:`pulse_ml.stats.effect_engine.solve` with its small-sample rules: joint (or
per-arm) lambda on [0, 1]^2, CR1 on labeled users (ddof 1 for single sessions), the pooled floor
of the unlabeled variance, the lambda-tuning inflation ``(G - 1)/(G - 1 - 2h)`` and t quantiles
with Welch-Satterthwaite df from the labeled clusters. So the fixed interval at the last look is
``infer``'s interval on the same sessions. A look at which an arm has fewer than 2 labels (or
labeled users) has NaN numbers.

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
    users in both arms, no burn-in; measured with the earlier large-sample se) the PPI++
    sequence ever excluded 0 in 8.3% of replications
    with a labeled-users clock, 5.9% with the estimated-information clock ``1/V_hat_t`` and
    3.8% with the labeled-sessions clock (naive: 4.0%, 2.8%, 2.1%). If the design effect grows
    over time (information grows slower than labels) the sessions clock errs on the
    conservative side.
    The sequence's boundary is on the t scale: ``m_t = t_df^{-1}(Phi(m))`` with the engine's
    df (effective labeled users per arm minus the lambda tuning; :func:`t_multiplier`), its se
    the small-sample one above (ddof 1 / CR1 and the lambda inflation). The guarantee is
    asymptotic. With few labels or few users the CR1 variance, and more so the PPI++ one with
    its fitted lambda, is too small; intervals are therefore reported only from the look at
    which each arm has ``min_units_per_arm`` labeled units (users when clustered, sessions
    otherwise). With the normal multiplier, 30 users and strong user effects gave PPI++ 6-7.4%,
    and 150 users of heavy-tailed (Pareto 1.1) activity 6.6-9.7% (few *effective* users: a few
    raters give most labels); on the t scale these read under 2%
    (:mod:`~pulse_ml.stats.sequential.small_sample` has the measurements and the alternatives).
    Validity is checked down to :data:`MIN_EFFECTIVE_UNITS` effective (Kish) labeled users per
    arm, and the monitor warns below; it also warns when labels that drift in time bias the
    PPI++ rectifier (``time_shift``, :func:`within_window_effects`).

    The target t*. The boundary is valid for any fixed rho; t* only decides where it is
    tightest. For the guarantee t* must not depend on later data: it is fixed in advance
    (``target_labels``, e.g. the labels expected by the planned last day,
    :func:`plan_monitoring`), or set from a planned ``horizon`` and the label rate up to the
    burn-in look (the first look with intervals), which later data never move: a re-run with
    more data shows the same bands at every earlier look (the ``monitor`` job's default, 21
    days). ``target_look`` (default: the last look) suits a simulation whose calendar is known;
    in a live test it moves as looks are added.

    Planning (:func:`plan_monitoring`). With daily volumes per arm, ``Delta_hat_d`` has variance
    ``V_1/d`` and independent increments, so ``W_d = d Delta_hat_d / sqrt(V_1)`` is a Gaussian
    random walk with drift ``theta = Delta/sqrt(V_1)`` per day and the sequence stops when
    ``|W_d| >= m(d/t*) sqrt(d)``. The distribution of the stopping day is computed exactly (for
    the Gaussian approximation) by recursive numerical integration over the continuation region,
    as for group-sequential designs (Armitage, McPherson & Rowe 1969;
    :func:`first_crossing_probabilities`).

Where the names live (import them from their module; this package re-exports nothing):
:mod:`.boundary` (``cs_multiplier``, ``mixture_rho``), :mod:`.monitor` (``monitor_effect``,
``MonitorResult``), :mod:`.engine` (``look_moments``), :mod:`.planning` (``plan_monitoring``,
``first_crossing_probabilities``), :mod:`.small_sample` (``t_multiplier``,
``MIN_EFFECTIVE_UNITS``, ``within_window_effects``), :mod:`.simulation`
(``simulate_monitoring``), :mod:`.stops`.

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
