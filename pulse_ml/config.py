"""Compose Hydra configs for a verb (the only place that talks to Hydra)."""

from __future__ import annotations

from pathlib import Path

from pulse_ml.errors import PulseError
from pulse_ml.paths import conf_dir, project_root

# Config groups whose value may also be a path to a YAML file outside the package.
_FILE_GROUPS = ("features", "model", "judge", "labeler")


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


def compose(verb: str, overrides: list[str] | None = None):
    """Compose ``conf/<verb>.yaml`` with command-line overrides.

    Args:
        verb: The primary config name (one per CLI verb).
        overrides: Hydra override strings (``key=value``, ``group=option``, ``+key=value``);
            ``features=path/to/set.yaml`` (likewise ``model``, ``judge``, ``labeler``) loads a
            YAML file from outside the package.

    Returns:
        The composed ``DictConfig`` with interpolations resolved.

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
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        raise PulseError(f"pulse-ml {verb}: cannot compose the config: {first}\n"
                         f"  Check the override spelling; `pulse-ml {verb} --help` shows the "
                         f"keys and groups.") from None
    finally:
        GlobalHydra.instance().clear()
    OmegaConf.set_struct(cfg, False)
    for key, path in files.items():
        cfg[key] = OmegaConf.load(path)
        if "name" not in cfg[key]:
            cfg[key]["name"] = path.stem
    try:
        OmegaConf.resolve(cfg)
    except OmegaConfBaseException as exc:
        raise PulseError(f"pulse-ml {verb}: a config value is missing or wrong: {exc}") from None
    return cfg


def require(cfg, key: str, verb: str):
    """Return ``cfg[key]``, or raise a ``PulseError`` naming the key when it is ``???``."""
    from omegaconf import OmegaConf

    if OmegaConf.is_missing(cfg, key) or cfg.get(key) is None:
        raise PulseError(f"pulse-ml {verb}: `{key}` is required, e.g. `pulse-ml {verb} {key}=...`")
    return cfg[key]


def require_data_path(cfg, verb: str) -> Path:
    """Return ``cfg.data.path`` as a Path, or raise a ``PulseError`` saying how to set it."""
    from omegaconf import OmegaConf

    data = cfg.get("data") or {}
    if not data or OmegaConf.is_missing(data, "path") or not data.get("path"):
        raise PulseError(f"pulse-ml {verb}: `data.path` is required, e.g. "
                         f"`pulse-ml {verb} data.path=data/sessions.parquet`")
    return Path(str(data.path)).expanduser()


def number(cfg, key: str, verb: str, low: float | None = None, high: float | None = None,
           integer: bool = False, open_interval: bool = False) -> float:
    """Read a numeric setting (dotted ``key``) and check its range; one clear error otherwise.

    Args:
        cfg: Composed config.
        key: Dotted key, e.g. ``alpha`` or ``infer.alpha``.
        verb: Verb name for the message.
        low: Smallest allowed value (None = no bound; inclusive unless ``open_interval``).
        high: Largest allowed value (None = no bound; inclusive unless ``open_interval``).
        integer: Require a whole number (returned as int).
        open_interval: Exclude the bounds.
    """
    from omegaconf import OmegaConf

    raw = OmegaConf.select(cfg, key)
    try:
        value = float(raw)
        if integer:
            if value != int(value):
                raise ValueError
            value = int(value)
    except (TypeError, ValueError):
        kind = "a whole number" if integer else "a number"
        raise PulseError(f"pulse-ml {verb}: {key}={raw!r} is not {kind}.") from None
    bad_low = low is not None and (value <= low if open_interval else value < low)
    bad_high = high is not None and (value >= high if open_interval else value > high)
    if bad_low or bad_high:
        lo = "(" if open_interval else "["
        hi = ")" if open_interval else "]"
        raise PulseError(f"pulse-ml {verb}: {key}={raw} is out of range; use a value in "
                         f"{lo}{'-inf' if low is None else low}, "
                         f"{'inf' if high is None else high}{hi}.")
    return value


def choice(cfg, key: str, verb: str, allowed: dict[str, str]) -> str:
    """Read a setting (dotted ``key``) that must be one of ``allowed`` (value -> meaning).

    Raises:
        PulseError: naming the key, the value given and every allowed value with its meaning.
    """
    from omegaconf import OmegaConf

    value = str(OmegaConf.select(cfg, key))
    if value not in allowed:
        options = "; ".join(f"{k} = {v}" for k, v in allowed.items())
        raise PulseError(f"pulse-ml {verb}: {key}={value} is not an option. Use {options}.")
    return value

