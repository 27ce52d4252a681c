"""Move the ``champion`` alias of ``pulse-satisfaction`` to a model version by hand.

The decision is logged as a tag on the version (``promotion=promoted by hand``).

Example:
    pulse-ml promote version=3
"""

from __future__ import annotations

from pulse_ml.config import require
from pulse_ml.report.tables import say


def run(cfg) -> None:
    """Entry point of ``pulse-ml promote``."""
    from pulse_ml.registry import promotion
    from pulse_ml.registry import store as tracking

    version = str(require(cfg, "version", "promote"))
    tracking.setup(tracking.TRAIN_EXPERIMENT)
    result = promotion.promote_by_hand(version)
    say(f"champion -> version {version} of {tracking.REGISTERED_MODEL} "
          f"(was {result.champion_version or 'none'})")
