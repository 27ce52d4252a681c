"""A seeded A/B test monitored look by look while sessions are asked to rate by probability.

Users with heavy-tailed session counts (Pareto), randomized by user, their sessions spread over
the looks; skewed 1-5 stars (the shares of tests/stats/realistic_sims.py: mostly 4-5); a
treatment effect that is larger on "hard" sessions; hard sessions are asked far more often
(pi ~ sqrt(expected squared error), clipped), and about 26% of the asked do not answer,
depending on the features. Without the weights the rated sessions over-represent hard ones,
and the effect is biased.
"""

from __future__ import annotations

import numpy as np
from active_sim import request_probs
from returning_users import CUTS
from scipy.special import expit, ndtr

LOOKS = 10
EFFECT = {False: -0.2, True: 1.2}  # latent treatment effect on easy / hard sessions
NOISE = {False: 0.75, True: 1.05}  # latent noise s.d. on easy / hard sessions
HARD = 0.3  # share of hard sessions


def _latent_var(hard: bool) -> float:
    return 0.35**2 * 1.25 + 0.35**2 + 0.3**2 + NOISE[hard] ** 2


def true_effect() -> float:
    """The population's arm difference in mean stars (exact: the latent is normal per class).

    ``E[stars] = 1 + sum_j P(latent > cut_j)`` with the latent N(mean, var) given hard/easy.
    """
    out = 0.0
    for hard, share in ((False, 1 - HARD), (True, HARD)):
        sd = np.sqrt(_latent_var(hard))
        base = -0.6 * hard
        arms = [1.0 + ndtr((base + t * EFFECT[hard] - CUTS) / sd).sum() for t in (0, 1)]
        out += share * (arms[1] - arms[0])
    return float(out)


def simulate(seed: int, n_users: int = 1000, budget: float = 0.15, response: float = 0.8,
             looks: int = LOOKS, strength: float = 0.0, drift: float = 0.0,
             ask_trend: float = 0.0, response_trend: float = 0.0) -> dict[str, np.ndarray]:
    """One data set: every session's features, arm, all-label rating, prediction, pi, rated.

    ``strength`` > 0 lets the predictor see that share of what the features do not explain
    (the user's effect and the session's noise): correlation with the stars ~0.28 at 0, ~0.74
    at 1, ~0.79 at 1.5 (a STRONG predictor: lambda near 1, where its noise matters most).

    Time (``t`` = look / (looks - 1), from 0 to 1): ``drift`` moves the treatment arm's
    predictions by ``drift * t`` stars (the ratings do not move); ``ask_trend`` multiplies
    request_prob by ``exp(-ask_trend (t - 1/2))`` (known: the weights correct it);
    ``response_trend`` lowers the logit of answering by ``response_trend (t - 1/2)`` (the
    response model, fitted on earlier looks, lags behind it). All zero: the data set as before.
    """
    rng = np.random.default_rng(seed)
    per_user = np.minimum(1 + rng.pareto(1.5, n_users) * 3, 150).astype(int)
    users = np.repeat(np.arange(n_users), per_user)
    n = users.size
    treated = (rng.random(n_users) < 0.5)[users]
    x1 = rng.normal(0, 1, n) + 0.5 * rng.normal(0, 1, n_users)[users]
    hard = rng.random(n) < HARD
    x3 = rng.normal(0, 1, n)  # drives answering; the predictor barely uses it
    unexplained = (0.35 * rng.normal(0, 1, n_users)[users]
                   + rng.normal(0, 1, n) * np.where(hard, NOISE[True], NOISE[False]))
    latent = (0.35 * x1 - 0.6 * hard + 0.3 * x3
              + treated * np.where(hard, EFFECT[True], EFFECT[False]) + unexplained)
    y = 1.0 + np.searchsorted(CUTS, latent).astype(float)  # skewed stars (shares in CUTS)
    f = 3.9 + 0.3 * x1 - 0.7 * hard + 0.05 * x3 + 0.1 * treated + rng.normal(0, 0.15, n)
    f = f + strength * 0.55 * unexplained
    err2 = np.where(hard, 6.0, 1.0) * np.exp(rng.normal(0, 0.3, n))  # a noisy error model
    pi = request_probs(err2, budget, budget / 4)
    u_ask = rng.random(n)
    b = np.log(response / (1 - response))
    respond = expit(b + 1.0 * x3 - 0.5 * hard)
    u_answer = rng.random(n)
    look = rng.integers(0, looks, n)
    if drift or ask_trend or response_trend:
        t = look / max(looks - 1, 1) - 0.5
        f = f + drift * treated * (t + 0.5)
        pi = np.minimum(pi * np.exp(-ask_trend * t), 1.0)
        respond = expit(b + 1.0 * x3 - 0.5 * hard - response_trend * t)
    return {"respond": respond, "x": np.column_stack([x1, hard, x3, treated]), "users": users,
            "arm": treated.astype(np.int64), "y": y, "f": f, "pi": pi,
            "rated": (u_ask < pi) & (u_answer < respond), "look": look}


