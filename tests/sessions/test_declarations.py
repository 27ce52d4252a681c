"""Case-study declarations: treatments, split, decision rule, guardrails, overrides."""

from __future__ import annotations

import pytest

from pulse_ml.errors import PulseError
from pulse_ml.sessions.case_studies import from_mapping, load_configured
from pulse_ml.sessions.declarations import Guardrail

BASE = {"name": "cheap", "control": "big", "treatment": "small"}


def test_full_declaration_and_variants():
    study = from_mapping({
        **BASE, "treatment": ["small", "tiny"],
        "split": {"big": 0.5, "small": 0.25, "tiny": 0.25},
        "decision": {"rule": "non_inferiority", "margin": 0.1},
        "guardrails": {"cost_usd": {"better": "lower", "margin": 0.05, "relative": True},
                       "abandoned": {"margin": 0.02}}})
    assert study.treatment == "small" and study.all_treatments == ("small", "tiny")
    assert study.arms == ("big", "small", "tiny")
    assert study.rule == "non_inferiority" and study.margin == 0.1
    assert study.guardrails == (Guardrail("cost_usd", "lower", 0.05, True),
                                Guardrail("abandoned", "lower", 0.02, False))
    variants = study.variants()
    assert [(v.treatment, v.all_treatments) for v in variants] == [
        ("small", ("small",)), ("tiny", ("tiny",))]
    assert all(v.guardrails == study.guardrails and v.name == "cheap" for v in variants)


def test_single_treatment_keeps_its_defaults():
    study = from_mapping(BASE)
    assert study.variants() == [study] and study.treatments == ()
    assert study.rule == "superiority" and study.split is None and study.guardrails == ()


@pytest.mark.parametrize(("extra", "text"), [
    ({"split": {"big": 0.5, "small": 0.4}}, "split shares sum to 0.9"),
    ({"split": {"big": 0.5, "smal": 0.5}}, "split names 'smal'"),
    ({"split": {"big": 1.0}}, "split lacks 'small'"),
    ({"split": [0.5, 0.5]}, "split must map each condition"),
    ({"decision": {"rule": "non_inferiority", "margin": -0.1}}, "decision.margin=-0.1"),
    ({"decision": {"rule": "better"}}, "decision.rule='better' is not a rule"),
    ({"guardrails": {"cost": {"margin": 0}}}, "guardrails.cost.margin=0"),
    ({"guardrails": {"cost": {"better": "less", "margin": 1}}}, "better='less'"),
    ({"guardrails": {"cost": {"margin": 1, "relative": "yes"}}}, "relative='yes'"),
    ({"guardrails": {"cost": {"margin": 1, "direction": "lower"}}}, "unknown key(s) direction"),
    ({"guardrails": {"cost": {}}}, "guardrails.cost.margin is missing"),
    ({"treatment": ["small", "small"]}, "lists a condition twice"),
    ({"treatment": ["small", "big"]}, "control 'big' is also listed"),
])
def test_bad_declarations_name_the_case_study_and_key(extra, text):
    with pytest.raises(PulseError) as err:
        from_mapping({**BASE, **extra})
    assert "case study 'cheap'" in str(err.value) and text in str(err.value), str(err.value)


def test_command_line_overrides_merge_into_the_file():
    studies = load_configured(overrides={
        "plan": {"decision": {"rule": "non_inferiority", "margin": 0.2}},
        "new_one": {"control": "a", "treatment": ["b", "c"]}})
    assert studies["plan"].margin == 0.2 and studies["plan"].control == "no-plan"
    assert studies["plan"].split == {"no-plan": 0.5, "show-plan": 0.5}  # from the file
    assert studies["new_one"].all_treatments == ("b", "c")
    with pytest.raises(PulseError, match="declare.plan=3: give keys"):
        load_configured(overrides={"plan": 3})
