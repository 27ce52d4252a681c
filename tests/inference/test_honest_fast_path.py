"""``honest_data`` predicts through score's fast path and gives the old path's numbers.

The old path was ``CrossFitEnsemble.honest_predict`` (each fold pipeline on the whole frame)
and ``CrossFitEnsemble.honesty`` hashing every row; the new one is
:class:`~pulse_ml.models.fast_predict.FastPredictor` and hashes only labeled rows. Predictions,
the honesty report and the effects must be identical on the demo.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml import settings as cfg_io
from pulse_ml.config import compose
from pulse_ml.inference.effects import InferenceSettings, analyse, effects_frame
from pulse_ml.inference.honest import honest_data
from pulse_ml.jobs import train
from pulse_ml.models.crossfit import content_hash, fit_crossfit
from pulse_ml.models.factory import build_pipeline
from pulse_ml.sessions.case_studies import load_configured
from pulse_ml.training.family import training_data
from pulse_ml.training.folds import make_folds

PARAMS = {"lightgbm": {"n_estimators": 30, "num_leaves": 8},
          "random_forest": {"n_estimators": 20, "n_jobs": 1}}


def _ensemble(small_demo, family):
    cfg = compose("train", [f"data.path={small_demo}", f"model={family}"])
    table = cfg_io.load_table(cfg)
    spec = train.model_spec(cfg)
    labeled, y = training_data(table)
    folds = make_folds(len(y), 5, 42)
    return fit_crossfit(lambda: build_pipeline(spec, table.features, PARAMS[family]), labeled,
                        y, folds, table.features, spec.name)


def _old_honesty(ensemble, frame, labeled, used):
    """The report as the old code computed it: content hashes of every row."""
    content = content_hash(frame, ensemble.features)
    train_content = ensemble.oof["content"].to_numpy().astype("uint64")
    known, unmatched = labeled & used, labeled & ~used
    by_id = pd.Series(train_content, index=ensemble.oof["session_id"].astype(str))
    ids = frame["session_id"].astype(str)
    changed = int((by_id.reindex(ids[known]).to_numpy() != content[known]).sum())
    return int(np.isin(content[unmatched], train_content).sum()), changed


@pytest.mark.parametrize("family", sorted(PARAMS))
def test_honest_data_equals_the_old_prediction_path(small_demo, family):
    ensemble = _ensemble(small_demo, family)
    raw = pd.read_parquet(small_demo)
    # a renamed training session, a re-rated one and a shuffled order exercise every branch
    lab = np.flatnonzero(raw["rating"].notna().to_numpy())
    raw.loc[lab[0], "session_id"] = "renamed-0"
    raw.loc[lab[1], "rating"] = 6.0 - raw.loc[lab[1], "rating"]
    raw = raw.sample(frac=1.0, random_state=3).reset_index(drop=True)
    configured = load_configured()
    data = honest_data(raw, "demo.parquet", ensemble, configured)
    frame = data.table.frame
    old_preds, used = ensemble.honest_predict(frame)
    if family == "lightgbm":  # row-independent native code: bit for bit
        np.testing.assert_array_equal(data.predictions, old_preds)
    else:
        np.testing.assert_allclose(data.predictions, old_preds, rtol=0, atol=1e-12)
    assert data.n_with_oof == int((data.table.labeled & used).sum())
    report = ensemble.honesty(frame, data.table.labeled, used)
    assert (report.n_renamed_suspects, report.n_changed) == _old_honesty(
        ensemble, frame, data.table.labeled, used)
    assert report.n_renamed_suspects >= 1 and report.n_changed >= 1
    settings = InferenceSettings(n_permutations=200)
    new = effects_frame([analyse(data.table, data.predictions, s, settings)
                         for s in data.table.case_studies])
    old = effects_frame([analyse(data.table, old_preds, s, settings)
                         for s in data.table.case_studies])
    if family == "lightgbm":
        pd.testing.assert_frame_equal(new, old)
    else:
        pd.testing.assert_frame_equal(new, old, rtol=1e-9)


def test_case_study_rows_only_leave_infer_unchanged(small_demo):
    """``infer`` runs the model on the case studies' sessions only; its numbers do not move.

    Every other session gets NaN (or its out-of-fold prediction); the honesty report, the
    notes and the effects (plain and reweighted) equal those of predicting every session.
    """
    ensemble = _ensemble(small_demo, "lightgbm")
    raw = pd.read_parquet(small_demo)
    configured = load_configured()
    full = honest_data(raw, "demo.parquet", ensemble, configured)
    part = honest_data(raw, "demo.parquet", ensemble, configured, case_study_rows=True)
    frame = part.table.frame
    rows = frame["case_study"].isin([s.name for s in part.table.case_studies]).to_numpy()
    assert 0 < rows.sum() < len(rows)
    np.testing.assert_array_equal(part.predictions[rows], full.predictions[rows])
    known = ~np.isnan(part.predictions)
    assert not known.all()  # the model really skipped sessions
    np.testing.assert_array_equal(part.predictions[known], full.predictions[known])
    assert (part.n_with_oof, part.notes) == (full.n_with_oof, full.notes)
    for settings in (InferenceSettings(n_permutations=200),
                     InferenceSettings(n_permutations=200, reweight=True)):
        effects = [effects_frame([analyse(d.table, d.predictions, s, settings)
                                  for s in d.table.case_studies]) for d in (full, part)]
        pd.testing.assert_frame_equal(effects[0], effects[1])


@pytest.mark.parametrize("asked", [False, True])
def test_case_study_rows_only_leave_audit_and_monitor_unchanged(small_demo, asked):
    """``audit`` and ``monitor`` run the model on their case studies' sessions only.

    Their results (split-half and consistency checks, the truth check's intervals, the
    monitor's per-look table, stops and notes) equal those of predicting every session, also
    for a case study asked by a varying ``request_prob`` (weights from the in-study rows).
    """
    from pulse_ml.inference.audit import consistency, split_half
    from pulse_ml.inference.monitor import MonitorSettings, monitor

    ensemble = _ensemble(small_demo, "lightgbm")
    raw = pd.read_parquet(small_demo)
    if asked:  # varies within every arm; the labeled sessions stay as simulated
        raw["request_prob"] = np.random.default_rng(5).uniform(0.3, 1.0, len(raw))
    configured = load_configured()
    settings = InferenceSettings(n_permutations=200)
    for mode in ("crossfit", "in_sample"):
        full, part = (honest_data(raw, "demo.parquet", ensemble, configured, ["plan"], mode,
                                  case_study_rows=rows) for rows in (False, True))
        assert np.isnan(part.predictions).any() and (part.notes == full.notes)
        study = full.table.case_study("plan")
        runs = [(split_half(d.table, d.predictions, study, settings, 60, 3),
                 consistency(d.table, d.predictions, study, settings, 40, 0.5, 3),
                 analyse(d.table, d.predictions, study, settings).comparison)
                for d in (full, part)]
        (half, check, comp), (half2, check2, comp2) = runs
        assert (half.verdict, half.reason, half.notes) == (half2.verdict, half2.reason,
                                                           half2.notes)
        assert asked == bool(half.notes)  # the weighted path really ran
        for method, audit in half.audits.items():
            pd.testing.assert_frame_equal(audit.per_replication,
                                          half2.audits[method].per_replication)
        pd.testing.assert_frame_equal(check.per_replication, check2.per_replication)
        assert (comp.naive, comp.augmented) == (comp2.naive, comp2.augmented)
    full, part = (honest_data(raw, "demo.parquet", ensemble, configured, None, "crossfit",
                              case_study_rows=rows) for rows in (False, True))
    assert np.isnan(part.predictions).any()
    seen = [monitor(d.table, d.predictions, MonitorSettings(min_units_per_arm=5))
            for d in (full, part)]
    pd.testing.assert_frame_equal(seen[0].frame, seen[1].frame)
    pd.testing.assert_frame_equal(seen[0].stops, seen[1].stops)
    assert (seen[0].notes, seen[0].warnings, seen[0].targets) == (
        seen[1].notes, seen[1].warnings, seen[1].targets)
