"""Async LLM calls through litellm: bounded concurrency, retries, cache, cost accounting.

Retries use jittered exponential backoff from a seeded RNG; answers are cached on disk.

litellm is imported lazily (it takes seconds) by :func:`load_litellm`, the only place that
imports it.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pulse_ml.llm.cache import DiskCache, cache_key
from pulse_ml.llm.config import LLMConfig
from pulse_ml.llm.parse import AnswerError

# Our timeout (below) cancels a call that litellm is still setting up; litellm then drops its
# inner coroutine unawaited and Python warns when it is collected: noise, nothing was lost.
warnings.filterwarnings("ignore", message="coroutine 'OpenAIChatCompletion.acompletion' was "
                        "never awaited", category=RuntimeWarning)

Parser = Callable[[str], Any]


def load_litellm():
    """Import litellm quietly, with the bundled (offline) model cost map."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


@dataclass
class CallResult:
    """Outcome of one prompt.

    Attributes:
        value: The parsed answer (None when missing).
        error: Why the answer is missing (None when present).
        text: The raw answer text of the last attempt.
        cached: Whether the answer came from the cache (no call paid).
        attempts: HTTP calls made for this prompt in this run.
    """

    value: Any = None
    error: str | None = None
    text: str | None = None
    cached: bool = False
    attempts: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


@dataclass
class Usage:
    """Running totals of a batch (shown in the progress bar, logged to MLflow)."""

    calls: int = 0
    cached: int = 0
    retries: int = 0
    missing: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    first_error: str | None = None

    def add(self, r: CallResult) -> None:
        """Add one result."""
        self.calls += r.attempts
        self.retries += max(r.attempts - 1, 0)
        self.cached += int(r.cached)
        self.tokens_in += r.tokens_in
        self.tokens_out += r.tokens_out
        self.cost_usd += r.cost_usd
        if r.error is not None:
            self.missing += 1
            kind = r.error.split(":", 1)[0]
            self.errors[kind] = self.errors.get(kind, 0) + 1
            if self.first_error is None:
                self.first_error = r.error

    def reasons(self) -> str:
        """Missing answers counted by reason, most frequent first (``12 x Timeout; ...``)."""
        ranked = sorted(self.errors.items(), key=lambda kv: (-kv[1], kv[0]))
        return "; ".join(f"{n} x {kind}" for kind, n in ranked)

    def postfix(self) -> dict[str, str]:
        """Short progress-bar postfix."""
        return {"calls": str(self.calls), "cached": str(self.cached),
                "missing": str(self.missing), "tok": f"{self.tokens_in}+{self.tokens_out}",
                "$": f"{self.cost_usd:.4f}"}

    def metrics(self, prefix: str = "") -> dict[str, float]:
        """Totals as MLflow metrics."""
        return {f"{prefix}calls": self.calls, f"{prefix}cached": self.cached,
                f"{prefix}retries": self.retries, f"{prefix}n_missing": self.missing,
                f"{prefix}tokens_in": self.tokens_in, f"{prefix}tokens_out": self.tokens_out,
                f"{prefix}cost_usd": self.cost_usd}


def _retryable(exc: BaseException, litellm) -> bool:
    fatal = (litellm.AuthenticationError, litellm.BadRequestError, litellm.NotFoundError,
             litellm.PermissionDeniedError)
    if isinstance(exc, fatal):
        return False
    status = getattr(exc, "status_code", None)
    return not (isinstance(status, int) and 400 <= status < 500 and status not in (408, 409, 429))


def _reason(exc: BaseException) -> str:
    """``<ErrorType> [status]: <the informative line of its message>``.

    A server error may quote a Python traceback; its bare header ("Traceback (most recent call
    last):") says nothing, so the last line (the exception itself) is quoted instead.
    """
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    header = "Traceback (most recent call last):"
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if lines and any(header in line for line in lines):
        head = lines[0].split(header)[0].strip() if header in lines[0] else lines[0]
        tail = [line for line in lines if header not in line
                and not line.startswith(("File ", "^", "~"))][-1:]
        lines = [f"{head} {tail[0] if tail else '(a traceback without its error)'}".strip()]
    msg = lines[0][:160] if lines else ""
    return f"{name}{f' {status}' if status else ''}: {msg}"


