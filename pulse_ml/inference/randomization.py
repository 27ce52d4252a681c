"""Randomization inference of a case study (``infer inference=randomization``) and its checks.

Decides what was randomized (the case study's ``randomization_unit``, else inferred from the
data and said), refuses data that contradict it, runs
:func:`pulse_ml.stats.randomization.randomization_inference` and words the suggestion that
``infer`` prints when few users carry the labels (Kish effective number).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from pulse_ml.errors import PulseError
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.stats.randomization import (
    STATISTICS,
    RandomizationResult,
    kish_effective_units,
    randomization_inference,
)

if TYPE_CHECKING:
    from pulse_ml.inference.arm_data import ArmData

INFERENCE_MODES = {
    "asymptotic": "t intervals (cluster-robust by user)",
    "randomization": "also an exact randomization test and interval (units re-randomized)",
    "both": "the same as randomization, and the terminal table keeps the asymptotic p-value",
}
KISH_MIN = 30  # fewer effective labeled users per arm: suggest randomization inference


@dataclass(frozen=True)
class RandomizationSettings:
    """``randomization.*`` of ``infer``.

    Attributes:
        n_permutations: Random re-randomizations (all assignments when there are fewer).
        seed: Seed of the re-randomizations.
        statistic: ``"studentized"`` (effect / s.e.) or ``"effect"``.
    """

    n_permutations: int = 2000
    seed: int = 0
    statistic: str = "studentized"

    def __post_init__(self) -> None:
        if self.statistic not in STATISTICS:
            raise ValueError(f"statistic must be one of {STATISTICS}")


def _where(path: str, study: CaseStudy) -> str:
    return f"{path}: case study '{study.name}'"


def resolve_unit(path: str, study: CaseStudy, control: ArmData, treatment: ArmData
                 ) -> tuple[str, str]:
    """The randomized unit of a case study and a note saying how it was decided.

    Raises:
        PulseError: Declared ``user`` while some user has sessions in both arms.
    """
    users = [np.unique(np.concatenate([a.arm.users, a.arm.users_unl]))
             for a in (control, treatment)]
    shared = np.intersect1d(users[0], users[1])
    fix = f"conf/catalog/case_studies/{study.name}.yaml"
    if study.randomization_unit == "user":
        if shared.size:
            raise PulseError(
                f"{_where(path, study)} is declared randomization_unit: user, but {shared.size} "
                f"user(s) have sessions in both arms, so users were not randomized. Set "
                f"randomization_unit: session in {fix} if sessions were randomized, or fix the "
                "condition column of those users' sessions.")
        return "user", "users re-randomized (declared randomization_unit: user)"
    if study.randomization_unit == "session":
        return "session", "sessions re-randomized (declared randomization_unit: session)"
    if shared.size == 0:
        return "user", ("users re-randomized: randomization_unit is not declared and every "
                        f"user's sessions are in one arm (declare it in {fix})")
    return "session", (f"sessions re-randomized: randomization_unit is not declared and "
                       f"{shared.size} user(s) have sessions in both arms (declare it in {fix})")


def randomize(path: str, study: CaseStudy, control: ArmData, treatment: ArmData,
              alpha: float, settings: RandomizationSettings
              ) -> tuple[RandomizationResult, str]:
    """Randomization p-values and intervals of the naive and PPI++ effects of one case study.

    Returns:
        The result and a note naming the re-randomized unit.

    Raises:
        PulseError: Naming the case study: users shared by the arms of a user-randomized case
            study, or fewer than 2 labeled users in an arm.
    """
    unit, note = resolve_unit(path, study, control, treatment)
    if unit == "user":
        for role, arm, cond in (("control", control, study.control),
                                ("treatment", treatment, study.treatment)):
            n_users = np.unique(arm.arm.users).size
            if n_users < 2:
                raise PulseError(
                    f"{_where(path, study)}, {role} arm '{cond}': {n_users} labeled user(s); "
                    "randomization inference re-randomizes users and needs ratings from at "
                    "least 2 users per arm. Collect ratings from more users, or run "
                    "inference=asymptotic, or leave the case study out with case_studies=[...].")
        arms = [control.arm, treatment.arm]
    else:
        arms = [replace(a.arm, users=None, users_unl=None) for a in (control, treatment)]
    try:
        res = randomization_inference(
            arms[0], arms[1], alpha=alpha, n_permutations=settings.n_permutations,
            seed=settings.seed, statistic=settings.statistic)
    except PulseError as exc:
        raise PulseError(f"{_where(path, study)}: {exc} Fix the data or run "
                         "inference=asymptotic.") from exc
    how = ("all assignments enumerated" if res.exhaustive
           else f"{res.n_assignments} random re-randomizations")
    return res, (f"randomization inference: {note}; {res.n_units_control} + "
                 f"{res.n_units_treatment} units, {how}, {settings.statistic} statistic")


def few_users_warning(control: ArmData, treatment: ArmData, running: bool) -> str | None:
    """The suggestion to use randomization inference when few users carry the labels.

    Kish effective number of labeled users per arm, ``(sum n_g)^2 / sum n_g^2`` over the users'
    label counts n_g; below :data:`KISH_MIN` in either arm the asymptotic interval can
    under-cover.

    Args:
        control: Control arm data.
        treatment: Treatment arm data.
        running: Whether randomization inference is already being run.
    """
    eff = [kish_effective_units(a.arm.users) for a in (control, treatment)]
    if min(eff) >= KISH_MIN:
        return None
    counts = [np.unique(a.arm.users).size for a in (control, treatment)]
    said = (f"only {eff[0]:.1f} (control) and {eff[1]:.1f} (treatment) effective labeled users "
            f"(Kish; {counts[0]} and {counts[1]} users gave ratings), below {KISH_MIN}: the "
            "asymptotic interval may be too narrow")
    if running:
        return said + "; read the randomization interval."
    return said + ("; run `pulse-ml infer inference=randomization` for an exact test and "
                   "interval.")
