"""The generative model of one session: features given the arm, and the rating given features.

Features come from a latent "friction" ``z ~ N(0, 1)`` per session (more friction: more failure
flags, more user messages, worse sentiment, fewer commits/pushes) plus the arm's shifts (logit
shifts for 0/1 columns, a log-ratio for the message count). The rating depends on the observed
features only (plus the arm's direct effect, a user effect and noise), so the Bayes-optimal
predictor has a closed form: with Gaussian noise of total s.d. ``sigma`` and ordered star
thresholds ``tau``, ``E[stars | X, arm] = 1 + sum_k Phi((mu(X, arm) - tau_k) / sigma)`` for every
rated segment, hence also for their mean.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit, logit, ndtr

from pulse_ml.simulate.paper import FLAG_COLUMNS, GIT_COLUMNS

SENTIMENTS: tuple[str, ...] = ("positive", "neutral", "negative")
CATEGORIES: tuple[str, ...] = (
    "fix_bugs", "implement_features", "create_programs_from_scratch", "fix_failing_ci",
    "fix_merge_conflicts", "write_documentation", "perform_deployments", "perform_data_analysis",
)
CATEGORY_PROBS = np.array([0.30, 0.18, 0.25, 0.06, 0.03, 0.05, 0.07, 0.06])
CATEGORY_FRICTION = np.array([0.10, 0.0, -0.05, 0.25, 0.20, -0.35, 0.30, -0.10])

# Base logit and friction slope of each 0/1 column (population of default sessions).
FLAG_BASE = {  # prevalence at z = 0 -> logit
    "misunderstood_intention": 0.22, "did_not_follow_instruction": 0.32,
    "insufficient_analysis": 0.34, "insufficient_testing": 0.33, "insufficient_debugging": 0.34,
    "incomplete_implementation": 0.42, "scope_creep": 0.09,
    "git_commit": 0.62, "git_pull": 0.075, "git_reset": 0.065, "git_rebase": 0.014,
}
FLAG_SLOPE = {
    "misunderstood_intention": 0.9, "did_not_follow_instruction": 0.8,
    "insufficient_analysis": 0.7, "insufficient_testing": 0.6, "insufficient_debugging": 0.8,
    "incomplete_implementation": 0.9, "scope_creep": 0.4,
    "git_commit": -0.35, "git_pull": 0.1, "git_reset": 0.35, "git_rebase": 0.2,
}
PUSH_GIVEN_COMMIT = 0.86  # prevalence of git_push at z = 0 among sessions with a commit
PUSH_WITHOUT_COMMIT = 0.04
PUSH_SLOPE = -0.45

MSG_MEDIAN_EXTRA = 12.0  # 1 + NegBin(extra): median ~10 over all sessions
MSG_FRICTION = 0.30
MSG_DISPERSION = 2.0
SENTIMENT_FRICTION = 0.9
SENTIMENT_CUTS = (-0.45, 0.85)  # score < cut0: positive; > cut1: negative (score = friction+noise)

# Rating model on the latent scale (before `signal` scaling and the intercept).
COEF_SENTIMENT = {"positive": 0.55, "neutral": 0.0, "negative": -0.85}
COEF_FLAGS = {
    "misunderstood_intention": -0.22, "did_not_follow_instruction": -0.15,
    "insufficient_analysis": -0.06, "insufficient_testing": -0.04,
    "insufficient_debugging": -0.08, "incomplete_implementation": -0.20, "scope_creep": -0.08,
    "git_commit": 0.12, "git_push": 0.30, "git_pull": 0.0, "git_reset": -0.05, "git_rebase": 0.0,
}
COEF_CATEGORY = np.array([0.0, 0.05, 0.05, -0.12, -0.05, 0.10, -0.15, 0.05])
COEF_LOG_MESSAGES = -0.10
BASE_SCALE = 0.52  # signal = 1 -> Bayes rho ~ 0.33 (checked by tests)

SIGMA_USER = 0.45
SIGMA_SESSION = 0.72
SIGMA_SEGMENT = 0.50
SIGMA_TOTAL = float(np.sqrt(SIGMA_USER**2 + SIGMA_SESSION**2 + SIGMA_SEGMENT**2))
MAX_USER_SD = float(np.hypot(SIGMA_USER, SIGMA_SESSION))  # the user + session share


def session_sd(user_sd: float) -> float:
    """The session noise s.d. that keeps the total latent s.d. (:data:`SIGMA_TOTAL`) fixed.

    A stronger rating habit (``user_sd``, a user's offset) takes variance from the session
    noise, so star shares, the intercept and the ground truth stay as calibrated; only how much
    of a session's rating its user's other sessions predict changes.
    """
    if user_sd == SIGMA_USER:  # the default: exactly the calibrated constant (bit for bit)
        return SIGMA_SESSION
    return float(np.sqrt(max(MAX_USER_SD**2 - user_sd**2, 0.0)))
# Star thresholds: per-segment shares ~ 10% 1, 5% 2, 8% 3, 17% 4, 60% 5 before recentering.
TAUS = np.array([-1.28, -1.04, -0.74, -0.25]) * SIGMA_TOTAL


@dataclass(frozen=True)
class ArmShift:
    """How an arm moves the features away from the default population.

    Attributes:
        flag_logit: Logit shift per 0/1 column (missing = 0).
        log_messages: Shift of the log mean user-message count.
    """

    flag_logit: dict[str, float] = field(default_factory=dict)
    log_messages: float = 0.0


def shift_from_means(flags: dict[str, tuple[float, float]], messages: tuple[float, float],
                     scale: float = 1.0) -> ArmShift:
    """Turn (control, treatment) means into logit / log-ratio shifts, scaled by ``scale``."""
    eps = 0.005
    out = {}
    for column, (a, b) in flags.items():
        a, b = np.clip([a, b], eps, 1 - eps)
        out[column] = float(scale * (logit(b) - logit(a)))
    return ArmShift(out, float(scale * np.log(messages[1] / messages[0])))


def draw_features(rng: np.random.Generator, n: int, shift: ArmShift) -> dict[str, np.ndarray]:
    """Draw the 15 features of ``n`` sessions of one arm.

    Args:
        rng: Random generator (consumed in a fixed order).
        n: Number of sessions.
        shift: The arm's shifts.

    Returns:
        Column name -> array (sentiment and category as integer codes into ``SENTIMENTS`` /
        ``CATEGORIES``; counts and flags as int64).
    """
    category = rng.choice(len(CATEGORIES), size=n, p=CATEGORY_PROBS)
    z = rng.standard_normal(n) + CATEGORY_FRICTION[category]
    uniforms = rng.random((len(FLAG_BASE) + 1, n))
    out: dict[str, np.ndarray] = {"task_category": category}
    for i, column in enumerate(FLAG_BASE):
        eta = logit(FLAG_BASE[column]) + FLAG_SLOPE[column] * z + shift.flag_logit.get(column, 0)
        out[column] = (uniforms[i] < expit(eta)).astype(np.int64)
    push_base = np.where(out["git_commit"] == 1, logit(PUSH_GIVEN_COMMIT),
                         logit(PUSH_WITHOUT_COMMIT))
    eta = push_base + PUSH_SLOPE * z + shift.flag_logit.get("git_push", 0.0)
    out["git_push"] = (uniforms[-1] < expit(eta)).astype(np.int64)
    score = SENTIMENT_FRICTION * z + rng.standard_normal(n)
    out["user_sentiment"] = np.digitize(score, SENTIMENT_CUTS).astype(np.int64)
    # Last draw: the gamma-Poisson sampler's consumption depends on the mean, so two arms drawn
    # from the same seed stay coupled (common random numbers) for everything above.
    mean_extra = MSG_MEDIAN_EXTRA * np.exp(MSG_FRICTION * z + shift.log_messages)
    extra = rng.negative_binomial(MSG_DISPERSION, MSG_DISPERSION / (MSG_DISPERSION + mean_extra))
    out["user_message_count"] = 1 + extra.astype(np.int64)
    return out


def feature_score(features: dict[str, np.ndarray]) -> np.ndarray:
    """Linear satisfaction score of the features (latent scale, before ``signal``)."""
    sentiment = np.array([COEF_SENTIMENT[s] for s in SENTIMENTS])
    score = sentiment[features["user_sentiment"]] + COEF_CATEGORY[features["task_category"]]
    for column in FLAG_COLUMNS + GIT_COLUMNS:
        score = score + COEF_FLAGS[column] * features[column]
    return score + COEF_LOG_MESSAGES * np.log(features["user_message_count"])


def expected_stars(mu: np.ndarray) -> np.ndarray:
    """``E[stars | mu]`` for one segment (and for the mean of any number of segments)."""
    mu = np.asarray(mu, dtype=float)
    return 1.0 + ndtr((mu[..., None] - TAUS) / SIGMA_TOTAL).sum(axis=-1)


def stars(latent: np.ndarray) -> np.ndarray:
    """Map latent segment scores to 1-5 stars with the ordered thresholds."""
    return (1 + np.searchsorted(TAUS, latent, side="left")).astype(np.int64)