def _answer_text(response) -> str:
    """The assistant text of a chat completion.

    Raises:
        AnswerError: the answer has no ``choices`` (or no message in its first choice).
    """
    choices = getattr(response, "choices", None)
    if not choices:
        raise AnswerError("the server's answer has no choices (empty `choices`: no completion)")
    message = getattr(choices[0], "message", None)
    if message is None:
        raise AnswerError("the server's answer has no message in its first choice")
    content = getattr(message, "content", None)
    return content if isinstance(content, str) else ""


class LLMClient:
    """Call one model with bounded concurrency, retries, a cache and cost accounting.

    Args:
        cfg: The endpoint settings.
        cache: Answer cache (None = no cache).
    """

    def __init__(self, cfg: LLMConfig, cache: DiskCache | None = None):
        self.cfg = cfg
        self.cache = cache
        self._rng = random.Random(cfg.seed)
        self._litellm = load_litellm()
        self._api_key = cfg.api_key()
        self._litellm_knows_price: bool | None = None
        self._stop: asyncio.Event | None = None

    def _cost(self, response, tokens_in: int, tokens_out: int) -> float:
        if self._litellm_knows_price is not False:
            try:
                cost = float(self._litellm.completion_cost(completion_response=response))
                self._litellm_knows_price = True
                return cost
            except Exception:  # noqa: BLE001 - litellm raises for unknown models
                self._litellm_knows_price = False
        return (tokens_in * self.cfg.price_in_per_1k + tokens_out * self.cfg.price_out_per_1k) / 1e3

    def _backoff(self, attempt: int) -> float:
        base = min(self.cfg.backoff_max, self.cfg.backoff_base * 2 ** attempt)
        return base * (0.5 + self._rng.random())

    async def _request(self, messages: list[dict]):
        kwargs: dict[str, Any] = dict(model=self.cfg.model, messages=messages,
                                      api_key=self._api_key, timeout=self.cfg.timeout,
                                      num_retries=0, max_retries=0, **self.cfg.params())
        if self.cfg.api_base:
            kwargs["api_base"] = self.cfg.api_base
        # litellm's timeout bounds each read, so a server that dribbles its answer a byte at a
        # time would keep the call open for ever: the whole call is bounded here.
        try:
            return await asyncio.wait_for(self._litellm.acompletion(**kwargs),
                                          timeout=self.cfg.timeout)
        except TimeoutError:
            raise TimeoutError(f"no complete answer within timeout={self.cfg.timeout:g} s "
                               "(the server is slow or sends its answer slowly)") from None

    async def call(self, messages: list[dict], parse: Parser,
                   semaphore: asyncio.Semaphore) -> CallResult:
        """Answer one prompt: cache, else call (retrying errors and invalid answers)."""
        key = cache_key(self.cfg.model, messages, self.cfg.params())
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                try:
                    return CallResult(value=parse(hit["text"]), text=hit["text"], cached=True)
                except (AnswerError, KeyError):
                    pass  # a parser change invalidated the entry: ask again
        result = CallResult()
        for attempt in range(self.cfg.retries + 1):
            if attempt:
                await asyncio.sleep(self._backoff(attempt - 1))
            try:
                async with semaphore:
                    if self._stop is not None and self._stop.is_set():
                        result.error = "Cancelled: run interrupted"
                        return result
                    result.attempts += 1
                    response = await self._request(messages)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below
                result.error = _reason(exc)
                if not _retryable(exc, self._litellm):
                    return result
                continue
            try:
                text = _answer_text(response)
            except AnswerError as exc:
                result.error = f"InvalidAnswer: {exc}"
                continue
            usage = getattr(response, "usage", None)
            t_in = int(getattr(usage, "prompt_tokens", 0) or 0)
            t_out = int(getattr(usage, "completion_tokens", 0) or 0)
            cost = self._cost(response, t_in, t_out)
            result.tokens_in += t_in
            result.tokens_out += t_out
            result.cost_usd += cost
            result.text = text
            try:
                result.value = parse(text)
            except AnswerError as exc:
                result.error = f"InvalidAnswer: {exc}"
                continue
            result.error = None
            if self.cache is not None:
                self.cache.put(key, {"text": text, "model": self.cfg.model,
                                     "tokens_in": t_in, "tokens_out": t_out,
                                     "cost_usd": cost, "time": time.time()})
            return result
        return result

    async def call_many(self, requests: Sequence[tuple[list[dict], Parser]], desc: str = "llm",
                        progress: bool = True, usage: Usage | None = None,
                        stop_after: int | None = None) -> list[CallResult]:
        """Answer many prompts concurrently (at most ``cfg.concurrency`` in flight).

        Args:
            requests: ``(messages, parser)`` pairs.
            desc: Progress-bar label.
            progress: Show a tqdm bar with live calls / tokens / cost.
            usage: Totals to update (a new one if None).
            stop_after: Stop after this many results (a graceful interruption: calls in
                flight finish and are cached, the others are not started).

        Returns:
            One result per request, in order (cancelled ones carry ``error="Cancelled"``).
        """
        from pulse_ml.report.progress import progress_bar

        usage = usage if usage is not None else Usage()
        semaphore = asyncio.Semaphore(self.cfg.concurrency)
        self._stop = asyncio.Event()
        tasks = [asyncio.ensure_future(self.call(m, p, semaphore)) for m, p in requests]
        index = {t: i for i, t in enumerate(tasks)}
        results: list[CallResult | None] = [None] * len(tasks)
        bar = progress_bar(total=len(tasks), desc=desc, unit="call", disable=not progress,
                           leave=False)
        pending = set(tasks)
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    res = task.result()
                    results[index[task]] = res
                    usage.add(res)
                    bar.update(1)
                bar.set_postfix(usage.postfix(), refresh=False)
                if stop_after is not None and sum(r is not None for r in results) >= stop_after:
                    self._stop.set()
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
            bar.close()
        return [r if r is not None else CallResult(error="Cancelled: run interrupted")
                for r in results]


