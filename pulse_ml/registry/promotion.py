"""The promotion rule (pure) and moving the ``champion`` alias."""

from __future__ import annotations

from dataclasses import dataclass

from pulse_ml.errors import PulseError
from pulse_ml.registry.keys import CHAMPION, REGISTERED_MODEL
from pulse_ml.registry.models import champion_version, client


@dataclass(frozen=True)
class Promotion:
    """Outcome of the promotion rule for one new model version."""

    promoted: bool
    reason: str
    champion_version: str | None = None
    champion_value: float | None = None


def should_promote(objective: str, new_value: float, new_fingerprint: str,
                   champion_value: float | None, champion_fingerprint: str | None) -> tuple[
                       bool, str]:
    """The promotion rule (pure).

    The new version becomes champion when there is none yet, or when it beats the champion on
    the objective on the same data fingerprint. Otherwise the champion stays.

    Returns:
        ``(promote, reason)``.
    """
    if champion_value is None:
        return True, "no champion yet"
    if champion_fingerprint != new_fingerprint:
        return False, (f"the champion was scored on other data (fingerprint "
                       f"{str(champion_fingerprint)[:12]} vs {new_fingerprint[:12]}); its "
                       f"{objective} is not comparable. Use `pulse-ml promote version=N` to "
                       "switch by hand.")
    better = new_value < champion_value if objective == "cv_mse" else new_value > champion_value
    verb = "beats" if better else "does not beat"
    return better, (f"new {objective} {new_value:.4f} {verb} the champion's "
                    f"{champion_value:.4f} on the same data")


def decide_and_promote(version: str, objective: str, value: float, fingerprint: str,
                       auto: bool = True) -> Promotion:
    """Apply the promotion rule to ``version`` and move the alias when it wins."""
    current = champion_version()
    cur_value = cur_fp = None
    if current is not None:
        tags = current.tags or {}
        cur_fp = tags.get("data_fingerprint")
        cur_value = float(tags[objective]) if objective in tags else None
        if cur_value is None:
            cur_value = float("inf") if objective == "cv_mse" else float("-inf")
    promote, reason = should_promote(objective, value, fingerprint,
                                     None if current is None else cur_value, cur_fp)
    if promote and not auto:
        promote, reason = False, "automatic promotion is off (promote=never)"
    if promote:
        client().set_registered_model_alias(REGISTERED_MODEL, CHAMPION, str(version))
    client().set_model_version_tag(REGISTERED_MODEL, str(version), "promotion",
                                   "promoted" if promote else "kept")
    return Promotion(promote, reason, None if current is None else str(current.version),
                     cur_value)


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
    c.set_model_version_tag(REGISTERED_MODEL, str(version), "promotion", "promoted by hand")
    before = None if current is None else str(current.version)
    return Promotion(True, f"moved by hand from version {before}", before, None)
