"""Selection-free out-of-fold predictions: each fold predicted by the trial best on the others.

The best trial of a study is chosen on the very folds whose out-of-fold (OOF) predictions then
describe it, so its OOF error is optimistic (the winner's curse of model selection; Cawley &
Talbot 2010). Paired with a champion, that optimism made ``promotion.rule=significant`` promote
between equally good models far above its 2.5% (``tests/training/test_promotion_selection.py``).
Predicting the folds again with the chosen configuration on a fresh split of the users removes
only the part of the optimism that belongs to one split (the luck of the fold models), not the
part that belongs to the sessions (a configuration whose errors happen to be small on these
users stays so on any split), so it still promoted too often there.

Nested CV removes it: fold ``j`` is predicted by a configuration chosen without fold ``j``
(Varma & Simon 2006). Re-tuning inside every fold would cost ``n_splits`` studies; here the inner
choice reuses the trials themselves. Every completed trial keeps its OOF predictions (trial
attribute ``oof``, packed float32), so fold ``j`` takes the predictions of the trial with the best
score on the other folds (pooled MSE for ``cv_mse``, the size-weighted mean of the fold r for
``cv_pearson``): no extra fit at all. The paired comparison with the champion then redoes that
choice in every bootstrap resample (:mod:`pulse_ml.stats.selection_bootstrap`), since the
choices depend on the data too.

What remains: the other folds' models were trained with fold ``j``'s sessions, and the TPE
sampler and the median pruner saw every fold, so fold ``j``'s labels still reach the choice at
second hand. Trials of older studies (no ``oof`` attribute) are not candidates.

References:
    S. Varma, R. Simon. Bias in error estimation when using cross-validation for model
    selection. BMC Bioinformatics 7:91, 2006.
    G. C. Cawley, N. L. C. Talbot. On over-fitting in model selection and subsequent selection
    bias in performance evaluation. JMLR 11:2079-2107, 2010.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml import keys
from pulse_ml.errors import PulseError
from pulse_ml.stats.paired import PairedComparison
from pulse_ml.training.metrics import CVMetrics, cv_metrics
from pulse_ml.training.paired import PairedSettings

PREDICTIONS_ATTR = "oof"  # trial attribute: the trial's OOF predictions (pack_predictions)


def pack_predictions(pred: np.ndarray) -> str:
    """OOF predictions as a compact JSON-safe string (zlib-compressed float32, base64)."""
    import base64
    import zlib

    raw = np.ascontiguousarray(pred, dtype="<f4").tobytes()
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def unpack_predictions(packed: str | None, n: int) -> np.ndarray | None:
    """The predictions of :func:`pack_predictions`, or None when missing or not ``n`` long."""
    import base64
    import binascii
    import zlib

    if not isinstance(packed, str):
        return None
    try:
        out = np.frombuffer(zlib.decompress(base64.b64decode(packed)), dtype="<f4")
    except (binascii.Error, zlib.error, ValueError):
        return None
    return out.astype(float) if out.size == n else None


@dataclass(frozen=True)
class SelectionFree:
    """Selection-free out-of-fold predictions of a study (see the module docstring).

    Attributes:
        oof: session_id, fold, prediction, rating, trial (the trial that predicted the row).
        metrics: MSE, MAE, r and per-fold values of these predictions.
        fold_trials: Number of the trial chosen for each fold.
        trial_preds: Every candidate trial's OOF predictions, shape (candidates, sessions), for
            the bootstrap that chooses again (:mod:`pulse_ml.stats.selection_bootstrap`).
        trial_numbers: The candidates' trial numbers.
        folds: Fold per session.
        maximize: Chosen on Pearson r (``cv_pearson``) rather than the MSE.
        n_trials: Completed trials of the study (more than the candidates when older trials
            kept no predictions: the choice among the candidates is then incomplete).
    """

    oof: pd.DataFrame
    metrics: CVMetrics
    fold_trials: tuple[int, ...]
    trial_preds: np.ndarray
    trial_numbers: tuple[int, ...]
    folds: np.ndarray
    maximize: bool = False
    n_trials: int = 0

    @property
    def n_candidates(self) -> int:
        """Trials the folds were chosen among."""
        return len(self.trial_numbers)


def selection_free(labeled: pd.DataFrame, y: np.ndarray, folds: np.ndarray, trials: list,
                   best, ensemble_oof: pd.DataFrame, objective: str) -> SelectionFree:
    """Predict each fold with the trial that scored best on the other folds (no refit).

    Args:
        labeled: The labeled sessions (rows in the order of ``y`` and ``folds``).
        y: Their ratings.
        folds: Fold index per session (the study's folds, 0..k-1).
        trials: The study's completed trials; those without stored predictions for these
            sessions (older studies) are left out.
        best: The best trial (its fold models are the ensemble).
        ensemble_oof: The ensemble's out-of-fold table (the best trial's predictions, used when
            the best trial has none stored).
        objective: ``cv_mse`` or ``cv_pearson``.
    """
    from pulse_ml.stats.selection_bootstrap import held_out_choice

    y = np.asarray(y, float)
    preds, numbers = [], []
    for t in trials:
        p = (ensemble_oof["prediction"].to_numpy(float) if t.number == best.number else
             unpack_predictions(t.user_attrs.get(PREDICTIONS_ATTR), len(y)))
        if p is not None:
            preds.append(p)
            numbers.append(int(t.number))
    if best.number not in numbers:  # best trial not among the completed ones handed in
        preds, numbers = [ensemble_oof["prediction"].to_numpy(float)], [int(best.number)]
    P = np.vstack(preds)
    ids = np.arange(int(folds.max()) + 1)
    onehot = (folds[:, None] == ids).astype(float)
    sizes = onehot.sum(axis=0)
    maximize = objective == keys.CV_PEARSON
    if maximize:
        from pulse_ml.training.metrics import pearson

        scores = np.array([[pearson(y[folds == j], p[folds == j]) for j in ids] for p in P])
    else:
        scores = ((P - y) ** 2 @ onehot) / sizes
    choice = held_out_choice(scores, sizes, maximize=maximize)
    pred = P[choice[folds], np.arange(len(y))]
    trial_of = np.asarray(numbers)[choice]
    oof = pd.DataFrame({"session_id": labeled["session_id"].astype(str).to_numpy(),
                        "fold": folds.astype(int), "prediction": pred, "rating": y,
                        "trial": trial_of[folds]})
    return SelectionFree(oof=oof, metrics=cv_metrics(y, pred, folds),
                         fold_trials=tuple(int(v) for v in trial_of), trial_preds=P,
                         trial_numbers=tuple(numbers), folds=np.asarray(folds),
                         maximize=maximize, n_trials=len(trials))


def compare_selected(free: SelectionFree, ref: pd.DataFrame,
                     users: pd.Series | None = None,
                     settings: PairedSettings | None = None) -> PairedComparison:
    """Selection-free candidate minus a reference OOF table, the choice redone per resample.

    Args:
        free: The candidate's :class:`SelectionFree`.
        ref: The reference's OOF table (session_id, rating, prediction), e.g. the champion's
            selection-free table; it must hold every training session of the candidate.
        users: session_id -> user_id (resampling units); None = sessions.
        settings: Bootstrap settings (default :class:`PairedSettings`).

    Raises:
        PulseError: the reference misses sessions of the candidate or has other ratings (the
            two were not trained on the same data).
    """
    from pulse_ml.stats.selection_bootstrap import paired_bootstrap_selected

    settings = settings or PairedSettings()
    ids = free.oof["session_id"].astype(str)
    table = ref.assign(session_id=ref["session_id"].astype(str)).drop_duplicates("session_id")
    aligned = table.set_index("session_id").reindex(ids)
    if aligned["prediction"].isna().any():
        raise PulseError("the champion's out-of-fold table misses training sessions of the new "
                         "model: a paired comparison needs models trained on the same data.")
    if not np.allclose(aligned["rating"].to_numpy(float), free.oof["rating"].to_numpy(float)):
        raise PulseError("the two models' training sessions have different ratings: they were "
                         "not trained on the same data, so their errors cannot be paired.")
    groups = ids.to_numpy() if users is None else ids.map(users).fillna(ids).to_numpy()
    comparison, _ = paired_bootstrap_selected(
        free.oof["rating"].to_numpy(float), free.trial_preds, free.folds,
        aligned["prediction"].to_numpy(float), groups, maximize=free.maximize,
        n_boot=settings.n_boot, alpha=settings.alpha, seed=settings.seed)
    return comparison
