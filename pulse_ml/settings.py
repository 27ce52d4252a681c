"""Typed objects several verbs read from their config: feature set, case studies, simulator, LLM.

Each verb's own settings dataclass is built in its job module; this module holds the pieces they
share, so the feature-set and case-study keys are read the same way everywhere, and the ranges
of the analysis verbs' numbers (:data:`BOUNDS`), which :func:`check_early` checks before the CLI
imports a job module. Nothing heavy (pandas, numpy) is imported at module level.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from pulse_ml import keys
from pulse_ml.config import Node, is_missing, names, number, text
from pulse_ml.errors import PulseError
from pulse_ml.llm.config import LLMConfig
from pulse_ml.sessions.case_studies import CaseStudy, load_configured
from pulse_ml.sessions.feature_sets import FeatureSet, feature_set_from_mapping
from pulse_ml.settings_choices import check_choices

if TYPE_CHECKING:
    from pulse_ml.simulate.spec import SimulateSettings


def feature_set(cfg: Node) -> FeatureSet:
    """The feature set selected by ``features=<set>`` (or a YAML path)."""
    return feature_set_from_mapping(cfg.features.to_dict())


def case_study_config(cfg: Node) -> dict[str, CaseStudy]:
    """Configured case studies (shipped ones plus ``case_study_dirs``)."""
    extra = list(cfg.get("case_study_dirs") or [])
    return load_configured(extra, declared(cfg))


def declared(cfg: Node) -> dict:
    """``declare``: per case study, keys replacing its YAML file's (``{}`` = none)."""
    declare = cfg.get("declare")
    return declare.to_dict() if hasattr(declare, "to_dict") else dict(declare or {})


def selected_case_studies(cfg: Node) -> list[str] | None:
    """``case_studies`` from config: None = all present in the data."""
    return names(cfg.get("case_studies"))


@dataclass(frozen=True)
class Bound:
    """The allowed range of one numeric setting (the arguments of :func:`config.number`)."""

    low: float | None = None
    high: float | None = None
    integer: bool = False
    open_interval: bool = False
    optional: bool = False


_SHARE = Bound(0, 1, open_interval=True)  # alpha, hide_share: in (0, 1)
_COUNT = Bound(1, None, integer=True)  # replications, permutations: >= 1
_SEED = Bound(integer=True)

# Every numeric setting of the analysis verbs, by verb: read by their ``settings_from_config``
# (:func:`bounded`) and checked by :func:`check_early` before any heavy import, data or model.
BOUNDS: dict[str, dict[str, Bound]] = {
    "infer": {"alpha": _SHARE, "permutations": _COUNT, "seed": _SEED,
              "randomization.n_permutations": _COUNT, "randomization.seed": _SEED},
    "monitor": {"alpha": _SHARE, "horizon_days": Bound(0, None, open_interval=True),
                "target_labels": Bound(0, None, open_interval=True, optional=True),
                "min_units_per_arm": Bound(2, None, integer=True), "seed": _SEED},
    "audit": {"alpha": _SHARE, "hide_share": _SHARE, "replications": _COUNT, "seed": _SEED,
              "split_half.replications": Bound(10, None, integer=True)},
    "pipeline": {"infer.alpha": _SHARE},
}
# The verbs whose runs take ``experiment``, ``run_name`` and ``tags`` (conf/tracking/run.yaml).
RUN_VERBS = ("train", "pipeline", "infer", "monitor", "audit")
# The key naming the case studies to analyse (``all``, a name or a list), by verb.
CASE_STUDY_KEYS = {"infer": "case_studies", "monitor": "case_study", "audit": "case_study"}


def bounded(cfg: Node, verb: str, key: str) -> Any:
    """The numeric setting ``key`` of ``verb``, checked against its :data:`BOUNDS` entry."""
    b = BOUNDS[verb][key]
    return number(cfg, key, verb, b.low, b.high, integer=b.integer,
                  open_interval=b.open_interval, optional=b.optional)


def audit_case_study(cfg: Node) -> str:
    """``audit``'s ``case_study`` (one name, required)."""
    if is_missing(cfg, "case_study") or cfg.get("case_study") == "":
        raise PulseError("pulse-ml audit: name the case study to audit, e.g. "
                         "`pulse-ml audit case_study=plan`.")
    return str(cfg.case_study)


