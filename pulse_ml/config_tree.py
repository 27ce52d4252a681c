"""The packaged conf tree read and merged as Hydra and OmegaConf do, without importing either.

One reader and one merger for :mod:`pulse_ml.config_plain` (a verb's config composed without
Hydra) and :mod:`pulse_ml.config_check` (overrides checked before Hydra is imported): a file is
read as OmegaConf reads it (``1e-3`` a float, dates strings, duplicate keys refused, keys made
strings) and a verb's defaults list is merged as Hydra composes it. A form outside what is
mirrored here raises :class:`Unsupported` (the caller leaves the config to Hydra).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pulse_ml.env.paths import conf_dir
from pulse_ml.errors import PulseError

MISSING = "???"  # OmegaConf's mandatory value

# OmegaConf's float resolver (omegaconf._utils.get_yaml_loader): ``1e-3`` is a float.
_FLOAT_YAML = re.compile(r"""^(?:[-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
    |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X)


class Unsupported(Exception):
    """A form the plain composition does not cover (Hydra composes instead)."""


class _DuplicateKey(Exception):
    """A key written twice in one mapping: ``(key, 1-based line)``."""


@functools.cache
def _loader() -> type:
    """A SafeLoader subclass that types scalars and refuses duplicate keys as OmegaConf does."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[str] = set()
            for key_node, _ in node.value:  # OmegaConf checks the keys that stay strings
                if key_node.tag != yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG:
                    continue
                if key_node.value in seen:
                    raise _DuplicateKey(key_node.value, key_node.start_mark.line + 1)
                seen.add(key_node.value)
            return super().construct_mapping(node, deep=deep)

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_YAML, list("-+0123456789."))
    Loader.yaml_implicit_resolvers = {
        key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for key, resolvers in Loader.yaml_implicit_resolvers.items()}
    return Loader


def _string_keys(value: Any) -> Any:
    """Mapping keys as OmegaConf's composition returns them (``1`` -> ``'1'``).

    Raises:
        Unsupported: a null key (Hydra refuses it in its own words).
    """
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key is None:
                raise Unsupported("a null key")
            out[str(key)] = _string_keys(item)
        return out
    if isinstance(value, list):
        return [_string_keys(item) for item in value]
    return value


def read_conf(path: Path) -> dict[str, Any]:
    """A config file read as OmegaConf reads it (aliases bounded, see ``yaml_limits``).

    Raises:
        PulseError: not YAML, a key written twice in one mapping, or aliases that expand
            too far.
        Unsupported: the file is not a mapping, or has a null key.
        OSError: the file cannot be read.
    """
    import yaml

    from pulse_ml.yaml_limits import check_aliases

    text = path.read_text(encoding="utf-8")
    check_aliases(path, text)
    try:
        data = yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as exc:
        key, line = exc.args
        raise PulseError(f"{path}: line {line}: the key '{key}' is written twice in one mapping "
                         "(OmegaConf refuses duplicate keys). Keep one of them.") from None
    except yaml.YAMLError as exc:
        raise PulseError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise Unsupported(path)
    return _string_keys(data)


def merge(into: dict[str, Any], data: Mapping[str, Any]) -> None:
    """OmegaConf's merge of plain values: mappings merged key by key, the rest replaced.

    Raises:
        Unsupported: a ``???`` merged over a value OmegaConf would keep.
    """
    for key, value in data.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            merge(into[key], value)
        elif value == MISSING and key in into and into[key] != MISSING:
            raise Unsupported(key)  # OmegaConf keeps the earlier value: left to Hydra
        else:
            into[key] = copy.deepcopy(value)


def nest(package: str, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` placed at a dotted package (``infer`` -> ``{"infer": values}``)."""
    for part in reversed([p for p in package.split(".") if p]):
        values = {part: values}
    return values


def package_header(path: Path) -> str | None:
    """The ``# @package <name>`` line among a config file's leading comments (None if none)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            return None
        match = re.match(r"#\s*@package\s+(\S+)", line)
        if match:
            return match.group(1)
    return None


def compose_into(out: dict[str, Any], rel: str, package: str = "", depth: int = 0) -> None:
    """Merge config ``rel`` (``train``, ``data/demo``) and its defaults list at ``package``.

    Raises:
        Unsupported: a defaults-list form this mirror does not cover.
    """
    path = conf_dir() / f"{rel}.yaml"
    if depth > 10 or not path.is_file():
        raise Unsupported(rel)
    data = read_conf(path)
    folder = rel.rpartition("/")[0]
    defaults = list(data.pop("defaults", None) or [])
    if "_self_" not in defaults:
        defaults.append("_self_")
    for item in defaults:
        if item == "_self_":
            merge(out, nest(package, data))
            continue
        if isinstance(item, str):
            name, _, explicit = item.partition("@")
            child = name.lstrip("/") if name.startswith("/") or not folder else f"{folder}/{name}"
        elif isinstance(item, dict) and len(item) == 1:
            (group, option), = item.items()
            if option is None:
                continue
            if not isinstance(option, str) or group.startswith(("override ", "optional ")) \
                    or "@" in group:
                raise Unsupported(item)
            child = f"{folder}/{group}/{option}" if folder else f"{group}/{option}"
            explicit = ""
        else:
            raise Unsupported(item)
        header = package_header(conf_dir() / f"{child}.yaml")
        target = explicit or (header if header is not None else child.rpartition("/")[0])
        if package and not target.startswith("_global_") and (explicit or header):
            raise Unsupported(item)  # a relative package below another: left to Hydra
        if target.startswith("_global_"):
            child_package = target.removeprefix("_global_").strip(".")
        else:
            child_package = ".".join(p for p in (package, target.replace("/", ".")) if p)
        compose_into(out, child, child_package, depth + 1)
