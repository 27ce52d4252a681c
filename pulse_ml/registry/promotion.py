"""Moving the ``champion`` alias by the promotion rule (``training/promotion_rule.py``) or by hand.

Reads the champion and its scores from the registry, tags a new version with the rule's
decision and moves the alias; the rule itself (``significant`` | ``better`` | ``manual``) is
pure and lives in :mod:`pulse_ml.training.promotion_rule`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pulse_ml import keys
from pulse_ml.errors import PulseError
from pulse_ml.keys import CHAMPION, REGISTERED_MODEL
from pulse_ml.registry.models import champion_version, client
from pulse_ml.training.promotion_rule import Champion, Decision


@dataclass(frozen=True)
class Promotion:
    """Outcome of the promotion rule for one new model version."""

    promoted: bool
    reason: str
    champion_version: str | None = None
    champion_value: float | None = None


def decision_tags(decision: Decision) -> dict[str, str]:
    """Tags on the family run and the version: rule, decision, scores and the interval."""
    d = decision
    out = {keys.PROMOTION_RULE: d.rule, keys.PROMOTION_REASON: d.reason[:5000],
           keys.CANDIDATE: str(d.candidate).lower(),
           f"new_{d.objective}": f"{d.new_value:.6f}"}
    if d.champion_version is not None:
        out[keys.VS_VERSION] = d.champion_version
        if d.champion_value is not None:
            out[f"champion_{d.objective}"] = f"{d.champion_value:.6f}"
    if d.paired is not None:
        p = d.paired
        for name in ("delta_mse", "mse_ci_lower", "mse_ci_upper", "delta_r", "r_ci_lower",
                     "r_ci_upper"):
            out[keys.PAIRED_PREFIX + name] = f"{getattr(p, name):+.6f}"
    return out


def current_champion() -> Champion | None:
    """The champion version with the scores in its tags, or None."""
    mv = champion_version()
    if mv is None:
        return None
    tags = mv.tags or {}
    values = {}
    for key in (keys.CV_MSE, keys.CV_MAE, keys.CV_PEARSON):
        try:
            values[key] = float(tags[key])
        except (KeyError, ValueError):
            pass
    return Champion(version=str(mv.version), run_id=mv.run_id,
                    fingerprint=tags.get(keys.DATA_FINGERPRINT), values=values,
                    family=tags.get(keys.FAMILY, ""),
                    label_fingerprint=tags.get(keys.LABEL_FINGERPRINT),
                    feature_set=tags.get(keys.FEATURE_SET, ""),
                    cv_group_by=tags.get(keys.CV_GROUP_BY) or None)


def apply_decision(version: str, decision: Decision, auto: bool = True) -> Promotion:
    """Move the alias to ``version`` when the decision says so (and ``auto``); tag the version.

    Only the decision's tags named in ``keys.VERSION_TAGS`` (rule, champion version, outcome)
    go on the version; the rest goes into its description (``registry/version_card.py``).
    """
    promote, reason = decision.promote, decision.reason
    if promote and not auto:
        promote, reason = False, f"{reason}; automatic promotion is off (promote=never)"
    if promote:
        client().set_registered_model_alias(REGISTERED_MODEL, CHAMPION, str(version))
    c = client()
    for key, value in {**decision_tags(decision), keys.PROMOTION_REASON: reason[:5000],
                       keys.PROMOTION: "promoted" if promote else "kept"}.items():
        if key in keys.VERSION_TAGS:
            c.set_model_version_tag(REGISTERED_MODEL, str(version), key, value)
    return Promotion(promote, reason, decision.champion_version, decision.champion_value)


def promote_by_hand(version: str) -> Promotion:
    """Move ``champion`` to ``version`` (``pulse-ml promote``)."""
    from mlflow.exceptions import MlflowException

    c = client()
    try:
        c.get_model_version(REGISTERED_MODEL, str(version))
    except MlflowException:
        versions = [str(v.version) for v in c.search_model_versions(f"name='{REGISTERED_MODEL}'")]
        raise PulseError(f"model '{REGISTERED_MODEL}' has no version {version} (versions: "
                         f"{', '.join(sorted(versions, key=int)) or 'none'}).") from None
    current = champion_version()
    c.set_registered_model_alias(REGISTERED_MODEL, CHAMPION, str(version))
    c.set_model_version_tag(REGISTERED_MODEL, str(version), keys.PROMOTION,
                           "promoted by hand")
    before = None if current is None else str(current.version)
    return Promotion(True, f"moved by hand from version {before}", before, None)
