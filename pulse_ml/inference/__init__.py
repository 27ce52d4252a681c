"""Inference: honest predictions, effects, monitoring, audit, task deltas, agreement, scoring.

Turns a validated table and a cross-fit ensemble into typed results; no MLflow, no files read.
"""
