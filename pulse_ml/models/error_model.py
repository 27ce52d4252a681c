"""The error model: expected squared error of the champion's prediction given the features.

``pulse-ml request`` asks a session with probability proportional to the square root of the
predicted squared error (active statistical inference). The error that matters is the one in
the weighted PPI++ variance: the label term ``Var0(w (y - lam f))`` is Hajek-centred, so the
optimal ``pi`` is proportional to ``sqrt(E[(y - lam f - m)^2 | x])`` with ``m = E[y - lam f]``,
not to the plain squared error (they differ when ``lam`` is well below 1: a weak predictor).
``lam`` is PPI++'s power-tuned value at :data:`REFERENCE_BUDGET` (``Cov(y, f) / Var(f)`` times
``1 - budget``, clipped to [0, 1]) and ``m`` the matching mean, both from the out-of-fold
predictions (:func:`centred_targets`). The model is learned at train time from the ensemble's
honest out-of-fold residuals, inside the same CV folds: the
error model of fold k is fitted on the other folds' residuals only (and ``lam``, ``m`` from the
other folds too) and predicts fold k, so its
out-of-fold predictions (:attr:`ErrorModel.oof`, used by ``plan``) never saw the residual they
predict. The final model (fitted on every residual) predicts new sessions. Light tuning: a
constant (uniform asking) and two regularized gradient-boosting models (scikit-learn's
HistGradientBoostingRegressor on the numeric, count, flag and categorical features plus the
prediction itself) compete on out-of-fold squared error; the constant wins when the error size
does not vary visibly, so asking falls back to uniform. A boosting winner is kept only when its
honest expected label saving at :data:`REFERENCE_BUDGET` clears the gate of
:func:`pulse_ml.stats.active_gate.active_gate` (>= 10% and a bootstrap lower bound over users
> 0); otherwise the version falls back to the constant too (``fallback`` says why), and
``request`` asks uniformly.

References:
    T. Zrnic, E. J. Candès. Active statistical inference. ICML 2024 (pi ~ sqrt(E[e^2 | x])).
    A. N. Angelopoulos et al. Cost-optimal active AI model evaluation. 2025.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from pulse_ml.sessions.feature_sets import FeatureSet

__all__ = ["ErrorModel", "fit_error_model", "oof_predictions", "centred_targets", "ppi_shift",
           "CANDIDATES", "REFERENCE_BUDGET"]

# name -> HistGradientBoostingRegressor settings (None: the constant mean squared error)
CANDIDATES: dict[str, dict | None] = {
    "constant": None,
    "boosting_strong": {"max_depth": 2, "max_iter": 60, "learning_rate": 0.05,
                        "leaf_share": 0.05, "l2_regularization": 10.0},
    "boosting_light": {"max_depth": 3, "max_iter": 120, "learning_rate": 0.05,
                       "leaf_share": 0.02, "l2_regularization": 1.0},
}
FLOOR_SHARE = 0.05  # predictions at least 5% of the mean squared error (no weight blows up)
REFERENCE_BUDGET = 0.1  # the train-time gate's budget (request's default; gains shrink above)


@dataclass
class ErrorModel:
    """Predicted squared error of a prediction, given the session's features and prediction.

    Attributes:
        choice: The winning candidate of :data:`CANDIDATES`.
        columns: Feature columns used (text columns enter through the prediction only).
        categories: Per categorical column, its training categories (codes as in training).
        mean_sq: Mean of the target ``(y - lam f - m)^2`` over the training sessions.
        model: The fitted regressor (None for ``constant``).
        oof: Honest out-of-fold predicted squared error per training session (training order).
        cv_mse: Out-of-fold MSE of each candidate (lower is better).
        resid2: The honest targets ``(y - lam f - m)^2`` (training order; each fold's ``lam``,
            ``m`` from the other folds), for the gate.
        users: User code per training session (the gate's bootstrap unit).
        fallback: Why a boosting winner was replaced by the constant at train time ("" if not);
            its fitted model stays in ``model`` and its out-of-fold predictions in
            ``candidate_oof``, so ``request`` can re-judge it at another budget.
        candidate_oof: Out-of-fold predictions of the best boosting model when it won on MSE.
        lam: PPI++ lambda of the target (:func:`ppi_shift`, every training session).
        shift: The target's ``m = mean(y - lam f)``.
    """

    choice: str
    columns: list[str]
    categories: dict[str, list[str]]
    mean_sq: float
    model: object | None = None
    oof: np.ndarray = field(default_factory=lambda: np.zeros(0))
    cv_mse: dict[str, float] = field(default_factory=dict)
    resid2: np.ndarray = field(default_factory=lambda: np.zeros(0))
    users: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    fallback: str = ""
    candidate_oof: np.ndarray = field(default_factory=lambda: np.zeros(0))
    lam: float = 1.0    # the target's lambda (:func:`ppi_shift`); 1, 0: plain (y - f)^2
    shift: float = 0.0  # the target's m

    @property
    def gain_pct(self) -> float:
        """Out-of-fold MSE of the chosen model below the constant's, in % (0 for constant)."""
        base = self.cv_mse.get("constant", float("nan"))
        return 100.0 * (1.0 - self.cv_mse.get(self.choice, base) / base) if base > 0 else 0.0

    def predict(self, frame: pd.DataFrame, prediction: np.ndarray,
                candidate: bool = False) -> np.ndarray:
        """Expected squared error for every row (``prediction``: the champion's, same rows).

        ``candidate=True``: the boosting model even when the train-time gate fell back to the
        constant (``request`` re-judges it at its own budget, or ``request.asking=active``).
        """
        floor = FLOOR_SHARE * self.mean_sq
        if self.model is None or (self.choice == "constant" and not candidate):
            return np.full(len(frame), self.mean_sq)
        from threadpoolctl import threadpool_limits

        x = np.ascontiguousarray(design(frame, self.columns, self.categories, prediction))
        # each distinct row once (sessions repeat their discrete features and prediction)
        keys = x.view(np.dtype((np.void, x.dtype.itemsize * x.shape[1]))).ravel()
        codes = pd.factorize(keys)[0]
        _, first = np.unique(codes, return_index=True)
        # one thread: the trees are tiny (depth <= 3), and OpenMP threads on busy cores cost
        # more than they save (36k rows: 0.15 s on one thread, 1.4 s on two at load 3)
        with threadpool_limits(limits=1, user_api="openmp"):
            return np.maximum(self.model.predict(x[first]), floor)[codes]


def _columns(features: FeatureSet) -> list[str]:
    return features.of_kind("categorical", "count", "flag", "numeric")


def design(frame: pd.DataFrame, columns: list[str], categories: dict[str, list[str]],
           prediction: np.ndarray) -> np.ndarray:
    """The error model's matrix: numeric columns, categorical codes (-1 unseen), prediction."""
    cols = []
    for col in columns:
        if col in categories:
            codes = pd.Categorical(frame[col].astype(str), categories=categories[col]).codes
            cols.append(np.where(codes < 0, np.nan, codes).astype(float))
        else:
            cols.append(frame[col].to_numpy(dtype=float))
    cols.append(np.asarray(prediction, dtype=float))
    return np.column_stack(cols)


def _regressor(spec: dict, n: int, is_cat: np.ndarray):
    from sklearn.ensemble import HistGradientBoostingRegressor

    leaf = max(20, int(spec["leaf_share"] * n))
    return HistGradientBoostingRegressor(
        max_depth=spec["max_depth"], max_iter=spec["max_iter"],
        learning_rate=spec["learning_rate"], min_samples_leaf=leaf,
        l2_regularization=spec["l2_regularization"], early_stopping=False,
        categorical_features=is_cat if is_cat.any() else None, random_state=0)


def oof_predictions(x: np.ndarray, e2: np.ndarray, folds: np.ndarray, spec: dict | None,
                    is_cat: np.ndarray) -> np.ndarray:
    """One candidate's out-of-fold predicted squared errors: fold k from the other folds only.

    ``e2``: the targets, shape (n,), or (K, n) with row i the targets under the constants of
    the i-th fold of ``np.unique(folds)`` (:func:`centred_targets`). The floor is the other
    folds' mean too, so nothing of fold k's residuals reaches fold k.
    """
    e2 = np.asarray(e2, float)
    out = np.empty(e2.shape[-1])
    for i, k in enumerate(np.unique(folds)):
        test = folds == k
        target = e2[i] if e2.ndim == 2 else e2
        if spec is None:
            out[test] = target[~test].mean()
        else:
            model = _regressor(spec, int((~test).sum()), is_cat).fit(x[~test], target[~test])
            out[test] = np.maximum(model.predict(x[test]), FLOOR_SHARE * target[~test].mean())
    return out


def ppi_shift(y: np.ndarray, f: np.ndarray, budget: float = REFERENCE_BUDGET
              ) -> tuple[float, float]:
    """``(lam, m)``: PPI++'s power-tuned lambda at ``budget`` and ``m = mean(y - lam f)``.

    At a share ``b`` of the sessions rated, ``n / N = b / (1 - b)`` and the tuned lambda
    ``Cov(y, f) / ((1 + n/N) Var(f))`` is ``(1 - b) Cov(y, f) / Var(f)``, clipped to [0, 1].
    """
    y, f = np.asarray(y, float), np.asarray(f, float)
    var = float(f.var())
    lam = 0.0 if var <= 0 else float(np.clip((1 - budget) * np.cov(y, f, ddof=0)[0, 1] / var,
                                             0.0, 1.0))
    return lam, float(y.mean() - lam * f.mean())


def centred_targets(y: np.ndarray, oof: np.ndarray, folds: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per fold, the centred squared residuals ``(y - lam f - m)^2`` with that fold's constants.

    Returns:
        ``(per_fold, honest)``: ``per_fold[i]`` uses ``lam, m`` from every fold but the i-th of
        ``np.unique(folds)`` (what that fold's error model trains on), and ``honest`` takes, for
        each session, the row of its own fold (a target no constant of its fold shaped).
    """
    ks = np.unique(folds)
    per_fold = np.empty((ks.size, np.asarray(y).size))
    honest = np.empty(per_fold.shape[1])
    for i, k in enumerate(ks):
        lam, m = ppi_shift(y[folds != k], oof[folds != k])
        per_fold[i] = (y - lam * oof - m) ** 2
        honest[folds == k] = per_fold[i][folds == k]
    return per_fold, honest


def fit_error_model(frame: pd.DataFrame, y: np.ndarray, oof: np.ndarray, folds: np.ndarray,
                    features: FeatureSet, users: np.ndarray | None = None) -> ErrorModel:
    """Learn the expected squared error from honest residuals, inside the CV folds.

    Args:
        frame: The labeled training sessions (session table rows).
        y: Their ratings.
        oof: Their out-of-fold predictions.
        folds: Fold index per row (the ensemble's folds).
        features: The model's feature set.
        users: User id per row (the gate's bootstrap unit); None: ``frame['user_id']`` if
            present, else each session its own user.

    Returns:
        The fitted error model; its ``oof`` never used a session's own fold's residuals (the
        choice among the few candidates compares their out-of-fold errors over all folds, as
        the model's own tuning does).
    """
    y, oof = np.asarray(y, float), np.asarray(oof, float)
    per_fold, e2 = centred_targets(y, oof, folds)  # e2: the honest realized targets
    lam, shift = ppi_shift(y, oof)
    columns = _columns(features)
    cats = {c: sorted(frame[c].astype(str).unique().tolist())
            for c in features.of_kind("categorical")}
    x = design(frame, columns, cats, oof)
    is_cat = np.array([c in cats for c in columns] + [False])
    preds = {name: oof_predictions(x, per_fold, folds, spec, is_cat)
             for name, spec in CANDIDATES.items()}
    cv_mse = {name: float(np.mean((p - e2) ** 2)) for name, p in preds.items()}
    choice = best = min(cv_mse, key=lambda k: (cv_mse[k], k != "constant"))
    if users is None:
        users = (frame["user_id"].astype(str).to_numpy() if "user_id" in frame
                 else np.arange(e2.size))
    user_codes = pd.factorize(pd.Series(users).astype(str))[0].astype(np.int64)
    fallback = ""
    if choice != "constant":
        from pulse_ml.stats.active_gate import active_gate

        gate = active_gate(preds[choice], e2, user_codes, REFERENCE_BUDGET)
        if not gate.active:
            fallback = f"'{choice}' ({gate.reason})"
            choice = "constant"
    spec = CANDIDATES[best]
    target = (y - lam * oof - shift) ** 2  # the final model: constants from every fold
    model = None if spec is None else _regressor(spec, e2.size, is_cat).fit(x, target)
    return ErrorModel(choice=choice, columns=columns, categories=cats,
                      mean_sq=float(target.mean()), model=model, oof=preds[choice],
                      cv_mse=cv_mse, resid2=e2, users=user_codes, fallback=fallback,
                      candidate_oof=preds[best], lam=lam, shift=shift)
