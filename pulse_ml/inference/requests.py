"""Whom to ask for a rating: request probabilities for a large unrated session table.

Streams the table in chunks like :mod:`pulse_ml.inference.scoring` (only ``session_id``, the
arm columns, ``started_at`` with a daily budget, and the model's features), predicts each
session with the registered ensemble and its squared error with the version's error model
(:class:`pulse_ml.models.error_model.ErrorModel`), then scales ``pi ~ sqrt(error)`` to the
budget per arm (and day) with :func:`pulse_ml.stats.active_design.scale_to_budget` and draws
``ask`` from the seed. Every arm gets the same budget.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pulse_ml.errors import DataError, PulseError
from pulse_ml.sessions.readers import count_rows, input_columns, iter_chunks
from pulse_ml.sessions.table import (
    TIME_COLUMN,
    chunk_notes,
    missing_columns_error,
    parse_started_at,
    validate_chunk,
)
from pulse_ml.stats.active_design import labels_saved, scale_to_budget, width_ratio

ID = "session_id"
ARM_COLUMNS = ("case_study", "condition")


@dataclass(frozen=True)
class RequestSettings:
    """How to ask: expected share (``budget``) or daily count (``per_day``), floor, seed."""

    budget: float | None = 0.1
    per_day: float | None = None
    min_prob: float | None = None  # None: budget / 4 (weights at most 4x a uniform one)
    seed: int = 0
    chunk_size: int = 100_000
    threads: int = 0
    progress: bool = True
    asking: str = "auto"  # a key of ASKING


@dataclass(frozen=True)
class RequestResult:
    """The requests and what they are expected to buy."""

    requests: pd.DataFrame  # session_id, request_prob, ask
    arms: pd.DataFrame      # per arm: sessions, expected asks, asks drawn, width ratio
    width_ratio: float      # expected active / uniform PPI++ width at the same budget
    seconds: float
    notes: tuple[str, ...] = ()
    active: bool = True     # asked by the error model (False: uniform asking, see ``why``)
    why: str = ""           # the gate's sentence (:func:`asking_gate`)

    @property
    def labels_saved(self) -> float:
        """Share of ratings saved at equal width vs uniform asking (expected)."""
        return labels_saved(self.width_ratio)


def require_error_model(ensemble, model_name: str):
    """The version's error model, or one message: retrain (an old version has none)."""
    err = getattr(ensemble, "error_model", None)
    if err is None:
        raise PulseError(f"{model_name} has no error model: it was registered before "
                         "`pulse-ml request` existed, and the request probabilities come from "
                         "the expected squared error learned at train time. Retrain it "
                         "(`pulse-ml train`, then promote it or pass model_uri=...) and run "
                         "request again.")
    return err


ASKING = {"auto": "by the error model only when its honest expected saving clears the gate "
                  "(>= 10% of labels, bootstrap lower bound > 0), else uniform",
          "active": "by the error model whatever the gate says (experts; the weights may cost "
                    "more than they save)",
          "uniform": "every session of an arm with the budget"}


def asking_gate(err_model, budget: float, asking: str = "auto"):
    """Ask by the error model at ``budget``, or uniformly? (:mod:`pulse_ml.stats.active_gate`).

    Judged on the honest out-of-fold residuals stored with the version, at the request's budget
    (the train-time gate used :data:`~pulse_ml.models.error_model.REFERENCE_BUDGET`).
    ``asking``: a key of :data:`ASKING`.
    """
    from pulse_ml.stats.active_gate import GateResult, active_gate

    if asking == "uniform":
        return GateResult(False, 0.0, 0.0, budget, "request.asking=uniform: uniform asking")
    if getattr(err_model, "model", None) is None:
        return GateResult(False, 0.0, 0.0, budget, "the error model found no error spread at "
                          "train time (the constant won): uniform asking")
    resid2 = getattr(err_model, "resid2", np.zeros(0))
    oof = getattr(err_model, "candidate_oof", np.zeros(0))
    if resid2.size == 0 or resid2.size != oof.size:
        if asking == "active":
            return GateResult(True, float("nan"), float("nan"), budget, "request.asking=active:"
                              " asking by the error model (no honest residuals stored to judge "
                              "it by)")
        return GateResult(False, 0.0, 0.0, budget, "this version stores no honest residuals to "
                          "judge its error model by (retrain it): uniform asking")
    gate = active_gate(oof, resid2, err_model.users, budget)
    if asking == "active" and not gate.active:
        return GateResult(True, gate.saved, gate.lower, budget, "request.asking=active: asking "
                          f"by the error model although the gate says: {gate.reason}")
    return gate


