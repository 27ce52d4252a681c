"""Model families from config: estimator + preprocessing as a scikit-learn Pipeline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from pulse_ml.errors import PulseError
from pulse_ml.models.preprocess import make_preprocessor
from pulse_ml.models.recalibrate import RECALIBRATE, IsotonicRecalibrated
from pulse_ml.sessions.feature_sets import FeatureSet
from pulse_ml.sessions.search_space import ParamSpec, parse_search_space


@dataclass(frozen=True)
class ModelSpec:
    """A model family as configured in ``conf/model/<name>.yaml``.

    Attributes:
        name: Family name (``random_forest`` …).
        estimator: Mapping with ``_target_`` and default keyword arguments.
        scale: Standardize features before the estimator (linear models).
        search_space: The hyper-parameters Optuna tunes (read only by the tuning code).
    """

    name: str
    estimator: Mapping[str, Any]
    scale: bool = False
    search_space: tuple[ParamSpec, ...] = field(default_factory=tuple)


def model_spec_from_mapping(node: Mapping[str, Any]) -> ModelSpec:
    """Build a :class:`ModelSpec` from a plain mapping (the composed ``model`` node)."""
    name = str(node.get("name", "model"))
    est = dict(node.get("estimator") or {})
    if "_target_" not in est:
        raise PulseError(
            f"model '{name}': `estimator._target_` is missing (the import path of "
            "a scikit-learn estimator, e.g. sklearn.ensemble.RandomForestRegressor)."
        )
    params = parse_search_space(f"model '{name}'", node.get("search_space") or {})
    return ModelSpec(
        name=name, estimator=est, scale=bool(node.get("scale", False)), search_space=params
    )


def suggest(trial, space: tuple[ParamSpec, ...]) -> dict[str, Any]:
    """Sample one value per hyper-parameter from an Optuna trial."""
    out: dict[str, Any] = {}
    for p in space:
        if p.type == "float":
            kw = {"log": p.log} if p.step is None else {"step": float(p.step)}
            out[p.name] = trial.suggest_float(p.name, float(p.low), float(p.high), **kw)
        elif p.type == "int":
            out[p.name] = trial.suggest_int(
                p.name, int(p.low), int(p.high), log=p.log, step=int(p.step or 1)
            )
        else:
            out[p.name] = trial.suggest_categorical(p.name, list(p.choices))
    return out


def instantiate(node: Any) -> Any:
    """Build objects from ``{_target_: "pkg.mod.Class", **kwargs}`` mappings (recursively).

    The ``_target_`` convention of Hydra configs, without importing Hydra below the config
    boundary; lists and plain mappings are converted to plain Python containers.
    """
    import importlib

    if isinstance(node, Mapping):
        args = {k: instantiate(v) for k, v in node.items() if k != "_target_"}
        target = node.get("_target_")
        if target is None:
            return args
        module, _, name = str(target).rpartition(".")
        try:
            factory = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ImportError(f"cannot import '{target}' ({exc})") from exc
        return factory(**args)
    if isinstance(node, list | tuple):
        return [instantiate(v) for v in node]
    return node


def build_pipeline(
    spec: ModelSpec, features: FeatureSet, params: Mapping[str, Any] | None = None
) -> Pipeline:
    """Instantiate preprocessing + estimator with ``params`` overriding the configured defaults.

    Names without ``__`` are estimator keyword arguments; names with ``__`` are pipeline
    parameters set after construction, e.g. ``features__text_user_text__stack_alpha`` for
    the ``stack_alpha`` setting of the text column ``user_text``. ``recalibrate: isotonic``
    (fixed or tuned) wraps the estimator in a cross-fitted isotonic map
    (:class:`pulse_ml.models.recalibrate.IsotonicRecalibrated`).
    """
    params = dict(params or {})
    nested = {k: v for k, v in params.items() if "__" in k}
    kwargs = {**spec.estimator, **{k: v for k, v in params.items() if "__" not in k}}
    recalibrate = str(kwargs.pop("recalibrate", "none"))  # models/recalibrate.py
    if recalibrate not in RECALIBRATE:
        raise PulseError(f"model '{spec.name}': recalibrate={recalibrate!r}; use one of "
                         f"{', '.join(RECALIBRATE)}.")
    try:
        estimator = instantiate(kwargs)
    except Exception as exc:  # noqa: BLE001 - surface config errors to the user
        raise PulseError(
            f"model '{spec.name}': cannot build the estimator "
            f"{spec.estimator.get('_target_')}: {exc}"
        ) from exc
    if recalibrate == "isotonic":
        estimator = IsotonicRecalibrated(estimator, random_state=int(kwargs.get(
            "random_state") or 0))
    steps = [("features", make_preprocessor(features))]
    if spec.scale:
        steps.append(("scale", StandardScaler(with_mean=True)))
    steps.append(("model", estimator))
    pipeline = Pipeline(steps)
    if nested:
        valid = pipeline.get_params(deep=True)
        unknown = sorted(k for k in nested if k not in valid)
        if unknown:
            steps_ = sorted(k for k in valid if k.startswith("features__text_")
                            and k.count("__") == 2)
            raise PulseError(
                f"model '{spec.name}': parameter(s) {', '.join(unknown)} name no setting of the "
                f"pipeline for feature set '{features.name}'. Text settings are named "
                "features__text_<column>__<setting>"
                + (f" (e.g. {steps_[0]})." if steps_ else "; this feature set has no text "
                   "column.")
            )
        pipeline.set_params(**nested)
    return pipeline
