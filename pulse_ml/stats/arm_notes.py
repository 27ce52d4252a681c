"""Refusals and plain-language notes of an arm comparison (what :func:`compare_arms` says).

Every printed interval is valid or says why not: arms whose ratings cannot give a variance are
refused (:func:`refuse_arm`, :func:`refuse_degenerate`); small samples, few unlabeled sessions,
ratings concentrated on a few users (Kish) and raters who differ from non-raters get a note.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pulse_ml.errors import PulseError
from pulse_ml.stats import effect_engine as engine

MIN_LABELS = 30  # below this many labeled sessions (or users) per arm: a small-sample warning
MIN_UNLABELED = 10  # below this many unlabeled sessions per arm: a warning
MIN_UNLABELED_USERS = 5  # clustered: below this many unlabeled users per arm: a warning


def refuse_arm(y: NDArray[np.float64], codes: NDArray[np.intp], keys: ArrayLike | None,
            arm: str) -> None:
    """Refuse an arm whose ratings have no variance or (clustered) come from one user.

    Raises:
        PulseError: Naming the arm and what to collect.
    """
    # = np.ptp(y) == 0 (finite values) without its wrapper
    if np.maximum.reduce(y) == np.minimum.reduce(y):
        raise PulseError(
            f"{arm} arm: all {y.size} labeled ratings equal {y[0]:g}, so their variance is 0 "
            "and no interval can be computed (it would have zero width). Collect more ratings "
            "in this arm or leave the case study out.")
    # one user (no sort needed)
    if keys is not None and np.minimum.reduce(codes) == np.maximum.reduce(codes):
        user = np.asarray(keys)[0]
        raise PulseError(
            f"{arm} arm: all {y.size} labeled sessions come from one user ({user!r}), so a "
            "cluster-robust interval is impossible: its variance comes from the labeled users, "
            "and unlabeled sessions of other users cannot replace them. Collect ratings from at "
            "least 2 users (30+ for reliable intervals) or use clusters=none and read the result "
            "as about that user.")


SHIFT_NOTE_SE = 0.5  # prediction shift (unlabeled - labeled) of this many naive s.e. ...
SHIFT_NOTE_Z = 3.0  # ... and this many of its own s.e. (not noise): a note
DEGENERATE = 1e-6  # effect s.e. below this share of the arms' s.e.: no variance information


def refuse_degenerate(res: engine.EngineResult, clustered: bool) -> None:
    """Refuse an effect whose variance vanishes although each arm's mean varies.

    Users who rated both arms contribute their within-user difference; when every such
    difference is the same (e.g. two users, each one star happier in treatment) the
    cluster-robust variance is 0 and an interval would claim certainty from no information.
    """
    arms_se = float(np.hypot(*res.se_naive_arm[0]))
    for name, se in (("naive", res.naive_se[0]), ("PPI++", res.aug_se[0])):
        if arms_se > 0 and se <= DEGENERATE * arms_se:
            who = (f"its {int(res.g_lab_union[0])} labeled users" if clustered
                   else "its labeled sessions")
            raise PulseError(
                f"the {name} effect's standard error is {se:.1e}, although each arm's mean "
                f"varies (s.e. {arms_se:.2g}): {who} rated both arms and all show the same "
                "within-user difference, so the data say nothing about how much the effect "
                "varies and any interval would have zero width. Collect ratings from more "
                "users (30+ for reliable intervals).")


def notes(res: engine.EngineResult, clustered: bool, small_sample: bool) -> list[str]:
    """Plain-language notes on small samples, few unlabeled sessions and concentrated raters.

    Args:
        res: One comparison (row 0 of an engine result).
        clustered: Cluster ids are users.
        small_sample: The small-sample rules were applied.

    Returns:
        The notes (empty when there is nothing to say).
    """
    notes = []
    unit = "users" if clustered else "sessions"
    for a, arm in enumerate(("control", "treatment")):
        n, g = int(res.n_lab[0, a]), int(res.g_lab[0, a])
        n_unl, g_unl = int(res.n_unl[0, a]), int(res.g_unl[0, a])
        g_eff = float(res.g_eff[0, a])
        if clustered and small_sample and g >= MIN_LABELS and g_eff < MIN_LABELS:
            notes.append(
                f"{arm} arm: {g} labeled users, but some give many ratings that move "
                f"together: they count as {g_eff:.1f} effective users (Kish, with their "
                f"ratings' intra-user correlation). Intervals use CR2 and t({g_eff - 1:.0f}) "
                "quantiles, but with so few effective users their coverage is only "
                "approximate; the randomization test (inference=randomization) stays exact.")
        if min(n, g) < MIN_LABELS:
            who = f"{n} labeled sessions" + (f" from {g} users" if clustered else "")
            fix = ("t quantiles and small-sample corrections are applied but coverage is only "
                   "approximate" if small_sample else
                   "normal quantiles with ddof 0 under-cover at this size; use small_sample=True")
            notes.append(f"{arm} arm: only {who} (< {MIN_LABELS}): {fix}.")
        if small_sample and g < engine.MIN_TUNE_CLUSTERS:
            notes.append(f"{arm} arm: {g} labeled {unit} are too few to tune lambda "
                         f"(< {engine.MIN_TUNE_CLUSTERS}); its PPI++ estimate is the naive "
                         "one.")
        few_users = clustered and g_unl < MIN_UNLABELED_USERS
        if n_unl < MIN_UNLABELED or few_users:
            src = f" from {g_unl} user(s)" if clustered else ""
            notes.append(
                f"{arm} arm: only {n_unl} unlabeled session(s){src}: the variance of their mean "
                "is taken from the pooled (labeled and unlabeled) predictions, so lambda stays "
                "small and the predictions can barely narrow the interval.")
    return notes