def run_batch(cfg: LLMConfig, requests: Sequence[tuple[list[dict], Parser]],
              cache: DiskCache | None, desc: str = "llm", progress: bool = True,
              stop_after: int | None = None) -> tuple[list[CallResult], Usage]:
    """Synchronous wrapper around :meth:`LLMClient.call_many` (one event loop per batch)."""
    client = LLMClient(cfg, cache)
    usage = Usage()
    results = asyncio.run(client.call_many(requests, desc=desc, progress=progress, usage=usage,
                                           stop_after=stop_after))
    return results, usage


def all_failed_error(what: str, cfg: LLMConfig, usage: Usage, n_prompts: int):
    """A ``PulseError`` when every one of ``n_prompts`` prompts ended without an answer, else None.

    A batch in which every call failed has nothing to report (a judge's MSE would be NaN, a
    labeled table would have no labels): the command stops with the reasons counted instead.
    A partial failure is not an error: the missing answers are counted and the run goes on.

    Args:
        what: The command, for the message (``judge``, ``extract labeler=local``).
        cfg: The endpoint that was called.
        usage: The batch totals (``Usage.errors`` counts the reasons).
        n_prompts: Prompts in the batch.
    """
    from pulse_ml.env.faults import shorten
    from pulse_ml.errors import PulseError

    if n_prompts == 0 or usage.missing < n_prompts:
        return None
    where = cfg.api_base or "the provider's default endpoint"
    key = f", the API key in ${cfg.api_key_env}" if cfg.api_key_env else ""
    return PulseError(
        f"{what}: all {n_prompts} LLM call(s) to {cfg.model} at {where} failed "
        f"({usage.reasons()}), e.g. {shorten(usage.first_error or '', 160)}. Nothing was "
        f"written or logged. Check that the server answers, the model name{key}, then run "
        "again (answers that succeed are cached, so a rerun pays only for them).")
