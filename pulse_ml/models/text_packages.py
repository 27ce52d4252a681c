"""The packages of the text encoders: importing them, and what to pip install for them.

VADER (``vaderSentiment``; its lexicon ships inside the package) is in the base install;
WordLlama (``wordllama``; its weights and tokenizer ship inside the package, nothing is
downloaded) comes with the text extra, ``pip install 'pulse-ml[text]'``. A registered model
lists the packages its feature set can use (:func:`text_requirements`).
"""

from __future__ import annotations

import importlib

from pulse_ml.errors import PulseError
from pulse_ml.sessions.text_options import (
    DIRECT_ENCODERS,
    STACK_INPUTS,
    TEXT_DEFAULTS,
    parse_encoders,
)

__all__ = ["PIP", "TEXT_EXTRA", "require_package", "text_requirements"]

TEXT_EXTRA = "text"
PIP = {"vaderSentiment": "vaderSentiment>=3.3", "wordllama": "wordllama>=0.4"}
# How to get each encoder package back: VADER is a base dependency, WordLlama the text extra.
_INSTALL_HINT = {
    "vaderSentiment": ("it is part of the base install of pulse-ml; reinstall it: pip install "
                       f"'{PIP['vaderSentiment']}'"),
    "wordllama": (f"install the text extra: pip install 'pulse-ml[{TEXT_EXTRA}]' (or pip "
                  f"install '{PIP['wordllama']}')"),
}


def require_package(module: str, encoder: str):
    """Import an encoder package or say how to install it (base install or text extra).

    Args:
        module: Import path (``vaderSentiment.vaderSentiment``, ``wordllama`` ...).
        encoder: Encoder name, for the message.

    Raises:
        PulseError: if the package is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        hint = _INSTALL_HINT.get(top, f"install it: pip install '{PIP.get(top, top)}'")
        raise PulseError(
            f"text encoder '{encoder}' needs the package {top!r}, which is not installed: "
            f"{hint}; or drop '{encoder}' from the text column's encoders in the feature "
            "set.") from None


def text_requirements(features) -> list[str]:
    """The pip requirements of the text encoders a feature set can use (pyfunc model).

    Counts the configured ``encoders`` / ``stack_on`` and every categorical choice of the
    column's ``search_space``, so a tuned model never needs a package its environment lacks.

    Args:
        features: A :class:`pulse_ml.sessions.feature_sets.FeatureSet`.

    Returns:
        Sorted requirement strings, e.g. ``["vaderSentiment>=3.3"]``; empty without text.
    """
    needed: set[str] = set()
    for spec in features.columns:
        if spec.kind != "text":
            continue
        settings = {**TEXT_DEFAULTS,
                    **{k: v for k, v in spec.options.items() if k != "search_space"}}
        names = [settings["encoders"], settings["stack_on"]]
        for key in ("encoders", "stack_on"):
            names += list((spec.options.get("search_space") or {}).get(key, {}).get(
                "choices", ()))
        used = {n for value in names for n in parse_encoders(value, DIRECT_ENCODERS
                                                              + STACK_INPUTS, "encoders")}
        if "vader" in used:
            needed.add(PIP["vaderSentiment"])
        if "wordllama" in used:
            needed.add(PIP["wordllama"])
    return sorted(needed)
