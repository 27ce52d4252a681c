"""Calibration of the demo generator: the latent scale solved so the data hit their targets.

The intercept makes the labeled sessions' mean rating ``mean_rating``; each case study's direct
(latent) effect makes its population effect the configured one, on top of what the paper's
feature shifts already mediate. Pure functions of the settings and a seed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import brentq

from pulse_ml.simulate import model
from pulse_ml.simulate.paper import paper_shifts

if TYPE_CHECKING:
    from pulse_ml.simulate.spec import CaseStudySpec, SimulateSettings


def treatment_shift(spec: CaseStudySpec, scale: float) -> model.ArmShift:
    """The treatment arm's feature shifts: the paper's Tables 6-9 times ``scale`` (or none)."""
    found = paper_shifts(spec.name)
    if found is None:
        return model.ArmShift()
    flags, messages = found
    return model.shift_from_means(flags, messages, scale)


def latent_mean(features: dict[str, np.ndarray], settings: SimulateSettings,
                intercept: float, direct: float | np.ndarray) -> np.ndarray:
    """Latent satisfaction before user and session noise: intercept + signal x features + direct."""
    score = model.feature_score(features)
    return intercept + settings.signal * model.BASE_SCALE * score + direct


def _solve_shift(mu: np.ndarray, target_mean: float) -> float:
    """The latent shift ``d`` with ``mean(E[stars | mu + d]) = target_mean``."""
    return float(brentq(lambda d: model.expected_stars(mu + d).mean() - target_mean, -6.0, 6.0,
                        xtol=1e-9))


def calibrate(settings: SimulateSettings, seed: np.random.SeedSequence,
              n_per_arm: int) -> tuple[float, dict[str, float], dict[str, float]]:
    """Intercept (labeled mean = ``mean_rating``) and direct effects (population effect = target).

    Returns:
        ``(intercept, direct latent shift per case study, feature-mediated effect per case study)``.
    """
    arms: list[tuple[dict[str, np.ndarray], float, str | None]] = []  # features, weight, cs
    default_features = model.draw_features(np.random.default_rng(seed), n_per_arm,
                                            model.ArmShift())
    n_cs_labeled = 2 * len(settings.case_studies) * settings.labeled_per_arm
    arms.append((default_features, settings.n_labeled - n_cs_labeled, None))
    for spec in settings.case_studies:  # common random numbers: same seed for both arms
        arms.append((default_features, settings.labeled_per_arm, None))
        treated = model.draw_features(np.random.default_rng(seed), n_per_arm,
                                      treatment_shift(spec, settings.feature_shift_scale))
        arms.append((treated, settings.labeled_per_arm, spec.name))
    scores = [settings.signal * model.BASE_SCALE * model.feature_score(f) for f, _, _ in arms]
    # Which calibration sessions would be labeled: the same Gumbel top-k rule as the population
    # (a user's rater effect is, marginally, one normal draw per session).
    noise_rng = np.random.default_rng(seed.spawn(1)[0])
    keys = [settings.label_message_elasticity * np.log(f["user_message_count"])
            + noise_rng.normal(0.0, settings.rater_sd, n_per_arm) + noise_rng.gumbel(size=n_per_arm)
            for f, _, _ in arms]
    share = 1.0 / (1.0 + settings.unlabeled_ratio)
    label_w = [(k >= np.quantile(k, 1.0 - share)).astype(float) for k in keys]
    direct = {spec.name: 0.0 for spec in settings.case_studies}
    targets = {spec.name: spec.effect for spec in settings.case_studies}

    def labeled_mean(intercept: float) -> float:
        total = 0.0
        for (_, weight, cs), score, w in zip(arms, scores, label_w, strict=True):
            mu = intercept + score + (direct[cs] if cs else 0.0)
            total += weight * np.average(model.expected_stars(mu), weights=w)
        return total / settings.n_labeled

    intercept = 0.0
    mediated: dict[str, float] = {}
    for _ in range(2):  # alternate: the intercept moves the direct effects and vice versa
        intercept = brentq(lambda a: labeled_mean(a) - settings.mean_rating, -8.0, 8.0,
                           xtol=1e-7)
        base = model.expected_stars(intercept + scores[0]).mean()
        for k, spec in enumerate(settings.case_studies):
            score_t = scores[2 + 2 * k]
            mediated[spec.name] = model.expected_stars(intercept + score_t).mean() - base
            direct[spec.name] = _solve_shift(intercept + score_t, base + targets[spec.name])
    return float(intercept), direct, {k: float(v) for k, v in mediated.items()}