def check_early(verb: str, cfg: Node) -> None:
    """Every value check of ``verb`` that needs no data, no model and no heavy import.

    The CLI calls it right after composing the config, before importing the verb's job module
    (pandas, scipy, MLflow): a range (``alpha=1.5``), a required case study or a case-study
    file or folder (``case_study_dirs``) is refused in well under a second. A case-study name
    is not refused here: one missing from the catalogue may be found in the data
    (:func:`pulse_ml.sessions.case_studies.resolve_case_studies`), so the jobs check names
    right after reading the table, before the model loads
    (:func:`pulse_ml.sessions.case_studies.check_selected`).

    Raises:
        PulseError: naming the key, the value and what is allowed.
    """
    check_choices(verb, cfg)  # a word of a choice setting (inference=, tuning.sampler=, ...)
    asymptotic = str(cfg.get("inference", "asymptotic")) == "asymptotic"
    for key in BOUNDS.get(verb, {}):
        if not (verb == "infer" and asymptotic and key.startswith("randomization.")):
            bounded(cfg, verb, key)  # randomization.* is read only when it is used
    if verb == "audit":
        audit_case_study(cfg)
    if verb in (*CASE_STUDY_KEYS, "pipeline", "validate"):
        case_study_config(cfg)  # every case-study YAML file and folder
    if verb in RUN_VERBS:
        run_labels(cfg, verb)  # experiment, run_name, tags


@dataclass(frozen=True)
class RunLabels:
    """Where a verb's MLflow runs go and what they are called, as set on the command line.

    ``experiment=...``, ``run_name=...`` and ``tags.<name>=...`` (conf/tracking/run.yaml).

    Attributes:
        experiment: The MLflow experiment; None = the verb's own (``pulse-train`` for train
            and pipeline's family runs, ``pulse-infer`` for infer, monitor and audit).
        run_name: The run's name; None = ``<what>-<first 8 characters of the run id>``,
            unique (``lightgbm-all-3f2a9c1e``).
        tags: Extra run tags ``(name, value)``, set beside pulse-ml's own.
    """

    experiment: str | None = None
    run_name: str | None = None
    tags: tuple[tuple[str, str], ...] = ()

    def experiment_or(self, default: str) -> str:
        """The chosen experiment, else ``default``."""
        return self.experiment or default

    def suffixed(self, part: str) -> RunLabels:
        """The labels of one of several runs of a command: ``run_name-<part>`` when named."""
        from dataclasses import replace

        return replace(self, run_name=f"{self.run_name}-{part}" if self.run_name else None)


# Tag names pulse-ml writes itself (its lookups read them): not settable with tags.<name>.
_RESERVED_TAGS = frozenset(v for k, v in vars(keys).items() if k.isupper() and isinstance(v, str))


def run_labels(cfg: Node, verb: str) -> RunLabels:
    """``experiment``, ``run_name`` and ``tags`` of a verb that logs runs (read once, checked).

    ``tags`` is a mapping: ``tags.team=search`` or ``'tags={team: search, ticket: 42}'``; a
    dotted name (``tags.team.lead=ana``) is one tag, ``team.lead``.

    Raises:
        PulseError: an empty or over-long name, a tag that is not a plain value, or a tag
            name that pulse-ml writes itself (``kind``, ``family``, ``mlflow.*``, ...).
    """
    def name(key: str, limit: int) -> str | None:
        value = text(cfg, key)
        if value is not None and (not value.strip() or len(value) > limit or "\n" in value):
            raise PulseError(f"pulse-ml {verb}: {key}={value[:60]!r}: give a name of 1 to "
                             f"{limit} characters on one line, or leave it unset.")
        return value.strip() if value is not None else None

    raw = cfg.get("tags") or {}
    if not isinstance(raw, Mapping):
        raise PulseError(f"pulse-ml {verb}: tags={str(raw)[:60]!r} is not a mapping; use "
                         "tags.team=search or 'tags={team: search, ticket: 42}'.")
    tags = []
    for key, value in _dotted(raw):
        if key in _RESERVED_TAGS or key.startswith("mlflow."):
            raise PulseError(f"pulse-ml {verb}: tags.{key}: pulse-ml sets the tag '{key}' "
                             "itself (its run lookups read it); choose another tag name.")
        if isinstance(value, Mapping | list) or value is None or len(key) > 250:
            raise PulseError(f"pulse-ml {verb}: tags.{key[:60]}={str(value)[:60]!r}: a tag is "
                             "a short name (<= 250 characters) and one plain value, e.g. "
                             "tags.team=search.")
        tags.append((key, str(value).lower() if isinstance(value, bool) else str(value)))
    return RunLabels(experiment=name("experiment", 250), run_name=name("run_name", 250),
                     tags=tuple(tags))


