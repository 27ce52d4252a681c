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
KIND = "kind"                      # family | trial | llm_judge | inference | ...
KIND_FAMILY = "family"
KIND_JUDGE = "llm_judge"
KIND_INFERENCE = "inference"
FAMILY = "family"
JUDGE = "judge"
FEATURE_SET = "feature_set"
DATA_FINGERPRINT = "data_fingerprint"
REGISTERED_VERSION = "registered_version"
PROMOTION = "promotion"
PROMOTION_REASON = "promotion_reason"
GIT_COMMIT = "git_commit"
OBJECTIVE = "objective"

# Metrics of a family (or judge) run.
CV_MSE = "cv_mse"
CV_MAE = "cv_mae"
CV_PEARSON = "cv_pearson"
CV_SPEARMAN = "cv_spearman"
N_TRIALS = "n_trials"
TUNING_TIME = "tuning_time_s"
