"""The config boundary: compose Hydra configs and read them into plain, typed values.

This is the only module that imports Hydra or OmegaConf (and only when
:mod:`pulse_ml.config_plain` cannot read the composition without them). :func:`compose`
returns a read-only
:class:`Node` of plain Python values (interpolations resolved), so jobs and everything below
them never see a ``DictConfig``. Each job turns its node into a frozen settings dataclass with
:func:`number`, :func:`choice`, :func:`flag`, :func:`text` and :func:`require`, which name the key
and the allowed values when a setting is wrong. The check of overrides before Hydra is imported
(plain YAML, no Hydra) is in :mod:`pulse_ml.config_check`.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pulse_ml.config_check import FILE_GROUPS, FREE_MAPPINGS, flat_keys
from pulse_ml.env.faults import shorten
from pulse_ml.env.paths import conf_dir, project_root
from pulse_ml.errors import PulseError
from pulse_ml.yaml_limits import check_aliases

MISSING = "???"


class Node(Mapping):
    """A read-only view of a composed config: ``node.key``, ``node["key"]``, ``node.get``.

    Nested mappings come back as :class:`Node`; everything else is a plain value (lists are
    plain lists). :meth:`to_dict` gives a deep plain copy.
    """

    def __init__(self, data: Mapping[str, Any], path: str = ""):
        object.__setattr__(self, "_data", dict(data))
        object.__setattr__(self, "_path", path)

    def _wrap(self, key: str, value: Any) -> Any:
        if isinstance(value, Mapping) and not isinstance(value, Node):
            return Node(value, f"{self._path}{key}.")
        return value

    def __getitem__(self, key: str) -> Any:
        return self._wrap(key, self._data[key])

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__"):
            raise AttributeError(key)
        try:
            return self[key]
        except KeyError:
            raise PulseError(f"config key `{self._path}{key}` is not set.") from None

    def __setattr__(self, key: str, value: Any) -> None:
        raise TypeError("a composed config is read-only; pass overrides to compose() instead")

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Node({self._data!r})"

    def to_dict(self) -> dict[str, Any]:
        """A deep plain copy (nested dicts and lists)."""
        return _plain(self._data)

    def select(self, dotted: str, default: Any = None) -> Any:
        """The value at a dotted key (``tuning.n_trials``), or ``default`` when absent."""
        node: Any = self
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _register_resolvers() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("pulse_home"):
        OmegaConf.register_new_resolver("pulse_home", lambda: str(project_root()))


def _split_file_overrides(overrides: list[str]) -> tuple[list[str], dict[str, Path]]:
    """Pull out ``group=path/to/file.yaml`` overrides; Hydra only knows group options."""
    kept: list[str] = []
    files: dict[str, Path] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if sep and key in FILE_GROUPS and value.endswith((".yaml", ".yml")):
            path = Path(value).expanduser()
            if not path.is_file():
                raise PulseError(f"{key}={value}: no such file. Pass an option of conf/{key}/ "
                                 f"or the path of an existing YAML file.")
            files[key] = path.resolve()
        else:
            kept.append(item)
    return kept, files


def compose(verb: str, overrides: list[str] | None = None,
            extra: Mapping[str, Any] | None = None) -> Node:
    """Compose ``conf/<verb>.yaml`` with command-line overrides.

    Args:
        verb: The primary config name (one per CLI verb).
        overrides: Hydra override strings (``key=value``, ``group=option``, ``+key=value``);
            ``features=path/to/set.yaml`` (likewise ``model``, ``judge``, ``labeler``) loads a
            YAML file from outside the package.
        extra: Top-level values set after composition (e.g. a feature-set mapping handed over
            by another verb), replacing whole keys.

    Returns:
        The composed config as a read-only :class:`Node`, interpolations resolved.

    Raises:
        PulseError: when an override names an unknown key, option or file.
    """
    from pulse_ml.config_plain import compose_plain

    plain = compose_plain(verb, list(overrides or []))
    if plain is not None:  # Hydra's result, read as plain YAML (config_plain.py)
        plain.update(_plain(dict(extra or {})))
        return Node(plain)
    return hydra_compose_node(verb, overrides, extra)


def hydra_compose_node(verb: str, overrides: list[str] | None = None,
                       extra: Mapping[str, Any] | None = None) -> Node:
    """:func:`compose` through Hydra's compose API (every form of override)."""
    import yaml
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    _register_resolvers()
    kept, files = _split_file_overrides(list(overrides or []))
    # keys of the user's under a free mapping (tags.team=x, tags={team: x}): added or replaced
    kept = [f"++{o}" if o.partition("=")[0].split(".")[0] in FREE_MAPPINGS else o for o in kept]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3",
                                   job_name=verb):
            cfg = hydra_compose(config_name=verb, overrides=kept)
    except (HydraException, OmegaConfBaseException, yaml.YAMLError) as exc:  # YAML: dup keys
        message = (str(exc).strip() or repr(exc)).split("\nConfig search path:")[0].rstrip()
        hint = _did_you_mean(verb, message, kept)
        raise PulseError(f"pulse-ml {verb}: cannot compose the config: {message}\n"
                         f"{hint}  Check the override spelling; `pulse-ml {verb} --help` shows "
                         f"the keys and groups.") from exc
    finally:
        GlobalHydra.instance().clear()
    OmegaConf.set_struct(cfg, False)
    for key, path in files.items():
        cfg[key] = OmegaConf.load(check_aliases(path))  # no billion laughs (yaml_limits.py)
        if "name" not in cfg[key]:
            cfg[key]["name"] = path.stem
    try:
        data = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    except OmegaConfBaseException as exc:
        raise PulseError(f"pulse-ml {verb}: a config value is missing or wrong: {exc}") from exc
    data.update(_plain(dict(extra or {})))
    return Node(data)


