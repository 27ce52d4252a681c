"""Ordinal (proportional-odds) logistic regression as a scikit-learn regressor.

The paper's "ordinal logistic regressor" (Appendix A.2) predicts the *expected* star rating of a
session from a cumulative-link logit model fitted on the rounded ratings.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, validate_data

# Bounds on the log-gaps between consecutive thresholds: gaps stay in [e^-20, e^20], which keeps
# exp/expm1 finite while leaving far more room than any rating scale needs.
_LOG_GAP_BOUNDS = (-20.0, 20.0)
# expm1 argument cap: 1/expm1(700) ~ 1e-304, i.e. zero for our purposes, without overflow.
_EXPM1_CAP = 700.0


def _params_to_thresholds(t1: float, log_gaps: NDArray[np.float64]) -> NDArray[np.float64]:
    """Ordered thresholds θ_1 < θ_2 < … from θ_1 and the log-gaps log(θ_k − θ_{k−1})."""
    return np.concatenate(([t1], t1 + np.cumsum(np.exp(log_gaps))))


def _cumulative_logit_nll_grad(
    params: NDArray[np.float64],
    X: NDArray[np.float64],
    k: NDArray[np.intp],
    w: NDArray[np.float64],
    penalty: float,
) -> tuple[float, NDArray[np.float64]]:
    """Weighted mean negative log-likelihood plus L2 penalty, and its gradient.

    Args:
        params: ``[β (p), θ_1, log-gaps (K−2)]``.
        X: Design matrix, shape (n, p).
        k: Class index of each sample in ``0..K−1``, shape (n,).
        w: Sample weights normalised to sum to 1, shape (n,).
        penalty: Coefficient λ of ``λ/2 · ‖β‖²``.

    Returns:
        The objective value and its gradient with respect to ``params``.

    Notes:
        With a = θ_k − xᵀβ and b = θ_{k−1} − xᵀβ (θ_0 = −∞, θ_K = +∞),
        P(Y = k) = σ(a) − σ(b) = σ(a)·σ(−b)·(1 − e^{−(a−b)}), so
        log P = log σ(a) + log σ(−b) + log(−expm1(−gap)) with gap = a − b taken straight from the
        parameters (never as a difference of two large numbers). Derivatives:
        ∂logP/∂a = σ(−a) + 1/expm1(gap), ∂logP/∂b = −σ(b) − 1/expm1(gap).

    """
    n, p = X.shape
    beta = params[:p]
    t1 = params[p]
    log_gaps = params[p + 1 :]
    gaps = np.exp(log_gaps)
    theta = _params_to_thresholds(t1, log_gaps)
    n_thr = theta.shape[0]  # K − 1

    eta = X @ beta
    theta_ext = np.concatenate(([-np.inf], theta, [np.inf]))
    gap_ext = np.concatenate(([np.inf], gaps, [np.inf]))  # gap of class k (infinite at the ends)
    a = theta_ext[k + 1] - eta
    b = theta_ext[k] - eta
    gap = gap_ext[k]

    logp = log_expit(a) + log_expit(-b) + np.log(-np.expm1(-gap))
    inv_expm1 = 1.0 / np.expm1(np.minimum(gap, _EXPM1_CAP))
    dlogp_da = expit(-a) + inv_expm1
    dlogp_db = -expit(b) - inv_expm1

    loss = -np.dot(w, logp) + 0.5 * penalty * np.dot(beta, beta)

    # d(−w·logP)/dη = w·(∂logP/∂a + ∂logP/∂b) since a and b both move with −η.
    grad_beta = X.T @ (w * (dlogp_da + dlogp_db)) + penalty * beta
    # θ_j appears as `a` for class j−1 and as `b` for class j (0-based class index, 0-based j).
    grad_theta = -(
        np.bincount(k, weights=w * dlogp_da, minlength=n_thr + 1)[:n_thr]
        + np.bincount(k, weights=w * dlogp_db, minlength=n_thr + 1)[1:]
    )
    grad_t1 = grad_theta.sum()
    # θ_j = θ_1 + Σ_{m≤j} e^{u_m}: ∂/∂u_m = e^{u_m} · Σ_{j≥m} ∂/∂θ_j.
    grad_log_gaps = gaps * np.cumsum(grad_theta[::-1])[::-1][1:]
    grad = np.concatenate((grad_beta, [grad_t1], grad_log_gaps))
    return float(loss), grad


class OrdinalLogitRegressor(RegressorMixin, BaseEstimator):
    """Proportional-odds logistic regression that predicts the expected rating.

    Targets are rounded to integer classes (``np.rint``); the classes are the distinct rounded
    values seen in ``fit``. The model is ``P(Y ≤ c_k | x) = σ(θ_k − xᵀβ)`` with ordered thresholds
    θ_1 < … < θ_{K−1} and no separate intercept. The fitted loss mirrors scikit-learn's
    ``LogisticRegression``: ``C · Σ_i s_i·nll_i + ½‖β‖²`` where ``s_i`` is the sample weight times
    the class weight; it is minimised by L-BFGS-B with an analytic gradient (internally divided by
    ``C · Σ s_i``, which leaves the minimiser unchanged and makes ``tol`` independent of
    ``n_samples`` and ``C``).

    Args:
        C: Inverse L2 regularisation strength on β (larger C, less shrinkage).
        class_weight: ``None``, ``"balanced"`` (weight ``n_samples / (n_classes · count_k)``) or a
            dict ``{rating: weight}``; ratings absent from the dict (or from a CV fold) get
            weight 1, dict keys that are not classes of the training data are ignored.
        max_iter: Maximum number of L-BFGS-B iterations.
        tol: Stop when the largest projected-gradient component of the normalised objective
            falls below ``tol`` (L-BFGS-B ``gtol``, as in ``LogisticRegression(solver="lbfgs")``).

    Attributes:
        classes_: Sorted distinct rounded targets, shape (K,).
        coef_: β, shape (n_features,).
        thresholds_: θ, shape (K − 1,), strictly increasing.
        n_features_in_: Number of features seen in ``fit``.
        n_iter_: Number of optimiser iterations (0 if a single class was seen).

    Notes:
        The paper (Appendix A.2) uses ``OrdinalLogitRegressor(C=2.0, class_weight='balanced')``
        after a ``StandardScaler`` and reports the expected rating as the prediction.

    """

    def __init__(
        self,
        C: float = 1.0,
        class_weight: str | dict[Any, float] | None = None,
        max_iter: int = 1000,
        tol: float = 1e-6,
    ) -> None:
        self.C = C
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.tol = tol

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # only X @ β and Xᵀ v are needed: CSR/CSC work as is
        return tags

    def _check_params(self) -> None:
        if not isinstance(self.C, numbers.Real) or not np.isfinite(self.C) or self.C <= 0:
            raise ValueError(f"C must be a positive finite number, got {self.C!r}.")
        if not isinstance(self.max_iter, numbers.Integral) or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer, got {self.max_iter!r}.")
        if not isinstance(self.tol, numbers.Real) or not self.tol > 0:
            raise ValueError(f"tol must be a positive number, got {self.tol!r}.")
        cw = self.class_weight
        if not (cw is None or cw == "balanced" or isinstance(cw, dict)):
            raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {cw!r}.")

    def _class_weights(self, counts: NDArray[np.intp]) -> NDArray[np.float64]:
        """Weight per class (aligned with ``classes_``)."""
        n_classes = counts.shape[0]
        if self.class_weight is None:
            return np.ones(n_classes)
        if isinstance(self.class_weight, str):  # "balanced"
            return counts.sum() / (n_classes * counts.astype(np.float64))
        weights = np.ones(n_classes)
        for key, value in self.class_weight.items():
            idx = np.flatnonzero(self.classes_ == float(key))
            if idx.size:
                if not np.isfinite(value) or value < 0:
                    raise ValueError(
                        f"class_weight[{key!r}] must be a non-negative number, got {value!r}."
                    )
                weights[idx] = float(value)
        return weights

    @staticmethod
    def _check_sample_weight(sample_weight: ArrayLike | None, n: int) -> NDArray[np.float64]:
        if sample_weight is None:
            return np.ones(n)
        sw = np.asarray(sample_weight, dtype=np.float64)
        if sw.ndim == 0:
            return np.full(n, float(sw))
        if sw.shape != (n,):
            raise ValueError(
                f"sample_weight.shape == {sw.shape}, expected {(n,)} (one weight per sample)."
            )
        if not np.all(np.isfinite(sw)) or np.any(sw < 0):
            raise ValueError("sample_weight must be finite and non-negative.")
        return sw

    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> OrdinalLogitRegressor:
        """Fit the proportional-odds model.

        Args:
            X: Features, shape (n_samples, n_features).
            y: Ratings, shape (n_samples,); rounded to the nearest integer.
            sample_weight: Optional non-negative weights, shape (n_samples,).

        Returns:
            The fitted estimator.

        Raises:
            ValueError: On invalid parameters, inputs or weights (e.g. all weights zero).

        """
        self._check_params()
        X, y = validate_data(
            self, X, y, accept_sparse=("csr", "csc"), y_numeric=True, dtype=np.float64, reset=True
        )
        n, p = X.shape
        sw = self._check_sample_weight(sample_weight, n)

        y_round = np.rint(y)
        self.classes_, k, counts = np.unique(y_round, return_inverse=True, return_counts=True)
        w = sw * self._class_weights(counts)[k]
        total = w.sum()
        if not total > 0:
            raise ValueError(
                "Sample weights (times class weights) are all zero: at least one sample needs "
                "a positive weight."
            )
        n_classes = self.classes_.shape[0]

        if n_classes == 1:
            self.coef_ = np.zeros(p)
            self.thresholds_ = np.zeros(0)
            self.n_iter_ = 0
            return self

        w_norm = w / total
        # Start at β = 0 with thresholds at the logits of the weighted cumulative class shares.
        share = np.bincount(k, weights=w_norm, minlength=n_classes)
        cum = np.clip(np.cumsum(share)[:-1], 1e-6, 1 - 1e-6)
        theta0 = np.maximum.accumulate(np.log(cum) - np.log1p(-cum))
        gaps0 = np.clip(np.diff(theta0), np.exp(_LOG_GAP_BOUNDS[0] + 1), None)
        x0 = np.concatenate((np.zeros(p), theta0[:1], np.log(gaps0)))
        bounds = [(None, None)] * (p + 1) + [_LOG_GAP_BOUNDS] * (n_classes - 2)

        result = minimize(
            _cumulative_logit_nll_grad,
            x0,
            args=(X, k, w_norm, 1.0 / (self.C * total)),
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            # Same stopping rule as sklearn's LogisticRegression(solver="lbfgs"): `tol` bounds the
            # projected gradient; the relative-decrease test is kept near machine precision.
            options={
                "maxiter": self.max_iter,
                "gtol": self.tol,
                "ftol": 64 * np.finfo(np.float64).eps,
                "maxls": 50,
            },
        )
        self.n_iter_ = int(result.nit)
        if self.n_iter_ >= self.max_iter:
            warnings.warn(
                f"OrdinalLogitRegressor did not converge in max_iter={self.max_iter} iterations "
                f"({result.message}); increase max_iter or scale the features.",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.coef_ = result.x[:p].copy()
        self.thresholds_ = _params_to_thresholds(result.x[p], result.x[p + 1 :])
        return self

    def predict_class_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Class probabilities P(Y = c_k | x), columns aligned with ``classes_``.

        Deliberately not named ``predict_proba``: scikit-learn treats that method as the mark of
        a classifier (``check_regressors_no_decision_function``), and this is a regressor.

        Args:
            X: Features, shape (n_samples, n_features).

        Returns:
            Probabilities, shape (n_samples, n_classes); rows sum to 1.

        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=("csr", "csc"), dtype=np.float64, reset=False)
        n = X.shape[0]
        if self.classes_.shape[0] == 1:
            return np.ones((n, 1))
        cdf = expit(self.thresholds_[None, :] - (X @ self.coef_)[:, None])
        ones = np.ones((n, 1))
        proba = np.diff(np.hstack((0.0 * ones, cdf, ones)), axis=1)
        np.clip(proba, 0.0, None, out=proba)
        return proba / proba.sum(axis=1, keepdims=True)

    def predict(self, X: ArrayLike) -> NDArray[np.float64]:
        """Predict the expected rating Σ_k c_k · P(Y = c_k | x).

        Args:
            X: Features, shape (n_samples, n_features).

        Returns:
            Predicted ratings in [min(classes_), max(classes_)], shape (n_samples,).

        """
        proba = self.predict_class_proba(X)
        pred = proba @ self.classes_
        return np.clip(pred, self.classes_[0], self.classes_[-1])
