"""The paired comparison with the champion on selection-free out-of-fold predictions.

The new model's side is always its selection-free table (``training/nested.py``: each fold
predicted by the trial best on the other folds), the choice redone in every bootstrap resample.
The champion's side is its run's selection-free table too, so both were judged without the
folds that chose them; a champion trained before that table existed gives its best trial's
out-of-fold table, which is optimistic for the champion: the comparison then leans towards
keeping it (the reason says so).
"""

from __future__ import annotations

import tempfile
from dataclasses import replace

import pandas as pd

from pulse_ml import keys
from pulse_ml.registry.models import client
from pulse_ml.stats.paired import PairedComparison
from pulse_ml.training.nested import SelectionFree
from pulse_ml.training.paired import PairedSettings, with_users

OPTIMISTIC_CHAMPION = ("note: the champion's out-of-fold predictions come from the folds that "
                       "chose its best trial (trained before selection-free evaluation), which "
                       "favours the champion")


def _artifact(run_id: str, name: str) -> pd.DataFrame | None:
    from mlflow.exceptions import MlflowException

    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = client().download_artifacts(run_id, name, tmp)
            return pd.read_csv(path, dtype={"session_id": str, "user_id": str})
    except (MlflowException, OSError):
        return None


def champion_oof(run_id: str) -> tuple[pd.DataFrame | None, str]:
    """The champion run's selection-free OOF table, else its best trial's; and which one."""
    table = _artifact(run_id, keys.SELECTION_FREE_OOF)
    if table is not None:
        return table, keys.EVAL_SELECTION_FREE
    return _artifact(run_id, keys.OOF_ARTIFACT), keys.EVAL_BEST_TRIAL


def log_selection_free(free: SelectionFree | None, labeled: pd.DataFrame) -> None:
    """Log the selection-free table (with user ids), its metrics and choices on the active run."""
    import mlflow

    if free is None:
        return

    from pulse_ml.registry.runs import log_metrics

    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/{keys.SELECTION_FREE_OOF}"
        with_users(free.oof, labeled).to_csv(path, index=False)
        mlflow.log_artifact(path)
    log_metrics({**{keys.SELECTION_FREE_PREFIX + k: v for k, v in free.metrics.as_dict().items()},
                 keys.SELECTION_FREE_CANDIDATES: free.n_candidates})
    mlflow.set_tag(keys.SELECTION_FREE_TRIALS, ",".join(map(str, free.fold_trials)))


def paired_with_champion(free: SelectionFree | None, labeled: pd.DataFrame, fingerprint: str,
                         label_fingerprint: str, champion, settings: PairedSettings,
                         group_by: str) -> tuple[PairedComparison | None, str | None]:
    """The paired comparison new vs champion, and ``<new> vs <champion>`` evaluation label.

    None when there is no champion, it was trained on other sessions or other folds, or its
    out-of-fold table is missing.
    """
    from pulse_ml.training.nested import compare_selected

    if free is None or champion is None or not champion.run_id or not champion.comparable(
            fingerprint, label_fingerprint):
        return None, None
    if champion.same_folds(group_by) is False:  # leaky folds on one side: no pairing
        return None, None
    ref, kind = champion_oof(champion.run_id)
    if ref is None:
        return None, None
    users = pd.Series(labeled["user_id"].astype(str).to_numpy(),
                      index=labeled["session_id"].astype(str))
    new = keys.EVAL_SELECTION_FREE
    if free.n_candidates < free.n_trials:  # older trials of a resumed study kept no predictions
        new += f" ({free.n_candidates} of {free.n_trials} trials)"
    return compare_selected(free, ref, users, settings), f"{new} vs {kind}"


def with_evaluation_note(decision, evaluation: str | None):
    """The decision, its reason noting :data:`OPTIMISTIC_CHAMPION` when that is the case."""
    if evaluation and evaluation.endswith(keys.EVAL_BEST_TRIAL) and decision.paired is not None:
        return replace(decision, reason=f"{decision.reason} ({OPTIMISTIC_CHAMPION})")
    return decision