def _did_you_mean(verb: str, message: str, overrides: list[str]) -> str:
    """A "did you mean" line for a misspelled key or group option ("" when none is close)."""
    import re

    option = re.search(r"Could not find '([^'/]+)/([^']+)'", message)
    if option:
        group, value = option.groups()
        known = sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))
        close = difflib.get_close_matches(value, known, n=1, cutoff=0.5)
        return f"  Did you mean {group}={close[0]}?\n" if close else ""
    key = re.search(r"Could not override '([^']+)'|Key '([^']+)' is not in struct", message)
    if not key:
        return ""
    wrong = key.group(1) or key.group(2)
    try:
        rest = [o for o in overrides if not o.lstrip("+~").startswith(f"{wrong}=")]
        known = flat_keys(compose(verb, rest).to_dict())
    except PulseError:
        return ""
    close = difflib.get_close_matches(wrong, known, n=1, cutoff=0.6)
    return f"  Did you mean {close[0]}?\n" if close else ""


def to_yaml(cfg: Node | Mapping[str, Any]) -> str:
    """The config as YAML (for ``--cfg``, ``--help`` and the ``config.yaml`` artifact)."""
    import yaml

    plain = cfg.to_dict() if isinstance(cfg, Node) else _plain(cfg)
    return yaml.safe_dump(plain, sort_keys=False, default_flow_style=False)


