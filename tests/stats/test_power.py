import numpy as np
import pytest
from scipy.stats import norm

from pulse_ml.errors import PulseError
from pulse_ml.stats.power import labels_needed


@pytest.mark.parametrize(
    "effect,sd,alpha,power", [(0.2, 1.0, 0.05, 0.8), (0.5, 1.3, 0.05, 0.9), (-0.3, 0.8, 0.1, 0.8)]
)
def test_stats_power_naive_matches_textbook(effect, sd, alpha, power):
    textbook = 2 * (norm.ppf(1 - alpha / 2) + norm.ppf(power)) ** 2 * sd**2 / effect**2
    plan = labels_needed(effect, sd, alpha=alpha, power=power)
    assert plan.n_naive_exact == pytest.approx(textbook, rel=1e-4)  # far tail is negligible
    assert plan.n_naive == int(np.ceil(plan.n_naive_exact))
    assert plan.n_ppi == plan.n_naive and plan.saving == 0


def test_stats_power_ppi_needs_fewer_labels_and_solves_its_equation():
    effect, sd, rho, big_n = 0.2, 1.0, 0.7, 2000
    plan = labels_needed(effect, sd, rho=rho, n_unlabeled=big_n)
    assert plan.n_ppi < plan.n_naive and plan.saving == plan.n_naive - plan.n_ppi
    n = plan.n_ppi_exact
    se = np.sqrt(2 * sd**2 / n * (1 - rho**2 * big_n / (n + big_n)))
    z = norm.ppf(0.975)
    achieved = norm.cdf(effect / se - z) + norm.cdf(-effect / se - z)
    assert achieved == pytest.approx(0.8, abs=1e-9)
    # more correlation / more unlabeled data -> fewer labels
    assert labels_needed(effect, sd, rho=0.9, n_unlabeled=big_n).n_ppi < plan.n_ppi
    assert labels_needed(effect, sd, rho=rho, n_unlabeled=20 * big_n).n_ppi <= plan.n_ppi
    # limit N -> infinity: factor (1 - rho^2)
    huge = labels_needed(effect, sd, rho=rho, n_unlabeled=10**9)
    assert huge.n_ppi_exact == pytest.approx(plan.n_naive_exact * (1 - rho**2), rel=1e-3)


def test_stats_power_simulated_power_of_naive_plan():
    effect, sd = 0.5, 1.0
    plan = labels_needed(effect, sd)
    n, reps = plan.n_naive, 4000
    rng = np.random.default_rng(0)
    c = rng.normal(0, sd, (reps, n))
    t = rng.normal(effect, sd, (reps, n))
    se = np.sqrt(c.var(axis=1, ddof=1) / n + t.var(axis=1, ddof=1) / n)
    rejected = np.abs(t.mean(axis=1) - c.mean(axis=1)) / se > norm.ppf(0.975)
    assert rejected.mean() == pytest.approx(0.8, abs=0.03)


def test_stats_power_bad_arguments():
    with pytest.raises(PulseError, match="effect"):
        labels_needed(0.0, 1.0)
    with pytest.raises(PulseError, match="rho"):
        labels_needed(0.1, 1.0, rho=1.5)
