"""A registered version's tags and description: a few tags to filter on, the rest readable.

A version keeps at most 12 tags (:data:`pulse_ml.keys.VERSION_TAGS`: family, feature set,
fingerprints, CV grouping, objective, CV scores, promotion — what the versions table is filtered
on and what promotion, ``compare`` and ``infer`` read back). Everything else a train call records
about the version goes into its description: one plain summary line first (the versions table
shows the description's start, unrendered), then the promotion reason, then one ``name: value``
line per value. The family run that trained it (the version's source run) keeps them as tags,
params or metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pulse_ml import keys
from pulse_ml.redact import redact_text

if TYPE_CHECKING:
    from pulse_ml.training.report import TrainResult

MAX_TAGS = 12


def version_tags(record: Mapping[str, object]) -> dict[str, str]:
    """The tags of a new version: the entries of ``record`` named in ``VERSION_TAGS``."""
    return {k: str(record[k]) for k in keys.VERSION_TAGS if record.get(k) not in (None, "")}


def headline(result: TrainResult, data_name: str) -> str:
    """The description's first line (plain text: the versions table does not render Markdown)."""
    m = result.metrics
    outcome = "promoted to champion" if result.promoted else "not promoted"
    return (f"{result.family} on feature set {result.feature_set}: out-of-fold MSE "
            f"{m.mse:.4f}, r {m.pearson:.4f} on {result.n_labeled:,} labeled sessions of "
            f"{data_name}; {outcome} when registered (rule {result.rule}).")


def describe(first_line: str, record: Mapping[str, object]) -> str:
    """The version's description: ``first_line``, the promotion reason, the other values.

    Args:
        first_line: The summary (:func:`headline`).
        record: Everything recorded about the version (tag names as keys); the entries that
            are tags (``VERSION_TAGS``) and empty values are left out.
    """
    rest = {k: v for k, v in record.items()
            if k not in keys.VERSION_TAGS and v not in (None, "")}
    reason = str(rest.pop(keys.PROMOTION_REASON, "") or "").rstrip(".")
    lines = [first_line]
    if reason:
        lines += ["", f"Promotion: {reason}."]
    if rest:
        lines += ["", "Also recorded (its training run has these as tags, params or metrics):",
                  *(f"- {k}: {v}" for k, v in rest.items())]
    return redact_text("\n".join(lines))
