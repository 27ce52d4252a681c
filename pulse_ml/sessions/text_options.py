"""The settings of a ``text`` feature column: names, defaults, allowed values, search space.

A feature set declares a text column as ``user_text: {kind: text, encoders: [stack, vader],
stack_alpha: 3.0, search_space: {...}}``. This module is the contract of those settings, checked
when the feature set is built (``pulse-ml validate`` refuses a bad one) without importing the
encoders; :class:`pulse_ml.models.text.TextFeatures` takes exactly these settings (its
constructor defaults are :data:`TEXT_DEFAULTS`) and checks them with :func:`check_text_settings`.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from pulse_ml.errors import PulseError
from pulse_ml.sessions.search_space import ParamSpec, parse_search_space

__all__ = [
    "DIRECT_ENCODERS",
    "MAX_DIRECT_TFIDF",
    "STACK_INPUTS",
    "TEXT_DEFAULTS",
    "WORDLLAMA_DIMS",
    "check_text_settings",
    "parse_encoders",
    "text_options",
    "text_search_space",
    "text_search_space_of",
]

DIRECT_ENCODERS = ("stack", "vader", "wordllama", "tfidf")
STACK_INPUTS = ("tfidf", "hashing", "wordllama", "vader")
WORDLLAMA_DIMS = (64, 128, 256, 512, 1024)
MAX_DIRECT_TFIDF = 5000
# The settings of a text column and their defaults (``{kind: text}`` alone): a ridge sub-model
# on TF-IDF of word 1-2-grams plus the VADER scores, stacked honestly (one column).
TEXT_DEFAULTS: Mapping[str, Any] = {
    "encoders": "stack", "stack_on": "tfidf+vader", "stack_alpha": 3.0, "stack_folds": 5,
    "random_state": 0, "ngram_max": 2, "min_df": 2, "max_df": 1.0, "max_features": None,
    "sublinear_tf": True, "hashing_features": 2**18, "wordllama_dim": 256,
    "wordllama_pool": "turns", "wordllama_config": "l2_supercat", "turn_sep": "\n",
    "cache_dir": None,
}


def parse_encoders(value: str | Sequence[str], allowed: Sequence[str], what: str
                   ) -> tuple[str, ...]:
    """Normalize an encoder list: ``"stack+vader"``, ``"stack,vader"`` or ``["stack", "vader"]``.

    The ``+`` form lets Optuna tune the choice with a categorical of plain strings.

    Raises:
        PulseError: if a name is unknown or the list is empty.
    """
    if isinstance(value, str):
        names = [p.strip() for p in value.replace(",", "+").split("+") if p.strip()]
    else:
        names = [str(p).strip() for p in value]
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise PulseError(f"text feature: {what}={value!r}: "
                         + (f"unknown {', '.join(map(repr, unknown))}; " if unknown else
                            "empty; ")
                         + f"use names from {', '.join(allowed)} joined by '+' "
                         "(e.g. 'stack+vader').")
    return tuple(dict.fromkeys(names))


def check_text_settings(s: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Check a text column's settings (all of :data:`TEXT_DEFAULTS`' keys).

    Args:
        s: The settings, e.g. ``TextFeatures.get_params()``.

    Returns:
        ``(encoders, stack_on)`` as tuples of names (``stack_on`` empty without ``stack``).

    Raises:
        PulseError: naming the setting and the allowed values.
    """
    direct = parse_encoders(s["encoders"], DIRECT_ENCODERS, "encoders")
    inputs = parse_encoders(s["stack_on"], STACK_INPUTS, "stack_on") if "stack" in direct \
        else ()
    if "tfidf" in direct and not (s["max_features"] and
                                  int(s["max_features"]) <= MAX_DIRECT_TFIDF):
        raise PulseError("text feature: encoders includes 'tfidf' (raw TF-IDF columns into "
                         f"the model): set max_features <= {MAX_DIRECT_TFIDF}, or use "
                         "'stack' (a ridge sub-model on TF-IDF, one column).")
    checks = [("stack_alpha", s["stack_alpha"], float, 0.0, False),
              ("stack_folds", s["stack_folds"], int, 2, True),
              ("ngram_max", s["ngram_max"], int, 1, True),
              ("hashing_features", s["hashing_features"], int, 16, True)]
    for name, value, typ, low, inclusive in checks:
        try:
            v = typ(value)
        except (TypeError, ValueError):
            v = None
        if v is None or (v < low if inclusive else v <= low) or \
                (typ is int and float(value) != v):
            raise PulseError(f"text feature: {name}={value!r}: use a"
                             f"{'n integer' if typ is int else ' number'} "
                             f"{'>=' if inclusive else '>'} {low}.")
    min_df = s["min_df"]
    # numbers.Integral takes numpy integers too, without importing numpy (the CLI's early
    # value checks import this module)
    if not (isinstance(min_df, numbers.Integral) and min_df >= 1) and \
            not (isinstance(min_df, float) and 0.0 < min_df < 1.0):
        raise PulseError(f"text feature: min_df={min_df!r}: use a count >= 1 or a "
                         "share in (0, 1).")
    if not 0.0 < float(s["max_df"]) <= 1.0:
        raise PulseError(f"text feature: max_df={s['max_df']!r}: use a share in (0, 1].")
    if s["wordllama_pool"] not in ("turns", "text"):
        raise PulseError(f"text feature: wordllama_pool={s['wordllama_pool']!r}: use "
                         "'turns' or 'text'.")
    if int(s["wordllama_dim"]) not in WORDLLAMA_DIMS:
        raise PulseError(f"text feature: wordllama_dim={s['wordllama_dim']!r}: use one of "
                         f"{', '.join(map(str, WORDLLAMA_DIMS))}.")
    return direct, inputs


