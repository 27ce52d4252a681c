"""The Optuna sampler and pruner of a study: ``tuning.sampler`` and ``tuning.pruner``.

Every sampler is seeded (``tuning.sampler_seed``, default ``seed``, plus the worker's index),
so the same config gives the same trials. The sampler and the pruner are not stored in the
study: a resumed study (``tuning.study_name=...``) continues with the ones given now.
Optuna is imported lazily, as everywhere in ``training/``.
"""

from __future__ import annotations

from pulse_ml.errors import PulseError

SAMPLERS = {
    "tpe": "seeded TPE (the default)",
    "random": "seeded random search",
    "cmaes": "CMA-ES on the numeric parameters (needs `pip install cmaes`); categorical ones "
             "are drawn by a seeded random sampler (Optuna's fallback)",
    "qmc": "scrambled Sobol quasi-random points (seeded; Optuna marks it experimental)",
}
PRUNERS = {
    "median": "stop a trial whose running score after a fold is worse than the earlier "
              "trials' median there (from the 2nd fold, after 5 trials)",
    "hyperband": "Hyperband over the folds (successive halving in brackets)",
    "none": "every trial runs every fold (tuning.prune=false means the same)",
}
CMAES_INSTALL = "pip install cmaes"


def checked_sampler(sampler: str, verb: str = "train") -> str:
    """``sampler`` when it can run here; a one-line error when its package is missing.

    Raises:
        PulseError: ``cmaes`` without the ``cmaes`` package (checked before any work).
    """
    if sampler == "cmaes":
        try:
            import cmaes  # noqa: F401
        except ImportError:
            raise PulseError(f"pulse-ml {verb}: tuning.sampler=cmaes needs the cmaes package: "
                             f"{CMAES_INSTALL} (or pip install 'pulse-ml[tuning]'), or choose "
                             "tuning.sampler=tpe|random|qmc.") from None
    return sampler


def pruner_in_use(pruner: str, prune: bool, verb: str = "train") -> str:
    """The pruner a study uses: ``pruner``, or ``none`` when ``tuning.prune=false``.

    ``tuning.prune=false`` (the older switch) turns pruning off whatever the default
    ``tuning.pruner=median`` says; asking for ``hyperband`` with it is a contradiction.

    Raises:
        PulseError: ``prune=false`` together with ``pruner=hyperband``.
    """
    if prune or pruner in ("median", "none"):
        return pruner if prune else "none"
    raise PulseError(f"pulse-ml {verb}: tuning.prune=false turns pruning off (the same as "
                     f"tuning.pruner=none), but tuning.pruner={pruner} asks for it. Drop "
                     f"tuning.prune=false to prune with {pruner}, or use tuning.pruner=none.")


def make_sampler(sampler: str, seed: int, worker: int = 0):
    """The Optuna sampler ``sampler``, seeded with ``seed + worker``.

    ``qmc`` keeps one scrambled Sobol sequence per study (seed ``seed`` in every worker, as
    Optuna requires: the workers share the sequence's position through the study; categorical
    parameters take a coordinate of it too); its first trial, which fixes the search space,
    comes from a random sampler seeded ``seed + worker``. ``cmaes`` models the numeric
    parameters only: categorical ones come from such a random sampler (Optuna's fallback).
    """
    import warnings

    import optuna

    own = seed + worker
    if sampler == "tpe":
        return optuna.samplers.TPESampler(seed=own)
    if sampler == "random":
        return optuna.samplers.RandomSampler(seed=own)
    if sampler == "cmaes":
        return optuna.samplers.CmaEsSampler(
            seed=own, independent_sampler=optuna.samplers.RandomSampler(seed=own))
    if sampler == "qmc":
        with warnings.catch_warnings():  # chosen knowingly; SAMPLERS says it is experimental
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.QMCSampler(
                qmc_type="sobol", scramble=True, seed=seed,
                independent_sampler=optuna.samplers.RandomSampler(seed=own))
    raise PulseError(f"tuning.sampler={sampler}: use one of {', '.join(SAMPLERS)}.")


def make_pruner(pruner: str, n_splits: int):
    """The Optuna pruner ``pruner`` for trials that report one value per fold (steps 0..k-1).

    ``median``: ``MedianPruner(n_startup_trials=5, n_warmup_steps=1)``; ``hyperband``: the
    folds are the resource (``min_resource=1``, ``max_resource`` = the last fold's step,
    ``reduction_factor=3``; brackets are assigned by a hash of the study name and trial number,
    no randomness); ``none``: ``NopPruner``.
    """
    import optuna

    if pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=1)
    if pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=max(1, n_splits - 1),
                                              reduction_factor=3)
    if pruner == "none":
        return optuna.pruners.NopPruner()
    raise PulseError(f"tuning.pruner={pruner}: use one of {', '.join(PRUNERS)}.")
