"""``monitor`` of case studies asked to rate by ``request_prob``: predictable weights per look.

A case study whose ``request_prob`` varies within an arm is monitored with the active PPI++
sequence of :mod:`pulse_ml.stats.sequential.weighted`: every rated session weighs
``1 / (pi r)``, with ``r`` the probability that an asked session answers. The sequence is valid
only if a session's weight is fixed once the session is seen, so ``r`` is PREDICTABLE: the
response model of a look's new sessions is fitted on the sessions of earlier looks only
(:func:`predictable_response`; at the first look, cross-fitted within it by user as in
``infer``). The model and its two tests are those of :mod:`pulse_ml.inference.active`: no
evidence that anyone asked did not answer (:data:`~pulse_ml.inference.active.NO_RESPONSE_Z`)
gives ``r = 1``; no evidence that answering depends on the features, one rate. Features enter
as their ranks in the training looks (the earlier sessions), so a new session's scale never
depends on later data. Case studies asked uniformly (one ``request_prob`` per arm) or without
the column keep the unweighted monitor's numbers unchanged.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from pulse_ml.errors import PulseError
from pulse_ml.inference.active import (
    NO_RESPONSE_Z,
    RESPONSE_CLIP,
    features_matter,
    fit_response,
    response_design,
    response_probability,
)
from pulse_ml.inference.monitor_looks import MonitorData
from pulse_ml.sessions.request_prob import REQUEST_PROB
from pulse_ml.sessions.table import SessionTable
from pulse_ml.stats.sequential.monitor import MonitorResult
from pulse_ml.stats.sequential.weighted import stable_folds, weighted_monitor

__all__ = ["predictable_response", "response_drift", "weigh_requested"]

# Below this many rated sessions (both arms) a weighted case study's fixed-n interval covered
# 0.928 +- 0.008 in simulation (123 rated, strong predictor; 246 rated: 0.942): warn.
FEW_WEIGHTED_LABELS = 200


def _rank_scaled(train: NDArray, apply: NDArray) -> tuple[NDArray, NDArray]:
    """Columns of both as ranks in ``train`` (its ECDF, mid-ranks), scaled to unit variance."""
    keep = train.std(axis=0) > 0
    srt = np.sort(train[:, keep], axis=0)

    def ranks(v: NDArray) -> NDArray:
        out = np.empty_like(v)
        for j in range(v.shape[1]):
            lo = np.searchsorted(srt[:, j], v[:, j], "left")
            hi = np.searchsorted(srt[:, j], v[:, j], "right")
            out[:, j] = (lo + hi) / (2.0 * len(srt))
        return (out - 0.5) * np.sqrt(12.0)

    return ranks(train[:, keep]), ranks(apply[:, keep])


def predictable_response(x: NDArray, rated: NDArray, pi: NDArray, look: NDArray,
                         users: NDArray, seed: int = 0) -> NDArray:
    """P(answered | asked, x) of every session from the sessions of EARLIER looks only.

    Args:
        x: Features (n, p), numeric (categories one-hot).
        rated: Whether each session has a rating.
        pi: ``request_prob`` per session.
        look: First look (0-based) at which each session is visible.
        users: User codes (the first look's cross-fitting keeps a user's sessions together).
        seed: Seed of the first look's folds.

    Returns:
        The response probability per session in [RESPONSE_CLIP, 1]: at look 0 cross-fitted
        within look 0 (:func:`~pulse_ml.inference.active.response_probability`); at look k from
        a model fitted on looks < k, with the same two tests on those sessions.
    """
    from threadpoolctl import threadpool_limits

    # a multi-threaded BLAS makes each small L-BFGS step ~10x slower on a loaded machine
    with threadpool_limits(limits=1, user_api="blas"):
        return _predictable(np.asarray(x, float), np.asarray(rated, bool), pi, look, users,
                            seed)


def _predictable(x: NDArray, rated: NDArray, pi: NDArray, look: NDArray, users: NDArray,
                 seed: int) -> NDArray:
    from scipy.special import expit

    out = np.ones(len(x))
    first = look == 0
    if first.any():
        try:
            out[first] = response_probability(x[first], rated[first], pi[first], users[first],
                                              seed=seed)
        except PulseError:  # one user at the first look: one response rate for it
            b0 = fit_response(x[first][:, :0], rated[first], pi[first], c=1.0)[0]
            out[first] = np.clip(expit(b0), RESPONSE_CLIP, 1.0)
    for k in np.unique(look[look > 0]):
        train, new = look < k, look == k
        if not train.any():
            continue
        var = float((pi[train] * (1 - pi[train])).sum())
        z = (rated[train].sum() - pi[train].sum()) / np.sqrt(max(var, 1e-12))
        if z > NO_RESPONSE_Z:
            continue  # no evidence that anyone asked did not answer: r = 1
        x_tr, x_new = _rank_scaled(x[train], x[new])
        if features_matter(x_tr, rated[train], pi[train]):
            beta = fit_response(x_tr, rated[train], pi[train], c=1.0)
            out[new] = expit(beta[0] + x_new @ beta[1:])
        else:
            out[new] = expit(fit_response(x_tr[:, :0], rated[train], pi[train], c=1.0)[0])
    return np.clip(out, RESPONSE_CLIP, 1.0)


# The response check warns when the sessions after the first look answered this many
# user-clustered s.e. above or below what the earlier looks' response models predicted
# (measured on tests/support/monitor_active_sim.py, 100 data sets: a null 5-95% range of about
# -2.4 to +2.2, the estimated models' own noise included, warning in 1%; answering whose logit
# falls by 2 over the test: 72%, by 5: z about -7.5, 100%; docs/monitoring.md).
RESPONSE_DRIFT_Z = 3.5


def response_drift(rated: NDArray, pi: NDArray, r_hat: NDArray, look: NDArray,
                   users: NDArray) -> tuple[float, float, float]:
    """Answers of the sessions after the first look against the response models' prediction.

    Args:
        rated: Whether each session has a rating.
        pi: ``request_prob`` per session.
        r_hat: The predictable response probability (:func:`predictable_response`).
        look: First look (0-based) at which each session is visible.
        users: User codes (the s.e. is clustered by user).

    Returns:
        Rated count, expected count ``sum pi r_hat`` and the z score of their difference, over
        the sessions of looks >= 1 (whose response rate came from earlier looks only).
    """
    m = look > 0
    res = rated[m] - pi[m] * r_hat[m]
    var = float((np.bincount(users[m], weights=res) ** 2).sum())
    z = float(res.sum() / np.sqrt(var)) if var > 0 else 0.0
    return float(rated[m].sum()), float((pi[m] * r_hat[m]).sum()), z


def _varying(pi: NDArray, arm: NDArray) -> bool:
    """Whether request_prob differs within an arm (uniform asking is today's analysis)."""
    if not np.isfinite(pi).all():
        return False
    return any(np.ptp(pi[arm == a]) > 1e-12 * pi[arm == a].max()
               for a in (0, 1) if (arm == a).any())


def weigh_requested(table: SessionTable, data: MonitorData, result: MonitorResult, settings,
                    days: NDArray) -> tuple[MonitorResult, tuple[str, ...], tuple[str, ...],
                                            tuple[int, ...]]:
    """The monitor's result with every case study asked by varying ``request_prob`` weighted.

    Args:
        table: The session table.
        data: The monitor's arrays (:func:`pulse_ml.inference.monitor.monitor_data`).
        result: The unweighted result of every case study.
        settings: The monitor's settings (alpha, clusters, horizon, target, burn-in, seed).
        days: Look times per case study (days since day 1), (studies, looks).

    Returns:
        The result with the rows of weighted case studies replaced (the others untouched), per
        arm a note: asked (sum of request_prob), rated, estimated response, weights; warnings
        (answering that changed over the test, :func:`response_drift`); and the indices of the
        weighted case studies.
    """
    frame = table.frame
    if REQUEST_PROB not in frame.columns:
        return result, (), (), ()
    pi_rows = frame[REQUEST_PROB].to_numpy(float)[data.rows]
    # codes and folds from each user's own id (not its position in this run's table): a re-run
    # with more days or rows in another order keeps the first look's split and every earlier term
    user_ids = frame["user_id"].to_numpy()[data.rows]
    hashed = pd.util.hash_array(pd.Series(user_ids, dtype=object).astype(str).to_numpy(
        dtype=object), categorize=False)
    user_codes = pd.factorize(hashed, sort=True)[0]  # dense, in the order of the ids' hashes
    fold = stable_folds(user_ids if data.users is not None
                        else frame["session_id"].to_numpy()[data.rows], settings.seed)
    picked, weights, notes, warns = [], np.ones(data.rows.size), [], []
    for g, study in enumerate(data.studies):
        m = data.group == g
        if not _varying(pi_rows[m], data.arm[m]):
            continue
        picked.append(g)
        in_study = np.zeros(len(frame), dtype=bool)
        in_study[data.rows[m]] = True  # a group's rows in file order (response_design's)
        x = response_design(table, in_study, data.arm[m] == 1)
        r_hat = predictable_response(x, data.labeled[m], pi_rows[m], data.look[m],
                                     user_codes[m], seed=settings.seed)
        weights[m] = 1.0 / (pi_rows[m] * r_hat)
        got, expected, z = response_drift(data.labeled[m], pi_rows[m], r_hat, data.look[m],
                                          user_codes[m])
        if abs(z) >= RESPONSE_DRIFT_Z:
            warns.append((g, got, expected, z))
        for role, a, cond in (("control", 0, study.control), ("treatment", 1, study.treatment)):
            arm_m = data.arm[m] == a
            lab = arm_m & data.labeled[m]
            w = weights[m][lab]
            notes.append(
                f"case study '{study.name}', {role} arm '{cond}': asked by varying "
                f"request_prob: {int(lab.sum())} rated of ~{pi_rows[m][arm_m].sum():.0f} "
                f"expected asked (sum of request_prob); estimated response "
                f"{100 * float(r_hat[arm_m].mean()):.0f}% (each look's from earlier looks "
                f"only); weights 1/(request_prob x response) from {w.min():.1f} to "
                f"{w.max():.1f}. Monitored by active PPI++ (naive = inverse-probability "
                "weighted), cluster-robust by user.")
    if not picked:
        return result, (), (), ()
    sel = np.isin(data.group, picked)
    res_w = weighted_monitor(
        data.arm[sel], data.labeled[sel], data.rating[sel], data.prediction[sel],
        data.look[sel], data.n_looks, weights[sel],
        users=None if data.users is None else data.users[sel], alpha=settings.alpha,
        target_labels=settings.target_labels, horizon=settings.horizon_days,
        look_times=days[picked], min_units_per_arm=settings.min_units_per_arm,
        groups=data.group[sel], seed=settings.seed, fold=fold[sel])
    warnings = []
    for g, got, expected, z in warns:
        k = len(data.cutoffs[g]) - 1  # the case study's last own look, PPI++ row
        last = res_w.table[res_w.table["group"] == g].iloc[2 * k + 1]
        warnings.append(
            f"case study '{data.studies[g].name}': answering changed over the test: after the "
            f"first look {got:.0f} sessions rated where the response models of the earlier "
            f"looks expected {expected:.0f} (z = {z:+.1f}, clustered by user). Each look's "
            "response rate comes from earlier looks, so the weights 1/(request_prob x response)"
            " of later sessions are off and this case study's effects and intervals can be "
            "biased (a response rate falling over the test: the last fixed interval covered "
            f"0.76 in simulation). The PPI++ effect {last['effect']:+.3f} reads "
            f"{last['window_effect']:+.3f} with each day's weights scaled to its sessions (less "
            "biased there). Keep the rating prompt and its timing the same over the test.")
    for g in picked:  # few rated sessions under uneven weights: the fixed interval runs short
        k = len(data.cutoffs[g]) - 1
        last = res_w.table[res_w.table["group"] == g].iloc[2 * k + 1]
        if last["n_labeled"] < FEW_WEIGHTED_LABELS:
            warnings.append(
                f"case study '{data.studies[g].name}': only {int(last['n_labeled'])} rated "
                f"sessions (< {FEW_WEIGHTED_LABELS}) carry uneven weights 1/(request_prob x "
                "response): its fixed-n intervals (ci_lower, ci_upper) may cover less than "
                "95% (0.93 at ~120 rated in simulation, perf/monitor_active_coverage.py "
                "--budget 0.03); its confidence sequence (cs_lower, cs_upper) still covered "
                "0.97 there: read that one, or collect more ratings.")
    table_out, stops = result.table.copy(), result.stops.copy()
    for old, new in ((table_out, res_w.table), (stops, res_w.stops)):
        rows = np.isin(old["group"].to_numpy(), picked)
        cols = [c for c in new.columns if c != "group"]
        for c in cols:
            if str(old[c].dtype) != str(new[c].dtype) and old[c].dtype.kind in "iu":
                old[c] = old[c].astype(new[c].dtype)
            old.loc[rows, c] = new[c].to_numpy()
    t_star = result.target_labels.copy()
    t_star[picked] = res_w.target_labels
    burn = result.burn_in_look.copy()
    burn[picked] = res_w.burn_in_look
    return replace(result, table=table_out, stops=stops, target_labels=t_star,
                   burn_in_look=burn), tuple(notes), tuple(warnings), tuple(picked)
