"""What the demo generator is asked for: the simulated A/B tests and the generator's settings.

Plain frozen dataclasses, apart from ``generator.py`` so that the calibration (which solves the
direct effects for these settings) and the generator both import them without a loop.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CaseStudySpec:
    """One simulated A/B test.

    Attributes:
        name: Case-study name (the ``case_study`` column).
        control: Control condition value.
        treatment: Treatment condition value.
        effect: True population effect (treatment minus control mean rating).
    """

    name: str
    control: str
    treatment: str
    effect: float


@dataclass(frozen=True)
class SimulateSettings:
    """Everything the generator needs (built once from ``conf/simulate.yaml``)."""

    seed: int = 0
    n_labeled: int = 1747
    unlabeled_ratio: float = 20.0
    signal: float = 1.0
    mean_rating: float = 4.07
    case_studies: tuple[CaseStudySpec, ...] = ()
    labeled_per_arm: int = 175
    min_labeled_per_arm: int = 150
    default_condition: str = "default"
    extra_sessions_mean: float = 1.4
    extra_sessions_dispersion: float = 0.25
    rater_sd: float = 1.0
    user_sd: float = 0.45  # a user's rating habit: s.d. of its latent offset (model.SIGMA_USER)
    label_message_elasticity: float = 0.7
    feature_shift_scale: float = 1.0
    mc_sessions: int = 400_000
    days: int = 21
    start_date: str = "2025-06-02"
    text_signal: float = 0.5
    cost_ratio: tuple[tuple[str, float], ...] = ()  # (case study, treatment/control cost) pairs
