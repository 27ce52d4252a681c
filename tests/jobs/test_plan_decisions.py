"""``plan`` for the decision rule: non-inferiority margin, several treatments, guardrails."""

from __future__ import annotations

import pytest

from pulse_ml.stats.power import labels_needed

BASE = ("rho=0.3", "sd=1.2", "n_unlabeled=3500")


def _labels(cli, *overrides) -> tuple[int, str]:
    res = cli("plan", *BASE, *overrides)
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if "with PPI++" in x)
    return int(line.split(":")[1].split("rated")[0].replace(",", "")), res.stdout


def test_plan_accounts_for_margin_variants_and_guardrails(cli, pulse_home):
    n_ni, out = _labels(cli, "effect=0", "margin=0.15", "treatments=3", "guardrails=1")
    assert "non-inferiority at margin 0.15" in out and "alpha / 3" in out
    want = labels_needed(0.15, 1.2, 0.3, 3500, 0.05 / 3, 1 - 0.2 / 2)
    assert n_ni == want.n_ppi
    n_plain, _ = _labels(cli, "effect=0.15")
    assert n_plain == labels_needed(0.15, 1.2, 0.3, 3500, 0.05, 0.8).n_ppi < n_ni


@pytest.mark.parametrize(("overrides", "text"), [
    (("effect=0",), "effect=0 cannot be detected"),
    (("effect=-0.2", "margin=0.1"), "effect + margin = -0.1"),
    (("effect=0.1", "margin=0"), "margin"),
    (("effect=0.1", "treatments=0"), "treatments"),
])
def test_plan_refuses_bad_decision_settings(cli, pulse_home, overrides, text):
    res = cli("plan", *BASE, *overrides)
    assert res.returncode == 2 and text in res.stderr, res.stderr
