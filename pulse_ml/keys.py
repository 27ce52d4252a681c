"""Names the registry writes and reads: experiments, the registered model, tags and metrics.

Written once here, so a job that searches runs (``compare``) reads exactly what ``train`` and
``judge`` wrote.
"""

from __future__ import annotations

TRAIN_EXPERIMENT = "pulse-train"
JUDGE_EXPERIMENT = "pulse-judge"
INFER_EXPERIMENT = "pulse-infer"
REGISTERED_MODEL = "pulse-satisfaction"
CHAMPION = "champion"

# Run tags.
KIND = "kind"                      # family | trial | llm_judge | inference | monitor | ...
KIND_FAMILY = "family"
KIND_JUDGE = "llm_judge"
KIND_INFERENCE = "inference"
KIND_LABELER = "llm_labeler"        # JUDGE_EXPERIMENT: a labeling batch (extract)
KIND_DISCOVERY = "feature_discovery"  # JUDGE_EXPERIMENT: a feature discovery (discover)
LABELER = "labeler"
FAMILY = "family"
JUDGE = "judge"
FEATURE_SET = "feature_set"
DATA_FINGERPRINT = "data_fingerprint"
DATA_PATH = "data_path"  # the session table a judge run scored
LABEL_FINGERPRINT = "label_fingerprint"  # session ids and ratings only: same sessions, any features
REGISTERED_VERSION = "registered_version"
PROMOTION = "promotion"
PROMOTION_REASON = "promotion_reason"
GIT_COMMIT = "git_commit"  # version tag of versions registered before: see SOURCE_COMMIT
OBJECTIVE = "objective"
CV_GROUP_BY = "cv_group_by"        # user_id | none: how the CV folds were grouped
CV_GROUP_BY_PARAM = "cv.group_by"  # the same, as a param (family runs logged before the tag)
GROUPED_BY_USER = "user_id"
NOT_GROUPED = "none"

# Metrics of a family (or judge) run.
CV_MSE = "cv_mse"
CV_MAE = "cv_mae"
CV_PEARSON = "cv_pearson"
CV_SPEARMAN = "cv_spearman"
N_TRIALS = "n_trials"              # tags of a family run (counts are never metrics)
N_TRIALS_COMPLETE = "n_trials_complete"
TUNING_TIME = "tuning_time_s"
EXPECTED_CI_REDUCTION = "expected_ci_reduction_pct"          # at the training data's N/n
EXPECTED_CI_REDUCTION_REF = "expected_ci_reduction_pct_ref"  # at ci_reduction.unlabeled_ratio
N_LABELED = "n_labeled"            # params of a family run
N_UNLABELED = "n_unlabeled"
SEED = "seed"

# Trials (nested runs of a family run).
KIND_TRIAL = "trial"
TRIAL_STATE = "trial_state"
TRIAL_NUMBER = "trial_number"
BEST_TRIAL = "best_trial"          # tag: the best trial's number (family run), true (trial)
STUDY_NAME = "study_name"
STUDY_STORAGE = "optuna_storage"
SAMPLER = "tuning.sampler"         # params of a family run: the Optuna sampler and pruner used
PRUNER = "tuning.pruner"
BEST_TRIAL_RUN = "best_trial_run_id"  # tag of a family run: its best trial's run
FOLD_MSE = "fold_mse"              # per-fold scores: one metric per fold, fold_mse_0 ... (below)
FOLD_MAE = "fold_mae"
FOLD_PEARSON = "fold_pearson"
FOLD_METRICS = (FOLD_MSE, FOLD_MAE, FOLD_PEARSON)
RUNNING_PREFIX = "running_"        # + objective: the running objective per fold of a trial
TRIAL_OBJECTIVE = "objective"      # metric of a COMPLETE trial run: the value the study optimizes
HISTORY_PREFIX = "trials_"         # + objective: a family run's step series, one step per trial
BEST_SO_FAR_PREFIX = "best_so_far_"  # + objective: the study's best value up to each trial


def fold_metric(score: str, fold: int) -> str:
    """``fold_mse_0``: one fold's score as its own metric.

    A step series would show only its last fold in the runs table, beside the pooled ``cv_mse``.
    """
    return f"{score}_{fold}"


ERROR = "error"                    # tag of a FAILED run: what went wrong

