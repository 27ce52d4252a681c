"""Training: CV folds, Optuna tuning, one family's run, out-of-fold metrics, session selection.

Pure of MLflow: the train job hands the results to :mod:`pulse_ml.registry`.
"""
