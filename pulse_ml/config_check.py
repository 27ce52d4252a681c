"""Overrides checked against the conf tree with plain YAML, before Hydra is imported.

``pulse-ml <verb> key=value`` is checked here in milliseconds: a key that exists nowhere in the
verb's config, a group option with no file, or a value of the wrong type (a flag, a number) is
refused with the closest valid key or option. The verb's tree is read as Hydra composes it, by
:mod:`pulse_ml.config_tree` (the reader and merger :mod:`pulse_ml.config_plain` composes with).
Neither Hydra nor OmegaConf is imported (``config.py`` composes).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pulse_ml.config_tree import Unsupported, compose_into, read_conf
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
    """Group -> default option of ``conf/<verb>.yaml``'s defaults list (read as OmegaConf)."""
    out = {}
    for item in read_conf(conf_dir() / f"{verb}.yaml").get("defaults") or []:
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
    groups = defaults_of(verb)
    tree: dict[str, Any] = {}
    try:  # the verb's tree as Hydra composes it, read as OmegaConf reads YAML
        compose_into(tree, verb)
    except (Unsupported, OSError):
        return  # a form config_tree does not mirror: Hydra checks the overrides
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

