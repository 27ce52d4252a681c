"""Typed settings of one LLM endpoint (labeler, judge or discovery model).

Built from the config at the edge (``pulse_ml.settings.llm_config_from_mapping``); nothing
here reads a config.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

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