def text_options(column: str, node: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the options of a ``text`` column in a feature set (everything but ``kind``).

    Accepted keys are the settings of :data:`TEXT_DEFAULTS` plus ``search_space`` (Optuna
    ranges for those settings, in the ``conf/model`` syntax).

    Returns:
        The options as a plain dict (lists turned into ``+``-joined encoder strings).

    Raises:
        PulseError: naming the column and the unknown or invalid option.
    """
    allowed = set(TEXT_DEFAULTS)
    opts = {str(k): v for k, v in node.items() if k not in ("kind",)}
    unknown = sorted(set(opts) - allowed - {"search_space"})
    if unknown:
        raise PulseError(f"feature column '{column}' (text): unknown option(s) "
                         f"{', '.join(unknown)}. Use {', '.join(sorted(allowed))} or "
                         "search_space.")
    for key in ("encoders", "stack_on"):
        if key in opts and not isinstance(opts[key], str):
            opts[key] = "+".join(str(v) for v in opts[key])
    settings = {k: v for k, v in opts.items() if k != "search_space"}
    try:
        check_text_settings({**TEXT_DEFAULTS, **settings})
    except PulseError as exc:
        raise PulseError(f"feature column '{column}': {exc}") from None
    space = opts.get("search_space") or {}
    if not isinstance(space, Mapping):
        raise PulseError(f"feature column '{column}' (text): search_space must map setting "
                         "names to ranges, e.g. {stack_alpha: {type: float, low: 0.3, "
                         "high: 30, log: true}}.")
    bad = sorted(set(space) - allowed)
    if bad:
        raise PulseError(f"feature column '{column}' (text): search_space names unknown "
                         f"setting(s) {', '.join(bad)}; use {', '.join(sorted(allowed))}.")
    if space:
        opts["search_space"] = {str(k): dict(v) for k, v in space.items()}
        text_search_space_of(column, opts["search_space"])  # validates the ranges
    return opts


def text_search_space_of(column: str, space: Mapping[str, Any]) -> tuple[ParamSpec, ...]:
    """ParamSpecs named ``features__text_<column>__<setting>`` for one column's ranges."""
    prefixed = {f"features__text_{column}__{k}": v for k, v in space.items()}
    return parse_search_space(f"feature column '{column}'", prefixed)


def text_search_space(features) -> tuple[ParamSpec, ...]:
    """The Optuna search space the text columns of a feature set declare.

    Append it to the model family's: ``spec.search_space + text_search_space(features)``;
    :func:`pulse_ml.models.factory.build_pipeline` routes the ``features__...`` names to the
    pipeline's text steps.

    Args:
        features: A :class:`pulse_ml.sessions.feature_sets.FeatureSet`.

    Returns:
        Tuple of :class:`pulse_ml.sessions.search_space.ParamSpec`.
    """
    out: tuple = ()
    for spec in features.columns:
        if spec.kind == "text" and spec.options.get("search_space"):
            out += text_search_space_of(spec.name, spec.options["search_space"])
    return out
