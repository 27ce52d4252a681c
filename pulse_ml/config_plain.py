"""A verb's config composed as Hydra composes it, read with plain YAML (no Hydra import).

``pulse-ml <verb> --help``/``--cfg`` and :func:`pulse_ml.config.compose` use
:func:`compose_plain` for the packaged tree and plain overrides of existing values
(``data.path=/x.parquet progress=false``): Hydra and OmegaConf cost ~0.2 s CPU to import and
compose. Any form it does not read returns None and Hydra composes; ``tests/test_config.py``
holds the two equal for every verb and a set of overrides.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pulse_ml.config_check import FREE_MAPPINGS, defaults_of
from pulse_ml.config_tree import MISSING, compose_into
from pulse_ml.config_tree import Unsupported as _Unsupported

# tests/test_config.py checks it equals Hydra's composition for every verb.

_INTERPOLATION = re.compile(r"\$\{([^${}]*)\}")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _resolve(value: Any, root: Mapping[str, Any], home: str, depth: int = 0) -> Any:
    """Resolve ``${pulse_home:}`` and absolute ``${a.b}`` interpolations as OmegaConf does."""
    if isinstance(value, dict):
        return {k: _resolve(v, root, home, depth) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, root, home, depth) for v in value]
    if not isinstance(value, str) or "$" not in value:
        return value
    if depth > 10 or "\\" in value or "$" in _INTERPOLATION.sub("", value):
        raise _Unsupported(value)

    def target(expr: str) -> Any:
        if expr == "pulse_home:":
            return home
        if not _PLAIN_KEY.fullmatch(expr):
            raise _Unsupported(expr)
        node: Any = root
        for part in expr.split("."):
            if not isinstance(node, Mapping) or part not in node:
                raise _Unsupported(expr)
            node = node[part]
        if isinstance(node, dict | list) or node == MISSING:
            raise _Unsupported(expr)  # Hydra refuses a missing value; it says so
        return _resolve(node, root, home, depth + 1)

    whole = _INTERPOLATION.fullmatch(value)
    if whole:
        return target(whole.group(1))
    return _INTERPOLATION.sub(lambda m: str(target(m.group(1))), value)


_SAFE_VALUE = re.compile(r"[A-Za-z0-9_./-]+")
# Hydra's override grammar (OverrideLexer.g4) without '_' and '+': no leading zeros in the
# integer part (``00.5`` and ``01`` are strings there: left to Hydra below).
_UINT = r"(0|[1-9][0-9]*)"
_POINT = rf"({_UINT}\.|{_UINT}?\.[0-9]+)"
_INT = re.compile(rf"-?{_UINT}")
_FLOAT = re.compile(rf"-?({_POINT}|({_UINT}|{_POINT})[eE]-?[0-9]+)")


def _override_value(text: str) -> Any:
    """``key=text``'s value as Hydra's override grammar types it (plain forms only)."""
    if not _SAFE_VALUE.fullmatch(text):
        raise _Unsupported(text)
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if re.match(r"[-.]*[0-9]", text) or text.lower().lstrip("-") in ("inf", "nan"):
        raise _Unsupported(text)  # 1_000, -inf, 1e5x ...: left to Hydra
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return None if text.lower() == "null" else text


def _apply_override(out: dict[str, Any], verb: str, item: str) -> None:
    """Set an existing leaf ``key=value`` (no group, free mapping, list or new key)."""
    key, sep, text = item.partition("=")
    top = key.split(".")[0]
    if not sep or not _PLAIN_KEY.fullmatch(key) or key in defaults_of(verb) \
            or top in FREE_MAPPINGS:
        raise _Unsupported(item)
    node: Any = out
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict) or parts[-1] not in node \
            or isinstance(node[parts[-1]], dict | list):
        raise _Unsupported(item)
    node[parts[-1]] = _override_value(text)


def compose_plain(verb: str, overrides: list[str] | None = None) -> dict[str, Any] | None:
    """``conf/<verb>.yaml`` composed as ``config.compose`` (Hydra) returns it, without Hydra.

    Covers the forms this conf tree uses (config and group entries, ``_self_``, ``@package``
    in the list and in headers, ``null`` options, ``${pulse_home:}`` and absolute ``${key}``
    interpolations) and overrides of an existing leaf by a plain word, path, number, bool or
    null (``data.path=/x/y.parquet progress=false``); anything else (a group option, ``+key``,
    quotes, lists, sweeps, ...) returns None and the caller composes with Hydra.
    """
    from pulse_ml.env.paths import project_root

    out: dict[str, Any] = {}
    try:
        compose_into(out, verb)
        for item in overrides or []:
            _apply_override(out, verb, item)
        return _resolve(out, out, str(project_root()))
    except (_Unsupported, OSError):
        return None
