"""Per-case-study effects: naive vs prediction-powered (PPI++), from a table and predictions.

Pure with respect to I/O: takes a validated :class:`SessionTable` and a prediction per session
and returns typed results. The honest predictions come from
:meth:`CrossFitEnsemble.honest_predict` (the project's design card: cross-fitted predictions).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.inference.active import active_arms
from pulse_ml.inference.arm_data import ArmData, arm_data, user_codes
from pulse_ml.inference.propensity import crossfit_propensity
from pulse_ml.inference.randomization import RandomizationSettings, few_users_warning, randomize
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.request_prob import uses_request_prob
from pulse_ml.sessions.table import SessionTable
from pulse_ml.stats.arm_effect import ArmComparison, compare_arms
from pulse_ml.stats.feature_tests import compare_features, labeled_shift
from pulse_ml.stats.permutation import permutation_pvalue
from pulse_ml.stats.propensity import inverse_propensity_weights, prediction_shift
from pulse_ml.stats.randomization import RandomizationResult

# Options of the ``clusters`` setting (value -> meaning).
CLUSTER_MODES = {"user_id": "cluster-robust by user", "none": "sessions independent"}

EFFECT_COLUMNS = [
    "case_study", "control", "treatment", "estimator", "effect", "ci_lower", "ci_upper",
    "ci_width", "significant", "ci_reduction_pct", "p_value", "n_labeled_control",
    "n_labeled_treatment", "n_unlabeled_control", "n_unlabeled_treatment", "lambda_control",
    "lambda_treatment", "p_value_permutation", "p_value_randomization",
    "ci_lower_randomization", "ci_upper_randomization",
]


@dataclass(frozen=True)
class InferenceSettings:
    """How to compute the intervals."""

    alpha: float = 0.05
    clusters: bool = True
    n_permutations: int = 10_000
    seed: int = 0
    reweight: bool = False  # shift-aware PPI++: labeled sessions weighted by 1/propensity
    randomization: RandomizationSettings | None = None  # None: asymptotic intervals only


@dataclass(frozen=True)
class CaseStudyResult:
    """Naive and augmented effect of one case study plus its feature comparison."""

    study: CaseStudy
    comparison: ArmComparison
    naive_p_value: float
    features: pd.DataFrame
    shift: pd.DataFrame
    clustered: bool = False
    prediction_shift: pd.DataFrame | None = None
    randomization: RandomizationResult | None = None
    notes: tuple[str, ...] = ()

    def rows(self) -> list[dict]:
        """The two result rows (naive, augmented) with :data:`EFFECT_COLUMNS`."""
        c = self.comparison
        out = []
        rand = self.randomization
        nan = float("nan")
        for name, est in (("naive", c.naive), ("augmented", c.augmented)):
            r = None if rand is None else getattr(rand, name)
            out.append({
                "case_study": self.study.name, "control": self.study.control,
                "treatment": self.study.treatment, "estimator": name,
                "effect": est.effect, "ci_lower": est.ci_lower, "ci_upper": est.ci_upper,
                "ci_width": est.ci_upper - est.ci_lower,
                "significant": bool(est.ci_lower > 0 or est.ci_upper < 0),
                "ci_reduction_pct": c.ci_reduction_pct if name == "augmented" else float("nan"),
                # Clustered: the Wald p-value agrees with the cluster-robust CI; the session-
                # level permutation test ignores users and is kept only for reference.
                "p_value": (self.naive_p_value if name == "naive" and not self.clustered
                            else est.p_value),
                "n_labeled_control": c.n_control, "n_labeled_treatment": c.n_treatment,
                "n_unlabeled_control": c.n_unlabeled_control,
                "n_unlabeled_treatment": c.n_unlabeled_treatment,
                "lambda_control": 0.0 if name == "naive" else c.lambda_control,
                "lambda_treatment": 0.0 if name == "naive" else c.lambda_treatment,
                "p_value_permutation": self.naive_p_value if name == "naive" else float("nan"),
                "p_value_randomization": nan if r is None else r.p_value,
                "ci_lower_randomization": nan if r is None else r.ci_lower,
                "ci_upper_randomization": nan if r is None else r.ci_upper,
            })
        return out


def compare(control: ArmData, treatment: ArmData, settings: InferenceSettings,
            **rules: bool) -> ArmComparison:
    """``compare_arms`` on two arms, cluster-robust by user when configured.

    ``rules``: ``cr2`` / ``lambda_noise`` of :func:`compare_arms` (both on unless given; the
    monitor's cumulative looks use neither).
    """
    arms = [a.arm if settings.clusters else replace(a.arm, users=None, users_unl=None)
            for a in (control, treatment)]
    if arms[0].w is None or arms[1].w is None:
        arms = [replace(a, w=None) for a in arms]
    return compare_arms(arms[0], arms[1], alpha=settings.alpha, **rules)


def word_count_name(column: str) -> str:
    """Name of the word-count summary of a ``text`` column in the feature tests."""
    return f"{column} (words)"


def feature_test_kinds(kinds: dict[str, str]) -> dict[str, str]:
    """The feature tests' columns: a ``text`` column is summarised by its word count.

    The feature and label-shift tests (Welch / Fisher, rank-biserial) need numbers or
    categories; the text itself enters only the model.
    """
    return {word_count_name(c) if k == "text" else c: "count" if k == "text" else k
            for c, k in kinds.items()}


def feature_test_columns(rows: pd.DataFrame, kinds: dict[str, str]) -> pd.DataFrame:
    """The feature set's columns (``kinds``) as tested: text columns become word counts."""
    out = {}
    for col, kind in kinds.items():
        if kind == "text":
            words = rows[col].fillna("").astype(str).str.count(r"\S+")
            out[word_count_name(col)] = words.astype("int64")
        else:
            out[col] = rows[col]
    return pd.DataFrame(out, index=rows.index)


def analyse(table: SessionTable, preds: np.ndarray, study: CaseStudy,
            settings: InferenceSettings) -> CaseStudyResult:
    """Naive + augmented effect, permutation p-value, feature comparison and label shift."""
    codes = user_codes(table)  # factorized once per table
    control = arm_data(table, preds, study, study.control, codes)
    treatment = arm_data(table, preds, study, study.treatment, codes)
    _check_arms(table.path, study, control, treatment, settings)
    active = _active(table, study, control, treatment, codes, settings.seed)
    if active is not None:  # asked by request_prob: its weights replace reweight's
        control, treatment, asked = active
    elif settings.reweight:
        control, treatment = _reweighted(table, study, control, treatment, codes, settings.seed)
    try:
        comparison = compare(control, treatment, settings)
    except PulseError as exc:
        raise PulseError(f"{table.path}: case study '{study.name}': {exc}") from exc
    p_naive = permutation_pvalue(control.arm.y, treatment.arm.y,
                                 n_permutations=settings.n_permutations, seed=settings.seed)
    declared = {c: k for c, k in table.features.kinds.items()
                if k != "user_history"}  # earlier ratings: an outcome, not a session feature
    kinds = feature_test_kinds(declared)
    feats = compare_features(feature_test_columns(control.rows, declared),
                             feature_test_columns(treatment.rows, declared), kinds)
    feats.insert(0, "case_study", study.name)
    lab = feature_test_columns(pd.concat([control.rows, treatment.rows]), declared)
    unl = feature_test_columns(pd.concat([control.rows_unl, treatment.rows_unl]), declared)
    shift = labeled_shift(lab, unl, kinds) if len(unl) else pd.DataFrame()
    if len(shift):
        shift.insert(0, "case_study", study.name)
    rows, skipped = [], []
    for role, cond, arm in (("control", study.control, control),
                            ("treatment", study.treatment, treatment)):
        row, note = _prediction_shift_row(arm)
        rows.append({"case_study": study.name, "arm": role, "condition": cond, **row,
                     "note": note})
        if note:
            skipped.append(f"{role} arm '{cond}': {note}")
    rand, notes = None, ()
    if settings.randomization is not None:
        rand, note = randomize(table.path, study, control, treatment, settings.alpha,
                               settings.randomization)
        notes = (note,)
    few = few_users_warning(control, treatment, rand is not None)
    if few:  # one Kish note per case study: this one also says what to run
        skipped.append(few)
        comparison = replace(comparison, warnings=tuple(
            w for w in comparison.warnings if "effective users (Kish" not in w))
    if active is not None:
        skipped.extend(asked)
    if skipped:
        comparison = replace(comparison, warnings=(*comparison.warnings, *skipped))
    return CaseStudyResult(study, comparison, float(p_naive), feats, shift, settings.clusters,
                           pd.DataFrame(rows), rand, notes)


def _prediction_shift_row(data: ArmData) -> tuple[dict, str]:
    """The arm's labeled-vs-unlabeled prediction shift, or NaNs and why it was skipped."""
    arm = data.arm
    if arm.f.size >= 2 and arm.f_unl.size >= 2:
        return asdict(prediction_shift(arm.f, arm.f_unl)), ""
    nan = float("nan")
    row = {"smd": nan, "rank_biserial": nan, "p_value": nan,
           "mean_labeled": float(arm.f.mean()) if arm.f.size else nan,
           "mean_unlabeled": float(arm.f_unl.mean()) if arm.f_unl.size else nan,
           "n_labeled": int(arm.f.size), "n_unlabeled": int(arm.f_unl.size)}
    return row, (f"prediction-shift diagnostic skipped: {arm.f.size} labeled and "
                 f"{arm.f_unl.size} unlabeled session(s), it needs at least 2 of each "
                 "(the interval itself is computed)")


def _active(table: SessionTable, study: CaseStudy, control: ArmData, treatment: ArmData,
            codes: np.ndarray, seed: int) -> tuple[ArmData, ArmData, tuple[str, ...]] | None:
    """Active PPI++ arms when the case study was asked by ``request_prob`` (else None)."""
    frame = table.frame
    if not uses_request_prob(frame, (frame["case_study"] == study.name).to_numpy()):
        return None
    return active_arms(table, study, control, treatment, codes, seed)


def _reweighted(table: SessionTable, study: CaseStudy, control: ArmData, treatment: ArmData,
                codes: np.ndarray, seed: int) -> tuple[ArmData, ArmData]:
    """Arms whose labeled sessions carry inverse labeling-propensity weights.

    The propensity P(labeled | features, arm) is cross-fitted (folds keep users together) on
    the case study's sessions, so no session's weight comes from a model that saw it.
    """
    frame = table.frame
    rows = [((frame["case_study"] == study.name) & (frame["condition"] == cond)).to_numpy()
            for cond in (study.control, study.treatment)]
    in_study = rows[0] | rows[1]
    cols = table.features.of_kind("categorical", "count", "flag", "numeric")
    sub = frame.loc[in_study, cols]
    cats = table.features.of_kind("categorical")
    x = pd.get_dummies(sub, columns=cats, dtype=float).to_numpy(float)
    x = np.column_stack([x, rows[1][in_study].astype(float)])
    labeled = table.labeled[in_study]
    groups = codes[in_study]
    folds = min(5, np.unique(groups[labeled]).size, np.unique(groups[~labeled]).size)
    if folds < 2:
        raise PulseError(
            f"{table.path}: case study '{study.name}': reweight=true needs labeled and unlabeled "
            f"sessions from at least 2 users each to cross-fit P(labeled | features) (got "
            f"{np.unique(groups[labeled]).size} and {np.unique(groups[~labeled]).size}). Run it "
            "with reweight=false, or leave it out with case_studies=[...].")
    try:
        p = crossfit_propensity(x, labeled, folds=folds, seed=seed, groups=groups)
    except (PulseError, ValueError) as exc:  # ValueError: a fold with one class only
        raise PulseError(f"{table.path}: case study '{study.name}': reweight=true: {exc}. Run "
                         "it with reweight=false, or leave it out with case_studies=[...]."
                         ) from exc
    out = []
    for mask, arm in zip(rows, (control, treatment), strict=True):
        local = mask[in_study]
        w = inverse_propensity_weights(p[local], labeled[local])
        out.append(replace(arm, arm=replace(arm.arm, w=w)))
    return out[0], out[1]


def _check_arms(path: str, study: CaseStudy, control: ArmData, treatment: ArmData,
                settings: InferenceSettings) -> None:
    """Refuse arms PPI cannot use, naming the file, case study, arm and fix."""
    for role, arm, cond in (("control", control, study.control),
                            ("treatment", treatment, study.treatment)):
        where = f"{path}: case study '{study.name}', {role} arm '{cond}'"
        if arm.arm.f_unl.size == 0:
            raise PulseError(f"{where} has no unlabeled session: prediction-powered inference "
                             "needs unlabeled sessions to add information (with every session "
                             "rated, the naive estimate is the answer). Leave this case study "
                             "out with case_studies=[...] or add its unrated sessions.")
        users = np.unique(arm.arm.users)  # the labeled users carry the variance
        if settings.clusters and users.size < 2:
            raise PulseError(f"{where}: all its labeled sessions belong to one user, so a "
                             "cluster-robust interval is impossible (unlabeled sessions of "
                             "other users cannot replace labeled ones). Use clusters=none (and "
                             "read the result as about that user) or collect ratings from more "
                             "users.")


def effects_frame(results: list[CaseStudyResult]) -> pd.DataFrame:
    """One row per case study x estimator.

    ``attrs``: ``alpha`` (the intervals' error level) and ``ci_label`` (``"effect [95% CI]"`` at
    alpha 0.05), the terminal table's header.
    """
    frame = pd.DataFrame([r for res in results for r in res.rows()], columns=EFFECT_COLUMNS)
    alpha = results[0].comparison.alpha if results else 0.05
    frame.attrs.update(alpha=alpha, ci_label=f"effect [{100 * (1 - alpha):g}% CI]")
    return frame


