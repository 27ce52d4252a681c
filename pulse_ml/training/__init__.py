"""Training: CV folds, Optuna tuning, one model family's run and out-of-fold metrics.

Pure of MLflow: the train job hands the results to :mod:`pulse_ml.registry`.
"""
