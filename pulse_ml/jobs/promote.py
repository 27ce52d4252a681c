"""Move the ``champion`` alias of ``pulse-satisfaction`` to a model version by hand.

Without ``version``, list the registered versions (family, feature set, cross-validated
scores, the champion, when each was created) and change nothing. With ``version=N``, move the
alias; the decision is logged as a tag on the version (``promotion=promoted by hand``).

Example:
    pulse-ml promote             # which versions are there?
    pulse-ml promote version=3
"""

from __future__ import annotations

from pulse_ml import keys
from pulse_ml.config import text
from pulse_ml.report.tables import say

_WIDE = 18  # a family or feature-set name longer than this is cut (the table fits 100 columns)


def run(cfg) -> None:
    """Entry point of ``pulse-ml promote``."""
    from pulse_ml.registry import promotion
    from pulse_ml.registry import store as tracking

    version = text(cfg, "version")
    if version is None:
        list_versions()
        return
    tracking.setup(keys.TRAIN_EXPERIMENT)
    result = promotion.promote_by_hand(version)
    say(f"champion -> version {version} of {keys.REGISTERED_MODEL} "
          f"(was {result.champion_version or 'none'})")


def _cut(name: str) -> str:
    """A tag value fit for one table cell: whitespace collapsed, at most ``_WIDE`` characters."""
    name = " ".join(name.split())
    return name if len(name) <= _WIDE else name[:_WIDE - 3] + "..."


def list_versions() -> None:
    """Print the registered versions as a table (a message when there are none)."""
    from datetime import UTC, datetime

    import pandas as pd

    from pulse_ml import keys
    from pulse_ml.registry.models import list_versions as registered
    from pulse_ml.registry.store import tracking_uri
    from pulse_ml.report.tables import text_table

    records = registered()
    if not records:
        say(f"no version of {keys.REGISTERED_MODEL} is registered in {tracking_uri()} yet. Train "
            "and register one with `pulse-ml train` (or `pulse-ml pipeline`).")
        return
    frame = pd.DataFrame({
        "version": [int(r.version) if r.version.isdigit() else r.version for r in records],
        "family": [_cut(r.family) for r in records],
        "feature set": [_cut(r.feature_set) for r in records],
        keys.CV_MSE: [float("nan") if r.cv_mse is None else r.cv_mse for r in records],
        keys.CV_PEARSON: [float("nan") if r.cv_pearson is None else r.cv_pearson for r in records],
        "alias": ["champion" if r.champion else "" for r in records],
        "created (UTC)": [datetime.fromtimestamp(r.created, UTC).strftime("%Y-%m-%d %H:%M")
                          for r in records],
    })
    say(f"{len(records)} registered version{'s' if len(records) != 1 else ''} of "
        f"{keys.REGISTERED_MODEL} in {tracking_uri()}\n")
    say(text_table(frame, digits=4))
    none = "" if any(r.champion for r in records) else "No version is the champion yet. "
    say(f"\n{none}Move the champion with `pulse-ml promote version=N`.")
