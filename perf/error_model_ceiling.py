"""How much can asking by an error model save on real data? Error-model variants vs the oracle.

Run: nice -n 10 /work/venv/bin/python perf/error_model_ceiling.py --data uss [--budget 0.1]

The data set is split by user as in ``perf/active_replay.py`` (same ``--train-share``,
``--split-seed``); a model is trained and registered on the training users. On the replay
users (every session rated; their ratings never reach any model) the *expected* share of labels
saved at equal width vs uniform asking at ``--budget`` is computed from the realized
centred PPI++ residuals ``t = (y - lam f - m)^2`` (``lam``, ``m`` from the training users'
out-of-fold predictions: the Hajek-centred label term of the weighted PPI++ variance):
``saved = 1 - sum t (1/pi - 1) / sum t (1/b - 1)`` with ``pi ~ sqrt(predicted t)`` scaled to
the budget and clipped at ``share * b`` for several floors ``share``. Variants of the predicted
``t`` (all fitted on the training users only):

* ``registered``: the version's error model (target ``(y - f)^2``, its boosting candidate).
* ``centred``: the same boosting candidates on the centred target ``t``.
* ``f_only``: boosting on the prediction alone (the spread of star ratings by predicted level).
* ``ordinal``: a proportional-odds model of the rounded rating on the features and ``f``; its
  class probabilities give ``E[t | x] = sum_k p_k (c_k - lam f - m)^2`` directly.
* ``text_ridge`` (feature sets with text): ridge on TF-IDF of the text and ``f``.
* ``in_sample_x``: boosting fitted on the replay sessions' own ``t`` and judged on them
  (overfits: an optimistic bound for any error model on these features).
* ``oracle``: ``pi ~ sqrt(t)`` from the replay sessions' TRUE residuals (unattainable: the
  ceiling the data allow for any error model).

No estimator is run here (``perf/active_replay.py`` does that): the formula ignores the
weights' own cost at small n, so these are upper bounds of what the replay can show.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from active_replay import split_and_train  # noqa: E402


def _saved(t: np.ndarray, pred: np.ndarray, budget: float, share: float) -> float:
    from pulse_ml.stats.active_design import honest_width_ratio, labels_saved

    return labels_saved(honest_width_ratio(np.maximum(pred, 1e-12), t, budget, share))


def _ordinal_t(x_tr, y_tr, x_te, f_te, lam, m):
    """E[(y - lam f - m)^2 | x] from a proportional-odds model's class probabilities."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from pulse_ml.models.ordinal import OrdinalLogitRegressor

    classes = np.round(y_tr)
    model = make_pipeline(StandardScaler(), OrdinalLogitRegressor(C=1.0)).fit(x_tr, classes)
    p = model[-1].predict_class_proba(model[0].transform(x_te))
    c = model[-1].classes_
    return (p * (c[None, :] - (lam * f_te + m)[:, None]) ** 2).sum(axis=1)