def one_replication(seed: int, weights: str = "predictable", looks: int = LOOKS,
                    **kw) -> dict[str, float]:
    """Monitor one data set; did each sequence cover the true arm difference at EVERY look?

    The truth is the population's (:func:`true_effect`), what the running means estimate; the
    all-label effect of the sessions seen by each look is reported too (``*_allabel``).

    ``weights``: 'predictable' (1/(pi r), r from earlier looks), 'uniform' (the weights dropped:
    every rated session alike, as the unweighted monitor would), 'pi_only' (1/pi, no response
    model), 'oracle' (1/(pi r) with the true response rate r).
    """
    from pulse_ml.inference.monitor_active import predictable_response
    from pulse_ml.stats.sequential.weighted import weighted_monitor

    d = simulate(seed, looks=looks, **kw)
    if weights == "predictable":
        r = predictable_response(d["x"], d["rated"], d["pi"], d["look"], d["users"], seed=seed)
        w = 1.0 / (d["pi"] * r)
    elif weights == "oracle":
        w = 1.0 / (d["pi"] * d["respond"])
    elif weights == "pi_only":
        w = 1.0 / d["pi"]
    else:
        w = np.full(d["y"].size, 1.0 / d["pi"].mean())
    res = weighted_monitor(d["arm"], d["rated"], d["y"], d["f"], d["look"], looks, w,
                           users=d["users"], horizon=float(looks), seed=seed)
    tab = res.table
    visible = d["look"][None, :] <= np.arange(looks)[:, None]
    allabel = np.array([d["y"][v & (d["arm"] == 1)].mean()
                        - d["y"][v & (d["arm"] == 0)].mean() for v in visible])
    truth = np.full(looks, true_effect())
    out = {"sessions": float(d["y"].size), "rated": float(d["rated"].sum())}
    for name in ("naive", "augmented"):
        t = tab[tab["estimator"] == name]
        lo, hi = t["cs_lower"].to_numpy(), t["cs_upper"].to_numpy()
        miss = np.isfinite(lo) & ((truth < lo) | (truth > hi))
        out[f"{name}_covers_all"] = float(not miss.any())
        miss_all = np.isfinite(lo) & ((allabel < lo) | (allabel > hi))
        out[f"{name}_covers_all_allabel"] = float(not miss_all.any())
        ci_miss = np.isfinite(lo) & ((truth < t["ci_lower"].to_numpy())
                                     | (truth > t["ci_upper"].to_numpy()))
        out[f"{name}_ci_covers_last"] = float(not ci_miss[-1])
        out[f"{name}_width_last"] = float(hi[-1] - lo[-1])
        out[f"{name}_error_last"] = float(t["effect"].to_numpy()[-1] - truth[-1])
        out[f"{name}_lambda_last"] = float(t["lambda_treatment"].to_numpy()[-1])
        last = t.iloc[-1]
        out[f"{name}_shift_last"] = float(last["time_shift"])
        out[f"{name}_shift_se_last"] = float(last["time_shift"] / last["se"])
        out[f"{name}_window_error_last"] = float(last["window_effect"] - truth[-1])
    return out
