"""The case-study catalogue's ``randomization_unit``: read, defaulted, and refused when unknown."""

from __future__ import annotations

import pytest

from pulse_ml.errors import PulseError
from pulse_ml.sessions.case_studies import from_mapping, load_configured


def test_randomization_unit_is_read_and_optional():
    node = {"name": "plan", "control": "a", "treatment": "b"}
    assert from_mapping(node).randomization_unit is None
    assert from_mapping({**node, "randomization_unit": "user"}).randomization_unit == "user"
    assert from_mapping({**node, "randomization_unit": "session"}).randomization_unit == "session"


def test_unknown_randomization_unit_names_the_case_study_and_the_fix(tmp_path):
    (tmp_path / "plan.yaml").write_text("control: a\ntreatment: b\nrandomization_unit: users\n")
    with pytest.raises(PulseError) as err:
        load_configured([tmp_path])
    msg = str(err.value)
    assert "case study 'plan': randomization_unit='users'" in msg
    assert "plan.yaml" in msg and "'user' if" in msg and "'session' if" in msg