def _text_t(tr, rest, texts, f_tr, f_te, t_tr):
    """E[t | text, f]: ridge on TF-IDF of the text columns and the prediction (alpha by CV)."""
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import RidgeCV

    mats_tr, mats_te = [], []
    for col in texts:
        vec = TfidfVectorizer(min_df=3, ngram_range=(1, 2), sublinear_tf=True, max_features=20000)
        mats_tr.append(vec.fit_transform(tr[col].fillna("").astype(str)))
        mats_te.append(vec.transform(rest[col].fillna("").astype(str)))
    x_tr = sparse.hstack([*mats_tr, sparse.csr_matrix(np.column_stack([f_tr, f_tr**2]))]).tocsr()
    x_te = sparse.hstack([*mats_te, sparse.csr_matrix(np.column_stack([f_te, f_te**2]))]).tocsr()
    model = RidgeCV(alphas=np.logspace(-1, 3, 9)).fit(x_tr, t_tr)
    return model.predict(x_te)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", choices=("uss", "convai2", "demo"), default="uss")
    p.add_argument("--budget", type=float, default=0.1)
    p.add_argument("--train-share", type=float, default=0.4)
    p.add_argument("--split-seed", type=int, default=0)
    p.add_argument("--model", default="hist_gb")
    args = p.parse_args(argv)
    from pulse_ml.models.error_model import CANDIDATES, _regressor, design, ppi_shift

    table, in_train, ens = split_and_train(args, "err_ceiling_")
    err = ens.error_model
    tr = table[in_train].reset_index(drop=True)
    oof = ens.oof.set_index("session_id").loc[tr["session_id"].astype(str), "prediction"]
    f_tr, y_tr = oof.to_numpy(float), tr["rating"].to_numpy(float)
    rest = table[~in_train].reset_index(drop=True)
    f, y = np.asarray(ens.predict(rest), float), rest["rating"].to_numpy(float)
    b = args.budget
    lam, m = ppi_shift(y_tr, f_tr, b)  # the library's PPI++ lambda at budget b, and shift
    slope = np.cov(y_tr, f_tr, ddof=0)[0, 1] / f_tr.var()  # shown only
    t_tr, t = (y_tr - lam * f_tr - m) ** 2, (y - lam * f - m) ** 2
    print(f"{args.data}: {len(tr)} train / {len(rest)} replay sessions; ratings "
          f"{np.unique(np.round(y)).tolist()}; replay r(f, y) = {np.corrcoef(f, y)[0, 1]:.3f}; "
          f"OOF slope {slope:.2f}, lam {lam:.2f}; registered error model {err.choice} "
          f"(fallback: {err.fallback or '-'})")
    x_tr = design(tr, err.columns, err.categories, f_tr)
    x_te = design(rest, err.columns, err.categories, f)
    is_cat = np.array([c in err.categories for c in err.columns] + [False])
    preds = {"registered": err.predict(rest, f, candidate=True)}
    for name, spec in CANDIDATES.items():
        if spec is not None:
            preds[f"centred_{name}"] = _regressor(spec, t_tr.size, is_cat).fit(
                x_tr, t_tr).predict(x_te)
            preds[f"f_only_{name}"] = _regressor(spec, t_tr.size, np.array([False])).fit(
                f_tr[:, None], t_tr).predict(f[:, None])
    num = [c for c in err.columns if c not in err.categories]
    onehot = pd.get_dummies(pd.concat([tr[list(err.categories)], rest[list(err.categories)]])
                            .astype(str), dtype=float).to_numpy()
    lin = np.column_stack([pd.concat([tr[num], rest[num]]).to_numpy(float), onehot,
                           np.concatenate([f_tr, f])])
    preds["ordinal"] = _ordinal_t(lin[:len(tr)], y_tr, lin[len(tr):], f, lam, m)
    texts = ens.features.of_kind("text")
    if texts:
        preds["text_ridge"] = _text_t(tr, rest, texts, f_tr, f, t_tr)
    # optimistic: fitted on the replay sessions' own residuals and judged on them (overfits);
    # what any error model on these features could at most find
    preds["in_sample_x"] = _regressor(CANDIDATES["boosting_light"], t.size, is_cat).fit(
        x_te, t).predict(x_te)
    preds["oracle"] = t
    rows = []
    for name, pred in preds.items():
        floor = 0.05 * float(np.mean(t_tr))
        row = {"variant": name,
               "corr(pred, t)": float(np.corrcoef(pred, t)[0, 1]) if np.ptp(pred) else 0.0}
        for share in (0.1, 0.25, 0.5):
            row[f"saved% share={share}"] = round(
                100 * _saved(t, np.maximum(pred, floor if name != "oracle" else 0), b, share), 1)
        rows.append(row)
    with pd.option_context("display.width", 140, "display.max_columns", None):
        print(pd.DataFrame(rows).round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
