"""Calibrated demo data: a session table, its ground truth and optional OpenHands event streams."""
