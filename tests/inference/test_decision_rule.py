"""The decision rule on hand-made inputs: each outcome and its reasons."""

from __future__ import annotations

import numpy as np

from pulse_ml.inference.decision_rule import GuardrailCheck, Success, decide

INF = float("inf")


def _one(success, guards=(), days=None, invalid=()):
    return decide([success], [list(guards)], 0.05, days, list(invalid))[0]


def test_each_outcome():
    assert _one(Success(0.3, 0.1, INF, 0.0)).decision == "ship"
    assert _one(Success(-0.3, 0.1, INF, 0.0)).decision == "do_not_ship"
    wait = _one(Success(0.1, 0.1, INF, 0.0), days=10)
    assert wait.decision == "keep_collecting"
    # half-width 1.96 * 0.1 must shrink to 0.1: (1.96)^2 times the data, 10 days so far
    assert np.isclose(wait.expected_days, 10 * (1.959964 ** 2 - 1), rtol=1e-4)
    assert _one(Success(0.3, 0.1, INF, 0.0), invalid=["srm"]).decision == "invalid"


def test_non_inferiority_and_guardrails():
    ni = Success(0.0, 0.05, INF, -0.15)
    assert _one(ni).decision == "ship"
    good = GuardrailCheck("cost", 0.2, 0.02, -0.05)   # 20% cheaper, margin 5%
    bad = GuardrailCheck("cost", -0.3, 0.02, -0.05)   # 30% dearer
    open_ = GuardrailCheck("cost", 0.0, 0.05, -0.05)  # undecided
    gone = GuardrailCheck("cost", float("nan"), float("nan"), -0.05)
    assert _one(ni, [good]).decision == "ship"
    stop = _one(ni, [good, GuardrailCheck("errors", -0.3, 0.02, -0.05)])
    assert stop.decision == "do_not_ship" and stop.guardrail_passed["errors"] is False
    assert _one(ni, [bad]).decision == "do_not_ship"
    wait = _one(ni, [open_], days=7)
    assert wait.decision == "keep_collecting" and wait.expected_days is not None
    blocked = _one(ni, [gone], days=7)
    assert blocked.decision == "keep_collecting"
    assert any("cannot be checked" in r for r in blocked.reasons)


def test_wrong_side_says_more_data_will_not_help():
    v = _one(Success(-0.05, 0.1, INF, 0.0), days=14)
    assert v.decision == "keep_collecting" and v.expected_days is None
    assert any("wrong side" in r for r in v.reasons)


def test_holm_levels_and_decisions_agree():
    succ = [Success(0.5, 0.1, INF, 0.0), Success(0.22, 0.1, INF, 0.0),
            Success(0.05, 0.1, INF, 0.0)]
    verdicts = decide(succ, [[], [], []], 0.05, None, [])
    assert [v.decision for v in verdicts] == ["ship", "keep_collecting", "keep_collecting"]
    for v in verdicts:
        assert (v.ci[0] > 0) == (v.decision == "ship")
    # p(0.22 / 0.1) one-sided = 0.0139 > 0.025 / 2: Holm's second step keeps it
    assert np.isclose(verdicts[0].level, 2 * 0.025 / 3)
    assert np.isclose(verdicts[1].level, 2 * 0.025 / 2)
    assert np.isclose(verdicts[2].level, 2 * 0.025 / 2)