# Promotion and the paired comparison with the champion (tags on family runs and versions).
PROMOTION_RULE = "promotion_rule"
CANDIDATE = "promotion_candidate"
VS_VERSION = "vs_champion_version"
PAIRED_PREFIX = "vs_champion_"  # + delta_mse, mse_ci_lower, ..., delta_r, r_ci_upper
# Selection-free evaluation (training/nested.py): each fold predicted by the trial best on the
# other folds. The paired comparison with the champion uses these predictions, never the best
# trial's own (chosen on those very folds: optimistic).
SELECTION_FREE_OOF = "selection_free_oof.csv"  # artifact of a family run
OOF_ARTIFACT = "oof_predictions.csv"  # artifact of a family run: the best trial's OOF table
ENSEMBLE_ARTIFACT = "ensemble"        # pyfunc artifact key of the pickled ensemble
OOF_PREDICTIONS_ARTIFACT = "oof_predictions"  # pyfunc artifact key of its OOF table
SELECTION_FREE_PREFIX = "selection_free_"      # + cv_mse, cv_mae, cv_pearson, cv_spearman, ...
SELECTION_FREE_CANDIDATES = "selection_free_candidates"  # trials the folds were chosen among
SELECTION_FREE_TRIALS = "selection_free_fold_trials"  # tag: the trial chosen per fold
PAIRED_EVALUATION = "vs_champion_evaluation"  # tag: <new side> vs <champion side>, below
EVAL_SELECTION_FREE = "selection_free"
EVAL_BEST_TRIAL = "best_trial"  # a champion trained before: its best trial's OOF (optimistic)

# Runs that use a model (infer, audit, monitor).
KIND_MONITOR = "monitor"
KIND_AUDIT = "audit"
KIND_REQUEST = "request"  # INFER_EXPERIMENT: `pulse-ml request` (whom to ask)
MODE = "mode"                      # crossfit | in_sample: the predictions used
VALID_INTERVALS = "valid_intervals"  # true | false: whether the run's printed intervals are valid
DECISION = "decision"  # infer tag prefix: decision.<case_study>[.<treatment>] = ship | ...
CASE_STUDY = "case_study"
VERDICT = "verdict"                # the audit's verdict
MODEL_NAME = "model_name"
MODEL_VERSION = "model_version"
MODEL_URI = "model_uri"
MODEL_ID = "model_id"
MODEL_FAMILY = "model_family"

# MLflow's own tags: descriptions, nesting, the experiment's page layout.
NOTE = "mlflow.note.content"
SOURCE_COMMIT = "mlflow.source.git.commit"  # the project checkout's commit (env/git_checkout.py)
SOURCE_PREFIX = "mlflow.source."   # source name, type and commit (trial runs copy their parent's)
USER = "mlflow.user"
PARENT_RUN = "mlflow.parentRunId"
RUN_NAME = "mlflow.runName"
EXPERIMENT_KIND = "mlflow.experimentKind"
SHARED_VIEW_PREFIX = "mlflow.sharedViewState."  # + key: an experiment's saved runs-table view
DATASET_CONTEXT = "mlflow.data.context"  # tag of a dataset input: training | inference
CLASSIC_ML = "custom_model_development"  # MLflow 3: the machine-learning (not GenAI) layout

# The tags of a registered version (at most 12): what people filter versions on and what the code
# reads back (promotion, compare, infer's lineage). The rest of what a version records is in its
# description (registry/version_card.py); versions registered before may carry more tags.
VERSION_TAGS = (FAMILY, FEATURE_SET, DATA_FINGERPRINT, LABEL_FINGERPRINT, CV_GROUP_BY, OBJECTIVE,
                CV_MSE, CV_MAE, CV_PEARSON, PROMOTION, PROMOTION_RULE, VS_VERSION)

EXPERIMENT_DESCRIPTIONS = {
    TRAIN_EXPERIMENT: (
        "Satisfaction predictors of pulse_ml. One parent run per model family and `pulse-ml "
        "train` call (its Optuna trials nested below it, logged as they finish), scored on "
        "out-of-fold predictions of k-fold CV grouped by user: cv_mse, cv_mae, cv_pearson "
        "(per fold: fold_mse_0, fold_mse_1, ...). Each parent run also carries the paired "
        "comparison with the champion (vs_champion_*), the expected CI reduction of the "
        "predictor, the study's optimization history and parameter importances, and the "
        "training data as a dataset input. LLM-judge baselines (kind=llm_judge) sit beside them. "
        "`pulse-ml compare` prints the table; `pulse-ml compare group_by=features` the "
        "ablation over seeds."),
    JUDGE_EXPERIMENT: "LLM-as-a-judge and labeling batches (`pulse-ml judge`, `discover`).",
    INFER_EXPERIMENT: (
        "Effects of agent design changes: naive vs PPI++ (honest, cross-fitted predictions) "
        "per case study (`pulse-ml infer`), and the runs that check or monitor them. Each run "
        "names the registered model version it used (tags model_name, model_version; the "
        "logged model is linked as a run input) and the session table as a dataset input."),
}
REGISTERED_MODEL_DESCRIPTION = (
    "Predicts a session's mean 1-5 star rating from its features (user, agent, task "
    "progression). Each version is a cross-fit ensemble: the fold models of the best Optuna "
    "trial of one model family, predicting with their mean, with the out-of-fold predictions "
    "of its training sessions as an artifact (honest PPI uses them for labeled sessions). The "
    "alias `champion` marks the version `pulse-ml infer` uses; it moves when a new version "
    "passes the promotion rule (tag promotion_rule; default `significant`: the 95% user-"
    "bootstrap interval of the paired selection-free out-of-fold MSE difference new - champion "
    "lies below 0) or by hand with `pulse-ml promote version=N`. Versions are registered for "
    "promotion candidates only (register=candidates) unless register=always.")
