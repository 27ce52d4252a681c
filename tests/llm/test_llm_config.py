"""Every LLM setting is type-checked once; a bad value names its key (exit 2 on the CLI)."""

from __future__ import annotations

import pytest

from pulse_ml.errors import PulseError
from pulse_ml.settings import llm_config_from_mapping


def test_values_are_typed_and_defaults_kept():
    cfg = llm_config_from_mapping({"model": "openai/x", "concurrency": "4", "timeout": 30,
                                   "temperature": None, "max_sessions": "null"}, "judge")
    assert cfg.concurrency == 4 and isinstance(cfg.concurrency, int)
    assert cfg.timeout == 30.0 and cfg.temperature is None and cfg.max_sessions is None
    assert cfg.retries == 3 and cfg.name == "judge" and cfg.api_base is None


@pytest.mark.parametrize("key,value,message", [
    ("concurrency", "abc", "judge.concurrency='abc' is not a whole number"),
    ("concurrency", 0, "judge.concurrency=0 is out of range"),
    ("timeout", "soon", "judge.timeout='soon' is not a number"),
    ("timeout", 0, "judge.timeout=0 is out of range"),
    ("retries", -1, "judge.retries=-1 is out of range"),
    ("temperature", "hot", "judge.temperature='hot' is not a number"),
    ("max_sessions", "many", "judge.max_sessions='many' is not a whole number"),
    ("max_input_tokens", 1.5, "judge.max_input_tokens=1.5 is not a whole number"),
    ("price_in_per_1k", -1, "judge.price_in_per_1k=-1 is out of range"),
    ("seed", "x", "judge.seed='x' is not a whole number"),
])
def test_bad_values_name_the_key(key, value, message):
    with pytest.raises(PulseError, match="pulse-ml judge: ") as err:
        llm_config_from_mapping({"model": "openai/x", key: value}, "judge")
    assert message in str(err.value)


def test_cli_bad_concurrency_exits_2_naming_the_key(cli, tmp_path):
    res = cli("judge", "judge.concurrency=abc", f"data.path={tmp_path / 'none.parquet'}")
    assert res.returncode == 2, res.stderr
    assert "judge.concurrency='abc' is not a whole number" in res.stderr
    assert "failed unexpectedly" not in res.stderr and "Traceback" not in res.stderr
