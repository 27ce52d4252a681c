"""Predictor families: estimators that map session features to a predicted rating."""