def _dotted(node: Mapping, prefix: str = "") -> list[tuple[str, Any]]:
    """``(name, value)`` pairs of a mapping, nested keys joined by dots (``tags.team.lead=x``)."""
    out = []
    for key, value in node.items():
        if isinstance(value, Mapping) and value:
            out += _dotted(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def load_table(cfg: Node, path: str | None = None):
    """Load and validate ``data.path`` with the configured feature set and case studies."""
    from pulse_ml.sessions.table import load_sessions

    return load_sessions(path or cfg.data.path, feature_set(cfg), case_study_config(cfg),
                         selected_case_studies(cfg))


def simulator_settings(cfg: Node) -> SimulateSettings:
    """The simulator's frozen ``SimulateSettings`` from a composed ``simulate`` config.

    Shared by ``simulate`` and by ``train``/``pipeline`` (which create the demo data on first
    use); every key is read once, with a message naming it when it is wrong.
    """
    from pulse_ml.config_check import load_yaml
    from pulse_ml.env.paths import catalog_dir
    from pulse_ml.simulate.spec import CaseStudySpec, SimulateSettings

    specs = []
    for name, effect in (cfg.get("effects") or {}).items():
        path = catalog_dir("case_studies") / f"{name}.yaml"
        if not path.is_file():
            known = sorted(p.stem for p in (catalog_dir("case_studies")).glob("*.yaml"))
            raise PulseError(f"pulse-ml simulate: effects.{name}: no case study {path}. "
                             f"Known: {', '.join(known)}; remove the key or add the YAML file.")
        case = load_yaml(path)
        try:
            value = float(effect)
        except (TypeError, ValueError):
            raise PulseError(f"pulse-ml simulate: effects.{name}={effect!r} is not a number "
                             f"(rating units, e.g. 0.05).") from None
        specs.append(CaseStudySpec(str(case.get("name", name)), str(case["control"]),
                                   str(case["treatment"]), value))
    v = "simulate"

    def user(key: str, default: float) -> float:
        if cfg.select(f"users.{key}") is None:
            return default
        return number(cfg, f"users.{key}", v, 0, None)

    return SimulateSettings(
        seed=number(cfg, "seed", v, integer=True),
        n_labeled=number(cfg, "n_labeled", v, 1, None, integer=True),
        unlabeled_ratio=number(cfg, "unlabeled_ratio", v, 0, None),
        signal=number(cfg, "signal", v), mean_rating=number(cfg, "mean_rating", v, 1, 5),
        case_studies=tuple(specs),
        labeled_per_arm=number(cfg, "labeled_per_arm", v, 1, None, integer=True),
        min_labeled_per_arm=number(cfg, "min_labeled_per_arm", v, 0, None, integer=True),
        default_condition=str(cfg.default_condition),
        extra_sessions_mean=user("extra_sessions_mean", 1.4),
        extra_sessions_dispersion=user("extra_sessions_dispersion", 0.25),
        rater_sd=user("rater_sd", 1.0),
        user_sd=user("user_sd", 0.45),
        label_message_elasticity=number(cfg, "label_message_elasticity", v),
        feature_shift_scale=number(cfg, "feature_shift_scale", v),
        mc_sessions=number(cfg, "mc_sessions", v, 1, None, integer=True),
        days=number(cfg, "days", v, 1, None, integer=True) if "days" in cfg else 21,
        start_date=_start_date(cfg),
        text_signal=(number(cfg, "text_signal", v, 0, None)
                     if cfg.select("text_signal") is not None else 0.5),
    )


def default_simulator_settings(out) -> SimulateSettings:
    """``conf/simulate.yaml``'s settings (the demo data) with ``out`` as the output folder."""
    from pulse_ml.config import compose

    return simulator_settings(compose("simulate", [f"out={out}"]))


def _start_date(cfg: Node) -> str:
    import pandas as pd

    raw = cfg.get("start_date", "2025-06-02")
    try:
        return pd.Timestamp(str(raw)).strftime("%Y-%m-%d")
    except (TypeError, ValueError):
        raise PulseError(f"pulse-ml simulate: start_date={raw!r} is not a date; use YYYY-MM-DD, "
                         "e.g. start_date=2025-06-02.") from None


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