def expand_sweeps(overrides: list[str]) -> list[list[str]]:
    """One override list per combination of comma-separated sweep values (``-m a=1,2 b=x,y``).

    Uses only Hydra's public override parser (``Override.is_sweep_override`` and
    ``sweep_string_iterator``); the cartesian product follows the order of the overrides, as
    Hydra's basic sweeper does.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException as exc:
        raise PulseError(f"cannot parse the overrides: {exc}") from exc
    choices: list[list[str]] = []
    for item in parsed:
        key = item.get_key_element()
        if item.is_sweep_override():
            choices.append([f"{key}={value}" for value in item.sweep_string_iterator()])
        else:
            choices.append([item.input_line])
    return [list(combo) for combo in itertools.product(*choices)]


def is_missing(cfg: Mapping[str, Any], key: str) -> bool:
    """True when the dotted ``key`` is absent, null or ``???``."""
    value = cfg.select(key) if isinstance(cfg, Node) else cfg.get(key)
    return value is None or value == MISSING


def require(cfg: Node, key: str, verb: str) -> Any:
    """Return the value at dotted ``key``, or raise a ``PulseError`` naming it when unset."""
    if is_missing(cfg, key):
        raise PulseError(f"pulse-ml {verb}: `{key}` is required, e.g. `pulse-ml {verb} {key}=...`")
    return cfg.select(key)


def require_data_path(cfg: Node, verb: str) -> Path:
    """Return ``cfg.data.path`` as a Path, or raise a ``PulseError`` saying how to set it."""
    if is_missing(cfg, "data.path") or not cfg.select("data.path"):
        raise PulseError(f"pulse-ml {verb}: `data.path` is required, e.g. "
                         f"`pulse-ml {verb} data.path=data/sessions.parquet`")
    return Path(str(cfg.select("data.path"))).expanduser()


def number(cfg: Node, key: str, verb: str, low: float | None = None, high: float | None = None,
           integer: bool = False, open_interval: bool = False,
           optional: bool = False) -> Any:
    """Read a numeric setting (dotted ``key``) and check its range; one clear error otherwise.

    Args:
        cfg: Composed config.
        key: Dotted key, e.g. ``alpha`` or ``tuning.n_trials``.
        verb: Verb name for the message.
        low: Smallest allowed value (None = no bound; inclusive unless ``open_interval``).
        high: Largest allowed value (None = no bound; inclusive unless ``open_interval``).
        integer: Require a whole number (returned as int).
        open_interval: Exclude the bounds.
        optional: Return None when the value is null.

    Raises:
        PulseError: naming the key, the value given, the expected type and range.
    """
    raw = cfg.select(key)
    if optional and raw in (None, "", "none", "null"):
        return None
    kind = "a whole number" if integer else "a number"
    lo = "(" if open_interval else "["
    hi = ")" if open_interval else "]"
    allowed = (f"{lo}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi}")
    try:
        if isinstance(raw, bool):
            raise ValueError
        value = float(raw)
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError
        if integer:
            if value != int(value):
                raise ValueError
            value = int(value)
    except (TypeError, ValueError):
        raise PulseError(f"pulse-ml {verb}: {key}={shorten(repr(raw))} is not {kind}; use "
                         f"{kind} in {allowed}.") from None
    bad_low = low is not None and (value <= low if open_interval else value < low)
    bad_high = high is not None and (value >= high if open_interval else value > high)
    if bad_low or bad_high:
        raise PulseError(f"pulse-ml {verb}: {key}={shorten(raw)} is out of range; use a value in "
                         f"{allowed}.")
    return value


def choice(cfg: Node, key: str, verb: str, allowed: dict[str, str]) -> str:
    """Read a setting (dotted ``key``) that must be one of ``allowed`` (value -> meaning).

    Raises:
        PulseError: naming the key, the value given and every allowed value with its meaning.
    """
    raw = cfg.select(key)
    value = str(raw).lower() if isinstance(raw, bool) else str(raw)
    if value not in allowed:
        close = difflib.get_close_matches(value, list(allowed), n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        options = "; ".join(f"{k} = {v}" for k, v in allowed.items())
        raise PulseError(f"pulse-ml {verb}: {key}={shorten(value)} is not an option.{hint} "
                         f"Use {options}.")
    return value


def flag(cfg: Node, key: str, verb: str, default: bool | None = None) -> bool:
    """Read a true/false setting; ``1/0``, ``yes/no`` and ``on/off`` are accepted too."""
    raw = cfg.select(key, default)
    if isinstance(raw, bool):
        return raw
    text_value = str(raw).strip().lower()
    if text_value in ("true", "1", "yes", "on"):
        return True
    if text_value in ("false", "0", "no", "off"):
        return False
    raise PulseError(f"pulse-ml {verb}: {key}={shorten(repr(raw))} is not true or false.")


def text(cfg: Node, key: str, default: str | None = None) -> str | None:
    """Read an optional string setting: None for null/empty (and for ``none``)."""
    raw = cfg.select(key, default)
    if raw is None or str(raw).strip() in ("", "none", "null", MISSING):
        return None
    return str(raw)


def names(value: Any) -> list[str] | None:
    """Parse an "all / comma list / list" setting: None means all."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("all", "")):
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def mapping(cfg: Node, key: str) -> dict[str, Any]:
    """The plain dict at dotted ``key`` (empty when unset)."""
    value = cfg.select(key)
    if isinstance(value, Node):
        return value.to_dict()
    return dict(value or {})
