"""Typed settings of one LLM endpoint (labeler, judge or discovery model)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from pulse_ml.errors import PulseError


@dataclass(frozen=True)
class LLMConfig:
    """How to call one model through litellm.

    Attributes:
        name: Short name (config option, used in run names and tags).
        model: litellm model string, e.g. ``openai/gpt-5-mini`` or ``openai/local-judge``.
        api_base: Endpoint URL (None = the provider's default).
        api_key_env: NAME of the environment variable holding the key (never the key).
        concurrency: Maximum requests in flight.
        timeout: Seconds per request.
        retries: Extra attempts after a failed or invalid answer.
        temperature: Sampling temperature (None = provider default; o3/gpt-5 accept only 1).
        max_tokens: Cap on output tokens (None = provider default).
        price_in_per_1k: USD per 1k input tokens when litellm does not know the model.
        price_out_per_1k: USD per 1k output tokens when litellm does not know the model.
        backoff_base: First backoff delay in seconds (doubles per attempt, jittered).
        backoff_max: Largest backoff delay in seconds.
        max_sessions: Judge at most this many sessions (None = all).
        max_input_tokens: Token budget of one prompt (long conversations are cut in the middle).
        seed: Seed of the backoff jitter.
    """

    name: str
    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    concurrency: int = 8
    timeout: float = 120.0
    retries: int = 3
    temperature: float | None = 0.0
    max_tokens: int | None = None
    price_in_per_1k: float = 0.0
    price_out_per_1k: float = 0.0
    backoff_base: float = 1.0
    backoff_max: float = 30.0
    max_sessions: int | None = None
    max_input_tokens: int = 100_000
    seed: int = 0

    def api_key(self) -> str:
        """Return the API key from ``api_key_env``.

        A custom ``api_base`` (a local or self-hosted server) works without a key.

        Raises:
            PulseError: if the variable is named but unset and no ``api_base`` is given.
        """
        if self.api_key_env:
            value = os.environ.get(self.api_key_env)
            if value:
                return value
            if not self.api_base:
                raise PulseError(f"{self.name}: the environment variable {self.api_key_env} "
                                 f"(api_key_env) is not set. Export your key, e.g. "
                                 f"`export {self.api_key_env}=...`.")
        return "x"

    def params(self) -> dict:
        """The request parameters that change the answer (part of the cache key)."""
        out: dict = {}
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        return out


def llm_config_from_mapping(node: Mapping, default_name: str = "llm",
                            verb: str = "judge") -> LLMConfig:
    """Build an :class:`LLMConfig` from a plain mapping, every field type-checked.

    Args:
        node: The config node's plain values (``judge``, ``labeler``, one discovery model).
        default_name: The node's config key (named in messages, default ``name``).
        verb: The verb named in messages.

    Raises:
        PulseError: on an unknown key, a missing ``model`` or a value of the wrong type or
            range; the message names the key (e.g. ``judge.concurrency``) and what is allowed.
    """
    from pulse_ml.config import Node, number, text

    known = {f.name for f in fields(LLMConfig)}
    data = {str(k): v for k, v in dict(node).items()}
    unknown = sorted(set(data) - known)
    if unknown:
        raise PulseError(f"LLM config '{data.get('name', default_name)}': unknown key(s) "
                         f"{', '.join(unknown)}. Known: {', '.join(sorted(known))}.")
    if not data.get("model"):
        raise PulseError(f"LLM config '{data.get('name', default_name)}': `model` is required, "
                         f"e.g. model: openai/gpt-5-mini.")
    cfg, p = Node({default_name: data}), f"{default_name}."
    defaults = {f.name: f.default for f in fields(LLMConfig)}

    def num(key: str, low: float | None = None, high: float | None = None, *,
            integer: bool = False, open_interval: bool = False, optional: bool = False):
        if key not in data:
            return defaults[key]
        return number(cfg, p + key, verb, low, high, integer=integer,
                      open_interval=open_interval, optional=optional)

    def positive(key: str, integer: bool = False, optional: bool = False):
        if integer:  # [1, inf]
            return num(key, 1, None, integer=True, optional=optional)
        return num(key, 0, None, open_interval=True, optional=optional)  # (0, inf)

    return LLMConfig(
        name=str(data.get("name") or default_name), model=str(data["model"]),
        api_base=text(cfg, p + "api_base"), api_key_env=text(cfg, p + "api_key_env"),
        concurrency=positive("concurrency", integer=True),
        timeout=positive("timeout"),
        retries=num("retries", 0, None, integer=True),
        temperature=num("temperature", 0, 2, optional=True),
        max_tokens=positive("max_tokens", integer=True, optional=True),
        price_in_per_1k=num("price_in_per_1k", 0, None),
        price_out_per_1k=num("price_out_per_1k", 0, None),
        backoff_base=num("backoff_base", 0, None),
        backoff_max=num("backoff_max", 0, None),
        max_sessions=positive("max_sessions", integer=True, optional=True),
        max_input_tokens=positive("max_input_tokens", integer=True),
        seed=num("seed", integer=True))
