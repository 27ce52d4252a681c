"""Misbehaving LLM servers: bounded time, one clear reason per call, never an exception.

Real litellm against the stub OpenAI-compatible server on 127.0.0.1 (nothing is patched).
"""

from __future__ import annotations

import json
import time

from llm_stub import JUDGE_ANSWER, Reply

from pulse_ml.llm.client import run_batch
from pulse_ml.llm.parse import parse_judge
from pulse_ml.llm.prompts import JUDGE, messages


def _one(cfg):
    request = [(messages(JUDGE.format(conversation="User: hello")), parse_judge)]
    results, usage = run_batch(cfg, request, None, progress=False)
    return results[0], usage


def test_a_dribbling_server_is_cut_at_the_timeout(stub_server, make_cfg):
    """Before: each byte reset litellm's read timeout, so timeout=1 kept the call open ~30 s."""
    from pulse_ml.llm.client import load_litellm

    load_litellm()  # its first import takes seconds: not part of the call
    stub_server.responder = lambda request, n: Reply(text=JUDGE_ANSWER, dribble=0.1)
    start = time.perf_counter()
    result, usage = _one(make_cfg(timeout=1.0, retries=0))
    assert time.perf_counter() - start < 5
    assert result.value is None and "no complete answer within timeout=1 s" in result.error
    assert usage.missing == 1


def test_empty_choices_is_an_invalid_answer(stub_server, make_cfg):
    body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 0,
                                                "total_tokens": 1}})
    stub_server.responder = lambda request, n: Reply(raw=body)
    result, _ = _one(make_cfg(retries=1))
    assert result.value is None and "no choices" in result.error
    assert result.error.startswith("InvalidAnswer") and stub_server.calls == 2


def test_ten_thousand_deep_json_is_named(stub_server, make_cfg):
    deep = '{"likert_score": ' + "[" * 10_000 + "]" * 10_000 + "}"
    stub_server.responder = lambda request, n: Reply(text=deep)
    result, _ = _one(make_cfg(retries=0))
    assert result.value is None and "nested too deeply" in result.error


def test_prose_answer_is_named_not_json(stub_server, make_cfg):
    stub_server.responder = lambda request, n: Reply(text="I think the user was happy.")
    result, _ = _one(make_cfg(retries=0))
    assert "the answer is not JSON" in result.error


def test_server_traceback_quotes_the_exception_not_its_header(stub_server, make_cfg):
    trace = ('Traceback (most recent call last):\n  File "server.py", line 3, in handle\n'
             "    answer()\nRuntimeError: CUDA out of memory")
    body = json.dumps({"error": {"message": trace, "type": "server_error"}})
    stub_server.responder = lambda request, n: Reply(status=500, raw=body)
    result, _ = _one(make_cfg(retries=0))
    assert "CUDA out of memory" in result.error, result.error
    assert not result.error.rstrip().endswith("Traceback (most recent call last):")


def test_judge_answer_parsing_is_linear():
    """Before: 200k characters of braces took ~30 s (a decode tried at every '{')."""
    import pytest

    from pulse_ml.llm.parse import AnswerError, extract_json

    for text in ("{" * 200_000, "{ x } " * 33_000, '{"a": ' * 33_000,
                 "{" * 100_000 + "}" * 100_000):
        start = time.perf_counter()
        with pytest.raises(AnswerError):
            extract_json(text)
        assert time.perf_counter() - start < 3
    # a JSON object inside prose and a brace inside one of its strings are still found
    assert extract_json('x {y} {"explanation": "a { b", "likert_score": 4} z') == {
        "explanation": "a { b", "likert_score": 4}
