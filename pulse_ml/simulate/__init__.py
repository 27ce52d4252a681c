"""Simulate: calibrated demo data (a session table, its ground truth, OpenHands-style events).

A source of session tables, like ``extract``; the statistics are checked against its truth.
"""
