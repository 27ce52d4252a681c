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
from pathlib import Path
from typing import Any

from pulse_ml.config_check import FREE_MAPPINGS, _nest, _package_header, defaults_of
from pulse_ml.env.paths import conf_dir

# tests/test_config.py checks it equals Hydra's composition for every verb.

_INTERPOLATION = re.compile(r"\$\{([^${}]*)\}")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class _Unsupported(Exception):
    """A form the plain composition does not cover (Hydra composes instead)."""


def _omegaconf_yaml(path: Path) -> dict[str, Any]:
    """A config file read as OmegaConf reads it (``1e-3`` is a float, dates stay strings)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(
        r"""^(?:[-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
        |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
        |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""", re.X), list("-+0123456789."))
    Loader.yaml_implicit_resolvers = {
        key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for key, resolvers in Loader.yaml_implicit_resolvers.items()}
    from pulse_ml.yaml_limits import check_aliases

    text = path.read_text(encoding="utf-8")
    check_aliases(path, text)
    data = yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise _Unsupported(path)
    return data


def _deep_merge(into: dict[str, Any], data: Mapping[str, Any]) -> None:
    """OmegaConf's merge of plain values: mappings merged key by key, the rest replaced."""
    import copy

    for key, value in data.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def _compose_into(out: dict[str, Any], rel: str, package: str, depth: int = 0) -> None:
    """Merge config ``rel`` (``train``, ``data/demo``) and its defaults list at ``package``."""
    path = conf_dir() / f"{rel}.yaml"
    if depth > 10 or not path.is_file():
        raise _Unsupported(rel)
    data = _omegaconf_yaml(path)
    folder = rel.rpartition("/")[0]
    defaults = list(data.pop("defaults", None) or [])
    if "_self_" not in defaults:
        defaults.append("_self_")
    for item in defaults:
        if item == "_self_":
            _deep_merge(out, _nest(package, data))
            continue
        if isinstance(item, str):
            name, _, explicit = item.partition("@")
            child = name.lstrip("/") if name.startswith("/") or not folder else f"{folder}/{name}"
            header = _package_header(conf_dir() / f"{child}.yaml")
            own = header if header is not None else child.rpartition("/")[0]
        elif isinstance(item, dict) and len(item) == 1:
            (group, option), = item.items()
            if option is None:
                continue
            if not isinstance(option, str) or group.startswith(("override ", "optional ")):
                raise _Unsupported(item)
            child = f"{folder}/{group}/{option}" if folder else f"{group}/{option}"
            explicit = ""
            header = _package_header(conf_dir() / f"{child}.yaml")
            own = header if header is not None else child.rpartition("/")[0]
            if "@" in group:
                raise _Unsupported(item)
        else:
            raise _Unsupported(item)
        target = explicit or own
        if package and not target.startswith("_global_") and (explicit or header):
            raise _Unsupported(item)  # a relative package below another: left to Hydra
        if target.startswith("_global_"):
            child_package = target.removeprefix("_global_").strip(".")
        else:
            child_package = ".".join(p for p in (package, target.replace("/", ".")) if p)
        _compose_into(out, child, child_package, depth + 1)


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
        if isinstance(node, dict | list):
            raise _Unsupported(expr)
        return _resolve(node, root, home, depth + 1)

    whole = _INTERPOLATION.fullmatch(value)
    if whole:
        return target(whole.group(1))
    return _INTERPOLATION.sub(lambda m: str(target(m.group(1))), value)


_SAFE_VALUE = re.compile(r"[A-Za-z0-9_./-]+")
_INT = re.compile(r"-?(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|-?[0-9]+[eE][-+]?[0-9]+")


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
        _compose_into(out, verb, "")
        for item in overrides or []:
            _apply_override(out, verb, item)
        return _resolve(out, out, str(project_root()))
    except (_Unsupported, OSError):
        return None
