"""The config boundary: compose Hydra configs and read them into plain, typed values.

This is the only module that imports Hydra or OmegaConf. :func:`compose` returns a read-only
:class:`Node` of plain Python values (interpolations resolved), so jobs and everything below
them never see a ``DictConfig``. Each job turns its node into a frozen settings dataclass with
:func:`number`, :func:`choice`, :func:`flag`, :func:`text` and :func:`require`, which name the key
and the allowed values when a setting is wrong.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pulse_ml.env.faults import shorten
from pulse_ml.env.paths import conf_dir, project_root
from pulse_ml.errors import PulseError
from pulse_ml.yaml_limits import check_aliases, load_yaml_text

# Config groups whose value may also be a path to a YAML file outside the package.
_FILE_GROUPS = ("features", "model", "judge", "labeler")
# Groups whose values are passed through free-form (estimator and feature options): not
# type-checked by quick_check.
_FREE_GROUPS = ("features", "model")
# Numeric settings that also take a word (checked by the job).
_WORDS = {("plan", "design_effect"): ("estimate",)}
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
        if sep and key in _FILE_GROUPS and value.endswith((".yaml", ".yml")):
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
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    _register_resolvers()
    kept, files = _split_file_overrides(list(overrides or []))
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3",
                                   job_name=verb):
            cfg = hydra_compose(config_name=verb, overrides=kept)
    except (HydraException, OmegaConfBaseException) as exc:
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


def _flat_keys(data: Mapping[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        out.append(f"{prefix}{key}")
        if isinstance(value, Mapping):
            out += _flat_keys(value, f"{prefix}{key}.")
    return out


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
        known = _flat_keys(compose(verb, rest).to_dict())
    except PulseError:
        return ""
    close = difflib.get_close_matches(wrong, known, n=1, cutoff=0.6)
    return f"  Did you mean {close[0]}?\n" if close else ""


def group_options(group: str) -> list[str]:
    """The options of a config group (``conf/<group>/*.yaml``)."""
    return sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))


def defaults_of(verb: str) -> dict[str, str]:
    """Group -> default option of ``conf/<verb>.yaml``'s defaults list (read with plain YAML)."""
    out = {}
    for item in load_yaml(conf_dir() / f"{verb}.yaml").get("defaults") or []:
        if isinstance(item, dict):
            out.update({str(k): str(v) for k, v in item.items()})
    return out


def quick_check(verb: str, overrides: list[str]) -> None:
    """Catch a misspelled key or group option with plain YAML, before Hydra is imported.

    Only certain mistakes are reported here (a top-level or nested key that exists nowhere in
    the verb's config, or a group option with no file); anything else is left to Hydra.

    Raises:
        PulseError: naming the override and the closest valid key or option.
    """
    primary = load_yaml(conf_dir() / f"{verb}.yaml")
    groups = defaults_of(verb)
    tree: dict[str, Any] = {k: v for k, v in primary.items() if k != "defaults"}
    for group, option in groups.items():
        path = conf_dir() / group / f"{option}.yaml"
        if path.is_file():
            tree.setdefault(group, load_yaml(path))
    keys = _flat_keys(tree)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or key.startswith(("+", "~")):
            continue
        if key.split(".")[0] in _FILE_GROUPS and "." in key:  # the group may be a YAML file
            problem = (key in keys and key.split(".")[0] not in _FREE_GROUPS
                       and _type_problem(verb, key, value, _select(tree, key)))
            if problem:
                raise PulseError(problem)
            continue
        if key in groups:
            if value.endswith((".yaml", ".yml")) or value in group_options(key):
                continue
            close = difflib.get_close_matches(value, group_options(key), n=1, cutoff=0.5)
            hint = f" Did you mean {key}={close[0]}?" if close else ""
            raise PulseError(f"pulse-ml {verb}: cannot compose the config: {key}={value}: no such "
                             f"option.{hint} Available options in '{key}': "
                             f"{', '.join(group_options(key))} (or a YAML file path).")
        if key in keys or any(k.startswith(f"{key}.") for k in keys):
            if key.split(".")[0] not in _FREE_GROUPS:
                problem = _type_problem(verb, key, value, _select(tree, key))
                if problem:
                    raise PulseError(problem)
            continue
        parent = key.rsplit(".", 1)[0] if "." in key else ""
        if parent and parent in keys and not isinstance(_select(tree, parent), Mapping):
            continue  # e.g. a list or a value replaced by a mapping: Hydra decides
        close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
        hint = f" Did you mean {close[0]}?" if close else ""
        raise PulseError(f"pulse-ml {verb}: cannot compose the config: unknown key '{key}'.{hint} "
                         f"`pulse-ml {verb} --help` lists the keys (prefix + to add a new one).")


def _type_problem(verb: str, key: str, value: str, default: Any) -> str | None:
    """Why ``key=value`` cannot be the type of its YAML default (a flag or a number), or None.

    Only the type is checked here (in milliseconds, before Hydra is imported); the job's
    settings check the range. null and interpolations are left to the job.
    """
    text_value = value.strip().strip("'\"")
    if text_value.lower() in ("null", "none", "~", "") or "${" in text_value \
            or text_value in _WORDS.get((verb, key), ()):
        return None
    if isinstance(default, bool):
        if text_value.lower() in ("true", "false", "1", "0", "yes", "no", "on", "off"):
            return None
        return f"pulse-ml {verb}: {key}={shorten(repr(text_value))} is not true or false."
    if isinstance(default, int | float):
        try:
            number = float(text_value)
        except ValueError:
            number = None
        if number is not None and number == number:
            return None
        kind = "a whole number" if isinstance(default, int) and _whole_only(key) else "a number"
        return (f"pulse-ml {verb}: {key}={shorten(repr(text_value))} is not {kind} (default "
                f"{default}); `pulse-ml {verb} --help` shows every key with its default.")
    return None


def _whole_only(key: str) -> bool:
    """Keys that count something (their settings refuse fractions)."""
    leaf = key.rsplit(".", 1)[-1]
    return leaf in ("seed", "n_trials", "n_splits", "workers", "replications", "permutations",
                    "n_boot", "concurrency", "retries", "max_sessions", "max_tokens",
                    "max_input_tokens", "n_labeled", "days", "events_limit", "mc_sessions",
                    "labeled_per_arm", "min_labeled_per_arm") or leaf.startswith("n_")


def _select(tree: Mapping[str, Any], dotted: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def to_yaml(cfg: Node | Mapping[str, Any]) -> str:
    """The config as YAML (for ``--cfg``, ``--help`` and the ``config.yaml`` artifact)."""
    import yaml

    plain = cfg.to_dict() if isinstance(cfg, Node) else _plain(cfg)
    return yaml.safe_dump(plain, sort_keys=False, default_flow_style=False)


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a plain YAML file (catalogue entries, case studies) into a dict."""
    data = load_yaml_text(path, Path(path).read_text(encoding="utf-8"))  # aliases bounded
    return data if isinstance(data, dict) else {}


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
