"""The promotion rule (pure): should a new model become the champion?

Rules (``promotion.rule``):

- ``significant`` (default): the new version becomes champion only if it is better than the
  champion beyond the noise of the data — for objective ``cv_mse`` the 95% user-bootstrap
  interval of the paired out-of-fold MSE difference (new - champion, same sessions) lies below
  0; for ``cv_pearson`` the interval of the difference in r lies above 0. The train job pairs
  selection-free predictions (``registry/champion_oof.py``), never the best trial's own.
- ``better``: any strict improvement of the objective on the same data (the old rule).
- ``manual``: never automatically; ``pulse-ml promote version=N``.

With every rule a first version becomes champion when there is none, except ``manual``. A
champion is compared only on the same labeled sessions and ratings: the same data fingerprint,
or the same label fingerprint (session ids and ratings) with another feature set — a feature-set
change is judged on the same sessions too. A champion trained on other sessions is never
compared.

The folds must be grouped the same way too (tag ``cv_group_by``: ``user_id`` or ``none``).
With ``cv.group_by=none`` a user's sessions sit in several folds, so the out-of-fold
predictions of clustered users are leaky (too good) and cannot be paired with those of a
user-grouped model: another grouping is never compared under any rule. A champion registered
before the grouping was tagged has an unknown grouping: ``significant`` makes no claim against
it (kept, with the reason); ``better`` compares the scores and says the grouping is unknown.

No MLflow here: ``registry/promotion.py`` reads the champion from the registry, tags the version
with :func:`~pulse_ml.registry.promotion.decision_tags` and moves the alias.
"""

from __future__ import annotations

from dataclasses import dataclass

from pulse_ml import keys
from pulse_ml.errors import PulseError
from pulse_ml.stats.paired import PairedComparison
from pulse_ml.training.paired import difference, paired_sentence

RULES = {"significant": "promote when the paired 95% interval excludes 0 in the new model's "
                        "favour",
         "better": "promote on any strict improvement of the objective",
         "manual": "never promote automatically (pulse-ml promote version=N)"}
NOT_GROUPED = "none"  # cv.group_by=none (keys.NOT_GROUPED): folds that split users


@dataclass(frozen=True)
class Champion:
    """The current champion as the promotion rule sees it."""

    version: str
    run_id: str | None
    fingerprint: str | None
    values: dict[str, float]
    family: str
    label_fingerprint: str | None = None
    feature_set: str = ""
    cv_group_by: str | None = None  # None: registered before the grouping was tagged

    def comparable(self, fingerprint: str, label_fingerprint: str | None) -> bool:
        """Same data fingerprint, or the same sessions and ratings (label fingerprint)."""
        return self.fingerprint == fingerprint or (
            self.label_fingerprint is not None and self.label_fingerprint == label_fingerprint)

    def same_folds(self, cv_group_by: str | None) -> bool | None:
        """Folds grouped like ``cv_group_by``: True, False, or None (either one unknown)."""
        if self.cv_group_by is None or cv_group_by is None:
            return None
        return self.cv_group_by == cv_group_by


def grouping_problem(new: str | None, reference: str | None, label: str) -> str | None:
    """Why two models' out-of-fold predictions cannot be paired, or None (same grouping).

    Args:
        new: ``cv_group_by`` of the new model (``user_id``/``none``; None = unknown).
        reference: ``cv_group_by`` of the reference (None = unknown, e.g. an old version).
        label: How the sentence names the reference (e.g. ``champion v3``).
    """
    if new is not None and new == reference:
        return None
    if new is None or reference is None:
        who = label if reference is None else "the new model"
        return (f"the CV grouping of {who} is unknown (no cv_group_by tag: trained "
                "before it was recorded), so its out-of-fold predictions may come from folds "
                "that split users (leaky) and no significant difference can be claimed")
    leaky = new if new == NOT_GROUPED else reference
    return (f"the folds were grouped differently (cv.group_by={new} for the new model, "
            f"{reference} for {label}); folds with cv.group_by={leaky} split a user's sessions, "
            "so those out-of-fold predictions are leaky and the two cannot be paired")


@dataclass(frozen=True)
class Decision:
    """What the promotion rule says about a new model (before anything is registered).

    Attributes:
        rule: ``significant``, ``better`` or ``manual``.
        objective: ``cv_mse`` or ``cv_pearson``.
        promote: The rule makes the new model champion.
        candidate: Worth a registered version under ``register=candidates`` (the rule would
            promote it; with ``manual``, it beats the champion's score).
        reason: One sentence for people (printed and logged as a tag).
        new_value: The new model's objective.
        champion_version: The champion it was compared with (None: no champion).
        champion_value: The champion's objective.
        paired: The paired comparison with the champion (None when not computed).
    """

    rule: str
    objective: str
    promote: bool
    candidate: bool
    reason: str
    new_value: float
    champion_version: str | None = None
    champion_value: float | None = None
    paired: PairedComparison | None = None


_interval = difference  # the paired difference an objective is judged on


def significantly_better(paired: PairedComparison, objective: str) -> bool:
    """True when the interval excludes 0 in the new model's favour (MSE below, r above)."""
    if objective == keys.CV_PEARSON:
        return paired.r_ci_lower > 0
    return paired.mse_ci_upper < 0


