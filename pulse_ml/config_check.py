"""Overrides checked against the conf tree with plain YAML, before Hydra is imported.

``pulse-ml <verb> key=value`` is checked here in milliseconds: a key that exists nowhere in the
verb's config, a group option with no file, or a value of the wrong type (a flag, a number) is
refused with the closest valid key or option. The verb's tree is read as Hydra composes it: the
primary ``conf/<verb>.yaml``, its group defaults and the shared configs of its defaults list
(``- data/demo``, ``- analysis/effects``, nested defaults, ``# @package _global_`` headers and
``@package`` in the list). Neither Hydra nor OmegaConf is imported (``config.py`` composes).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pulse_ml.env.faults import shorten
from pulse_ml.env.paths import conf_dir
from pulse_ml.errors import PulseError
from pulse_ml.yaml_limits import load_yaml_text

# Config groups whose value may also be a path to a YAML file outside the package.
FILE_GROUPS = ("features", "model", "judge", "labeler")
# Groups whose values are passed through free-form (estimator and feature options): not
# type-checked by quick_check.
_FREE_GROUPS = ("features", "model")
# Mappings whose keys are the user's (``tags.team=search``): any key below them is accepted,
# and ``config.compose`` adds it (Hydra would want ``+tags.team=...``).
FREE_MAPPINGS = ("tags", "declare")
# Numeric settings that also take a word (checked by the job).
_WORDS = {("plan", "design_effect"): ("estimate",)}


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a plain YAML file (catalogue entries, case studies) into a dict."""
    data = load_yaml_text(path, Path(path).read_text(encoding="utf-8"))  # aliases bounded
    return data if isinstance(data, dict) else {}


def flat_keys(data: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Every dotted key of a nested mapping (``data``, ``data.path``, ...)."""
    out = []
    for key, value in data.items():
        out.append(f"{prefix}{key}")
        if isinstance(value, Mapping):
            out += flat_keys(value, f"{prefix}{key}.")
    return out


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


def _package_header(path: Path) -> str | None:
    """The ``# @package <name>`` line among a config file's leading comments (None if none)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            return None
        match = re.match(r"#\s*@package\s+(\S+)", line)
        if match:
            return match.group(1)
    return None


def _merge(into: dict[str, Any], data: Mapping[str, Any]) -> None:
    """Deep-merge ``data`` into ``into`` (later values win, as in Hydra's composition)."""
    for key, value in data.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = dict(value) if isinstance(value, Mapping) else value


def _shared_tree(entry: str, group: str = "") -> tuple[str, dict[str, Any]]:
    """A config named in a defaults list (``data/demo``, ``analysis/alpha@infer``, ``/train``).

    Its own defaults that name configs (not ``group: option``) are merged below its values;
    the package comes from ``@...`` in the entry, else the file's ``# @package`` header, else
    its folder (``data/demo`` -> ``data``), as Hydra places it.

    Returns:
        ``(package, values)``; package "" is the top level. A missing file gives no values.
    """
    name, _, package = entry.partition("@")
    rel = name.lstrip("/") if name.startswith("/") or not group else f"{group}/{name}"
    path = conf_dir() / f"{rel}.yaml"
    if not path.is_file():
        return "", {}
    data = load_yaml(path)
    folder = rel.rpartition("/")[0]
    tree: dict[str, Any] = {}
    for item in data.get("defaults") or []:
        if isinstance(item, str) and item != "_self_":
            inner, values = _shared_tree(item, folder)
            _merge(tree, _nest(inner, values))
    _merge(tree, {k: v for k, v in data.items() if k != "defaults"})
    header = _package_header(path)
    if not package:
        package = "" if header == "_global_" or not folder else (header or folder)
    return package.replace("/", ".").removeprefix("_global_").strip("."), tree


def _nest(package: str, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` placed at a dotted package (``infer`` -> ``{"infer": values}``)."""
    for part in reversed([p for p in package.split(".") if p]):
        values = {part: values}
    return values


def quick_check(verb: str, overrides: list[str]) -> None:
    """Catch a misspelled key or group option with plain YAML, before Hydra is imported.

    Only certain mistakes are reported here (a top-level or nested key that exists nowhere in
    the verb's config, or a group option with no file); anything else is left to Hydra.

    Raises:
        PulseError: naming the override and the closest valid key or option.
    """
    groups = defaults_of(verb)
    tree = _shared_tree(f"/{verb}")[1]  # the primary config over its shared configs
    for group, option in groups.items():
        path = conf_dir() / group / f"{option}.yaml"
        if path.is_file():  # the group's keys, under the primary's values (pipeline's tuning)
            own = tree.get(group)
            tree[group] = load_yaml(path)
            _merge(tree[group], own if isinstance(own, Mapping) else {})
    keys = flat_keys(tree)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or key.startswith(("+", "~")):
            continue
        if key.split(".")[0] in FREE_MAPPINGS and "." in key and key.split(".")[0] in keys:
            continue  # a tag name of the user's (tags.team=search)
        if key.split(".")[0] in FILE_GROUPS and "." in key:  # the group may be a YAML file
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