def _read(ensemble, path: Path, settings: RequestSettings, model_name: str,
          errors: bool = True):
    """Per session: id, arm key, day (or None) and predicted squared error, chunk by chunk.

    ``errors=False`` (uniform asking already decided): no predictions at all, the squared
    errors come back as None.
    """
    from pulse_ml.models.fast_predict import FastPredictor
    from pulse_ml.report.progress import progress_bar

    err_model = require_error_model(ensemble, model_name)
    present = input_columns(path)
    features = ensemble.features
    needed = [ID, "condition", *[c for c in features.names if c not in (ID, "condition")]]
    if settings.per_day is not None:
        needed.append(TIME_COLUMN)
    error = missing_columns_error(path, present, needed, f"{model_name} (request)")
    if error is not None:
        raise error
    cols = needed + (["case_study"] if "case_study" in present else [])
    predictor = FastPredictor(ensemble, threads=settings.threads) if errors else None
    ids, arms, days, err2 = [], [], [], []
    missing_text: dict[str, int] = {}
    n_rows = n_chunks = 0
    bar = progress_bar(total=count_rows(path), desc=f"requests {path.name}", unit="row",
                       unit_scale=True, disable=not settings.progress)
    try:
        for chunk in iter_chunks(path, cols, settings.chunk_size, features.of_kind("text")):
            n_chunks += 1
            chunk = validate_chunk(chunk, features, path, n_rows, n_chunks, missing_text)
            if predictor is not None:
                f = np.asarray(predictor.predict(chunk), dtype=float)
                err2.append(err_model.predict(chunk, f, candidate=True))
            ids.append(chunk[ID].astype(str).to_numpy())
            study = (chunk["case_study"].astype("string").fillna("") if "case_study" in chunk
                     else pd.Series("", index=chunk.index, dtype="string"))
            arms.append((study + "\x1f" + chunk["condition"].astype("string").fillna(""))
                        .to_numpy(dtype=object))
            if settings.per_day is not None:
                days.append(_days(chunk, path, n_rows))
            n_rows += len(chunk)
            bar.update(len(chunk))
    finally:
        bar.close()
    if n_rows == 0:
        raise DataError(str(path), ["the table has no rows. Expected one row per session."])
    day = np.concatenate(days) if days else None
    return (np.concatenate(ids), np.concatenate(arms), day,
            np.concatenate(err2) if errors else None, chunk_notes(missing_text, n_rows))


def _days(chunk: pd.DataFrame, path: Path, first: int) -> np.ndarray:
    parsed, bad, out_of_range = parse_started_at(chunk[TIME_COLUMN])
    wrong = bad | out_of_range | parsed.isna().to_numpy()
    if wrong.any():
        from pulse_ml.sessions.bad_rows import where_rows

        raise DataError(str(path), [f"column '{TIME_COLUMN}': missing or unparseable values in "
                                    f"{where_rows(chunk, wrong, first)}; per_day= needs the "
                                    "start time of every session (ISO 8601 or epoch seconds). "
                                    "Fix them, or ask by share with budget=."])
    naive = parsed.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()
    return naive.astype("datetime64[D]").astype(np.int64)


def request_file(ensemble, path: str | Path, settings: RequestSettings,
                 model_name: str = "the model") -> RequestResult:
    """Request probabilities and draws for every session of ``path`` (see module docstring)."""
    start = time.perf_counter()
    path = Path(path)
    err_model = require_error_model(ensemble, model_name)
    gate = None  # with budget= the gate's budget is known before reading: no wasted predictions
    if settings.per_day is None:
        gate = asking_gate(err_model, float(settings.budget), settings.asking)
    ids, arm, day, err2, notes = _read(ensemble, path, settings, model_name,
                                       errors=gate is None or gate.active)
    dup = pd.Series(ids).duplicated().to_numpy()
    if dup.any():
        from pulse_ml.sessions.bad_rows import where_rows

        raise DataError(str(path), [f"column '{ID}': duplicate ids in "
                                    f"{where_rows(pd.DataFrame({ID: ids}), dup)}. Each session "
                                    "must appear once."])
    arm_code, arm_names = pd.factorize(arm)
    if day is None:
        groups, n_groups = arm_code, arm_names.size
        budgets = np.full(n_groups, float(settings.budget))
    else:  # the day's budget per_day / (sessions that day), the same for every arm
        day_code, day_names = pd.factorize(day)
        per_day = np.bincount(day_code).astype(float)
        groups, uniq = pd.factorize(arm_code.astype(np.int64) * day_names.size + day_code)
        n_groups = uniq.size
        budgets = np.minimum(1.0, settings.per_day / per_day[uniq % day_names.size])
    min_prob = (budgets / 4.0 if settings.min_prob is None
                else np.minimum(settings.min_prob, budgets))
    if gate is None:
        gate = asking_gate(err_model, float(np.mean(budgets[groups])), settings.asking)
    uniform = budgets[groups]
    if gate.active:
        pi = scale_to_budget(err2, groups, budgets, min_prob)
    else:  # the same expected squared error everywhere: pi = the budget, exactly
        err2 = np.full(ids.size, float(err_model.mean_sq))
        pi = uniform.copy()
    ask = np.random.default_rng(settings.seed).random(pi.size) < pi
    per_arm = []
    for code, name in enumerate(arm_names):
        m = arm_code == code
        study, cond = str(name).split("\x1f", 1)
        per_arm.append({"case_study": study, "condition": cond, "sessions": int(m.sum()),
                        "expected_asks": float(pi[m].sum()), "asks": int(ask[m].sum()),
                        "min_prob": float(pi[m].min()), "max_prob": float(pi[m].max()),
                        "width_ratio": _ratio(err2[m], pi[m], uniform[m])})
    requests = pd.DataFrame({ID: ids, "request_prob": pi, "ask": ask.astype(np.int8)})
    return RequestResult(requests, pd.DataFrame(per_arm), _ratio(err2, pi, uniform),
                         time.perf_counter() - start, notes, gate.active, gate.reason)


def _ratio(err2: np.ndarray, pi: np.ndarray, uniform: np.ndarray) -> float:
    """Width ratio against uniform asking at each session's own group budget."""
    e2 = np.asarray(err2, float)
    den = float((e2 * (1.0 / uniform - 1.0)).sum())
    return 1.0 if den <= 0 else float(np.sqrt((e2 * (1.0 / pi - 1.0)).sum() / den))


__all__ = ["ASKING", "RequestResult", "RequestSettings", "asking_gate", "request_file",
           "require_error_model",
           "width_ratio"]