def should_promote(objective: str, new_value: float, new_fingerprint: str,
                   champion_value: float | None, champion_fingerprint: str | None,
                   rule: str = "better", paired: PairedComparison | None = None,
                   champion_label: str = "the champion") -> tuple[bool, str]:
    """The promotion rule (pure).

    Args:
        objective: ``cv_mse`` (lower is better) or ``cv_pearson`` (higher is better).
        new_value: The new model's out-of-fold objective.
        new_fingerprint: Fingerprint of its training data.
        champion_value: The champion's objective (None = there is no champion).
        champion_fingerprint: Fingerprint of the champion's training data.
        rule: ``significant``, ``better`` or ``manual`` (see the module docstring).
        paired: Paired comparison new vs champion on the same sessions (``significant``).
        champion_label: How the reason names the champion (e.g. ``champion v3``).

    Returns:
        ``(promote, reason)``.

    Raises:
        PulseError: unknown rule or objective.
    """
    if rule not in RULES:
        raise PulseError(f"promotion.rule={rule} is not an option; use one of "
                         f"{', '.join(RULES)}.")
    if objective not in (keys.CV_MSE, keys.CV_PEARSON):
        raise PulseError(f"objective={objective}: use cv_mse or cv_pearson.")
    if champion_value is None:
        if rule == "manual":
            return False, ("no champion yet, and promotion.rule=manual: promote a version by "
                           "hand with `pulse-ml promote version=N`")
        return True, "no champion yet"
    if champion_fingerprint != new_fingerprint:
        return False, (f"{champion_label} was scored on other data (fingerprint "
                       f"{str(champion_fingerprint)[:12]} vs {new_fingerprint[:12]}); its "
                       f"{objective} is not comparable. Use `pulse-ml promote version=N` to "
                       "switch by hand.")
    better = new_value < champion_value if objective == keys.CV_MSE else new_value > champion_value
    scores = (f"new {objective} {new_value:.4f} vs {champion_value:.4f} of {champion_label}")
    if rule == "manual":
        return False, (f"{scores}; promotion.rule=manual: promote by hand with `pulse-ml "
                       "promote version=N`")
    if rule == "better":
        verb = "beats" if better else "does not beat"
        return better, (f"new {objective} {new_value:.4f} {verb} the champion's "
                        f"{champion_value:.4f} on the same sessions"
                        + (f" ({champion_label})" if champion_label != "the champion" else ""))
    if paired is None:
        return False, (f"{scores}; no paired comparison with {champion_label} (its out-of-fold "
                       "predictions are missing), so promotion.rule=significant cannot "
                       "decide: kept. Use promotion.rule=better or `pulse-ml promote "
                       "version=N`.")
    sentence = paired_sentence(paired, objective, champion_label)
    if significantly_better(paired, objective):
        return True, f"{scores}; {sentence}: significantly better"
    side = "includes 0" if _interval(paired, objective)[2] <= 0 <= _interval(
        paired, objective)[3] else "is on the wrong side of 0"
    return False, (f"{scores}; {sentence} {side}: not significantly better, "
                   f"{champion_label} stays")


def decide(rule: str, objective: str, new_value: float, new_fingerprint: str,
           champion: Champion | None, paired: PairedComparison | None = None,
           new_label_fingerprint: str | None = None,
           new_cv_group_by: str | None = None) -> Decision:
    """Apply the rule to a new model (pure); see :class:`Decision`.

    The champion counts as scored on the same data when :meth:`Champion.comparable` (same
    data fingerprint, or same label fingerprint with another feature set). When
    ``new_cv_group_by`` is given, the folds must be grouped like the champion's: another
    grouping is never promoted over it; an unknown grouping (an old champion) blocks a
    ``significant`` claim and is named in the reason of ``better``.
    """
    label = "the champion" if champion is None else (
        f"champion v{champion.version}" + (f" ({champion.family}/{champion.feature_set})"
                                           if champion.family and champion.feature_set else ""))
    cur_value = None if champion is None else champion.values.get(
        objective, float("inf") if objective == keys.CV_MSE else float("-inf"))
    cur_fp = None if champion is None else champion.fingerprint
    if champion is not None and champion.comparable(new_fingerprint, new_label_fingerprint):
        cur_fp = new_fingerprint  # the same sessions and ratings: the scores are comparable
    folds = None if champion is None or new_cv_group_by is None else grouping_problem(
        new_cv_group_by, champion.cv_group_by, label)
    if folds is not None and champion.same_folds(new_cv_group_by) is False:
        return Decision(rule=rule, objective=objective, promote=False, candidate=False,
                        reason=f"{folds}: {label} stays. Use `pulse-ml promote version=N` to "
                               "switch by hand.", new_value=float(new_value),
                        champion_version=champion.version, champion_value=cur_value,
                        paired=None)
    promote, reason = should_promote(objective, new_value, new_fingerprint, cur_value, cur_fp,
                                     rule, paired, label)
    if folds is not None and cur_fp == new_fingerprint:
        if rule == "significant" and promote:
            promote, reason = False, f"{reason}, but {folds}: {label} stays"
        else:
            reason = f"{reason} (note: {folds})"
    if rule == "manual":
        candidate = should_promote(objective, new_value, new_fingerprint, cur_value, cur_fp,
                                   "better", None, label)[0]
    else:
        candidate = promote
    return Decision(rule=rule, objective=objective, promote=promote, candidate=candidate,
                    reason=reason, new_value=float(new_value),
                    champion_version=None if champion is None else champion.version,
                    champion_value=cur_value, paired=paired)
