"""The LLM client against a real local HTTP server (the litellm path is not patched)."""

import threading

from llm_stub import JUDGE_ANSWER, Reply

from pulse_ml.llm.cache import DiskCache
from pulse_ml.llm.client import run_batch
from pulse_ml.llm.parse import parse_judge
from pulse_ml.llm.prompts import JUDGE, messages


def _requests(n, tag="x"):
    return [(messages(JUDGE.format(conversation=f"User: session {tag}-{i}")), parse_judge)
            for i in range(n)]


def test_answers_cost_and_cache_rerun_pays_nothing(stub_server, make_cfg, tmp_path):
    cfg = make_cfg()
    cache = DiskCache(tmp_path / "cache")
    results, usage = run_batch(cfg, _requests(6), cache, progress=False)
    assert [r.value["likert_score"] for r in results] == [4] * 6
    assert stub_server.calls == 6 and usage.calls == 6 and usage.cached == 0
    assert usage.tokens_in > 0 and usage.tokens_out > 0
    # litellm does not know the model: prices come from the config
    expected = (usage.tokens_in * 0.001 + usage.tokens_out * 0.002) / 1000
    assert abs(usage.cost_usd - expected) < 1e-12
    assert len(cache) == 6

    stub_server.reset_counters()
    results2, usage2 = run_batch(cfg, _requests(6), cache, progress=False)
    assert stub_server.calls == 0
    assert usage2.cached == 6 and usage2.cost_usd == 0.0
    assert [r.value for r in results2] == [r.value for r in results]
    # another parameter (temperature) is another cache key
    run_batch(make_cfg(temperature=0.7), _requests(2), cache, progress=False)
    assert stub_server.calls == 2


def test_interrupted_run_resumes_and_pays_only_the_rest(stub_server, make_cfg, tmp_path):
    cfg = make_cfg(concurrency=1)
    cache = DiskCache(tmp_path / "cache")
    results, _ = run_batch(cfg, _requests(10), cache, progress=False, stop_after=4)
    done = [r for r in results if r.error is None]
    # the call in flight when the stop came (at most one, concurrency 1) finishes and is kept
    assert 4 <= len(done) <= 5
    assert sum(r.error == "Cancelled: run interrupted" for r in results) == 10 - len(done)
    assert stub_server.calls == len(done)
    stub_server.reset_counters()
    results, usage = run_batch(cfg, _requests(10), cache, progress=False)
    assert all(r.error is None for r in results)
    assert usage.cached == len(done)
    assert stub_server.calls == 10 - len(done)


def test_server_that_dies_then_resume(stub_server, make_cfg, tmp_path):
    state = {"served": 0}
    lock = threading.Lock()

    def responder(request, n):
        with lock:
            state["served"] += 1
            if state["served"] >= 4:
                stub_server.kill()
        return Reply(text=JUDGE_ANSWER)

    stub_server.responder = responder
    cfg = make_cfg(concurrency=1, retries=1)
    cache = DiskCache(tmp_path / "cache")
    results, usage = run_batch(cfg, _requests(8), cache, progress=False)
    ok = sum(r.error is None for r in results)
    assert ok == 3 and usage.missing == 5
    assert all("APIConnectionError" in r.error or "InternalServer" in r.error
               for r in results if r.error)

    from llm_stub import StubLLMServer

    with StubLLMServer() as fresh:
        cfg2 = make_cfg(concurrency=1, api_base=fresh.url)
        results, usage = run_batch(cfg2, _requests(8), cache, progress=False)
        assert all(r.error is None for r in results)
        assert fresh.calls == 5 and usage.cached == 3


def test_errors_retry_then_missing_with_reasons(stub_server, make_cfg):
    def responder(request, n):
        prompt = request["messages"][-1]["content"]
        if "e500" in prompt:
            return Reply(status=500)
        if "e429" in prompt:
            return Reply(status=429)
        if "slow" in prompt:
            return Reply(text=JUDGE_ANSWER, delay=1.5)
        if "garbage" in prompt:
            return Reply(text="I think the user was happy-ish.")
        if "rawjunk" in prompt:
            return Reply(raw="<html>proxy error</html>")
        return Reply(text=JUDGE_ANSWER)

    stub_server.responder = responder
    cfg = make_cfg(retries=2, timeout=0.4, concurrency=8)
    tags = ["e500", "e429", "slow", "garbage", "rawjunk", "fine"]
    reqs = [(messages(JUDGE.format(conversation=t)), parse_judge) for t in tags]
    results, usage = run_batch(cfg, reqs, None, progress=False)
    by = dict(zip(tags, results, strict=True))
    assert by["fine"].error is None and by["fine"].attempts == 1
    for tag in tags[:-1]:
        assert by[tag].value is None and by[tag].attempts == 3, tag
    assert "500" in by["e500"].error
    assert "RateLimit" in by["e429"].error
    assert "Timeout" in by["slow"].error
    assert by["garbage"].error.startswith("InvalidAnswer")
    assert by["rawjunk"].error
    assert usage.missing == 5 and usage.retries == 10
    assert stub_server.calls == 5 * 3 + 1


def test_concurrency_bound_holds(stub_server, make_cfg):
    stub_server.latency = 0.05
    _, usage = run_batch(make_cfg(concurrency=3), _requests(24), None, progress=False)
    assert usage.missing == 0
    assert stub_server.max_in_flight == 3


def test_all_failed_only_when_every_prompt_failed(make_cfg):
    from pulse_ml.llm.client import CallResult, Usage, all_failed_error

    usage = Usage()
    for _ in range(3):
        usage.add(CallResult(error="APIConnectionError: Connection refused", attempts=1))
    cfg = make_cfg()
    assert all_failed_error("judge", cfg, usage, 4) is None  # one answered: keep going
    err = all_failed_error("judge", cfg, usage, 3)
    assert err is not None and "all 3 LLM call(s)" in str(err)
    assert "(3 x APIConnectionError)" in str(err) and "Connection refused" in str(err)
    assert all_failed_error("judge", cfg, Usage(), 0) is None
