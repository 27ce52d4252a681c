"""The words each verb's choice settings allow, checked before the job module is imported.

A choice setting (``inference=``, ``ppi.predictions=``, ``tuning.sampler=``, ``engine=``, ...)
is read by its job with :func:`pulse_ml.config.choice`, against a mapping of words to meanings
that lives beside the code using it (``inference/``, ``training/``: heavy imports). The CLI
checks the word here first (:func:`check_choices`, from :func:`pulse_ml.settings.check_early`),
so ``pulse-ml infer inference=asymptotc`` is refused with the closest word in well under a
second, before pandas, scipy or MLflow are imported. ``tests/test_settings_choices.py`` checks
that these words are exactly the keys of those mappings.
"""

from __future__ import annotations

import difflib
from typing import Any

from pulse_ml.env.faults import shorten
from pulse_ml.errors import PulseError

_PREDICTIONS = ("crossfit", "in_sample")  # inference.honest.PREDICTION_MODES
_CLUSTERS = ("user_id", "none")  # inference.effects.CLUSTER_MODES
_TRAINING = {
    "objective": ("cv_mse", "cv_pearson"),  # training.tuning.OBJECTIVES
    "tuning.sampler": ("tpe", "random", "cmaes", "qmc"),  # training.samplers.SAMPLERS
    "tuning.pruner": ("median", "hyperband", "none"),  # training.samplers.PRUNERS
    "cv.group_by": ("user_id", "none"),  # jobs.train.GROUP_MODES
    "promotion.rule": ("significant", "better", "manual"),  # training.promotion_rule.RULES
    "promote": ("auto", "never"),  # jobs.train.PROMOTE_MODES
}

# verb -> dotted key -> the allowed words (in the order the job lists them).
CHOICES: dict[str, dict[str, tuple[str, ...]]] = {
    "infer": {"ppi.predictions": _PREDICTIONS, "clusters": _CLUSTERS,
              "inference": ("asymptotic", "randomization", "both"),  # INFERENCE_MODES
              "randomization.statistic": ("studentized", "effect")},
    "monitor": {"ppi.predictions": _PREDICTIONS, "clusters": _CLUSTERS,
                "lambda_rule": ("joint", "arm")},  # inference.monitor.LAMBDA_RULES
    "audit": {"ppi.predictions": _PREDICTIONS, "clusters": _CLUSTERS,
              "reference": ("auto", "truth", "none")},  # jobs.audit.REFERENCES
    "train": _TRAINING,
    "pipeline": {**_TRAINING, "infer.predictions": _PREDICTIONS, "infer.clusters": _CLUSTERS},
    "score": {"engine": ("local", "spark")},
}


def check_choices(verb: str, cfg: Any) -> None:
    """Refuse a word that is not an option of a choice setting of ``verb`` (with did-you-mean).

    Keys absent from the config are skipped, and so are ``randomization.*`` keys when infer's
    ``inference`` is ``asymptotic`` (the job reads them only when they are used).

    Raises:
        PulseError: ``<key>=<word> is not an option. Did you mean <word>?`` and the words.
    """
    asymptotic = str(cfg.get("inference", "asymptotic")) == "asymptotic"
    for key, allowed in CHOICES.get(verb, {}).items():
        raw = cfg.select(key)
        if raw is None or (verb == "infer" and asymptotic and key.startswith("randomization.")):
            continue
        value = str(raw).lower() if isinstance(raw, bool) else str(raw)
        if value in allowed:
            continue
        close = difflib.get_close_matches(value, allowed, n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        raise PulseError(f"pulse-ml {verb}: {key}={shorten(value)} is not an option.{hint} Use "
                         f"one of: {', '.join(allowed)}.")
