"""The main job, end to end: demo data if none, tune every family, register/promote, infer.

1. ``data.path`` (default: the demo table; created with ``pulse-ml simulate`` when absent),
2. ``pulse-ml train`` for each of ``families`` in order (Optuna, 5-fold CV, MLflow). With
   the default ``promotion.rule=significant`` the first family becomes champion when there is
   none, and a later one replaces it only if its paired out-of-fold MSE is significantly lower
   (its ``1 - promotion.alpha`` user-bootstrap interval below 0): families within the noise
   keep the first one
   (``promotion.rule=better`` promotes any strict improvement),
3. ``pulse-ml infer`` with the champion: naive vs PPI++ effect per case study,
4. a final summary: the families' out-of-fold metrics and the effects table (with the true
   effects beside them when the data came from ``pulse-ml simulate``).

Examples:
    pulse-ml pipeline
    pulse-ml pipeline families=[lightgbm] tuning.n_trials=10
    pulse-ml pipeline data.path=my_sessions.parquet features=no_llm
"""

from __future__ import annotations

import time
from dataclasses import replace

import pandas as pd

from pulse_ml import keys
from pulse_ml.config import Node, choice, compose, flag
from pulse_ml.errors import PulseError
from pulse_ml.report.tables import level_pct, say, text_table
from pulse_ml.sessions.readers import load_ground_truth
from pulse_ml.settings import bounded, declared, default_simulator_settings
from pulse_ml.simulate.demo import ensure_demo_data


def run(cfg: Node) -> dict:
    """Entry point of ``pulse-ml pipeline``."""
    from pulse_ml.inference.decisions import decision_lines
    from pulse_ml.inference.effects import CLUSTER_MODES
    from pulse_ml.inference.honest import PREDICTION_MODES
    from pulse_ml.jobs import infer as infer_job
    from pulse_ml.jobs import train as train_job
    from pulse_ml.models.factory import model_spec_from_mapping
    from pulse_ml.registry.models import champion_version

    start = time.perf_counter()
    families = [str(f) for f in (cfg.get("families") or [])]
    if not families:
        raise PulseError("families is empty: list at least one of conf/model/, e.g. "
                         "families=[lightgbm].")
    # Every setting is checked before the first family starts.
    specs = [model_spec_from_mapping(compose("train", [f"model={f}"]).model.to_dict())
             for f in families]
    base = train_job.settings_from_config(cfg, "pipeline", specs[0])
    infer_settings = infer_job.settings_from_config(compose("infer", [], extra={
        "data": {"path": str(cfg.data.path)},
        "alpha": bounded(cfg, "pipeline", "infer.alpha"),
        "ppi": {"predictions": choice(cfg, "infer.predictions", "pipeline", PREDICTION_MODES)},
        "clusters": choice(cfg, "infer.clusters", "pipeline", CLUSTER_MODES),
        "output": str(cfg.infer.output),
        "case_study_dirs": list(cfg.get("case_study_dirs") or []),
        "declare": declared(cfg)}))
    ensure_demo_data(base.data_path, flag(cfg, "data.simulate_if_missing", "pipeline", True),
                     default_simulator_settings)
    results = []
    for i, spec in enumerate(specs, 1):
        print(f"\n== [{i}/{len(specs)}] train {spec.name}")
        job = replace(base, model=spec, simulate_if_missing=False,
                      run=base.run.suffixed(spec.name))  # run_name=x: x-<family>
        results.append(train_job.run_settings(job))
    no_champion = champion_version() is None
    if no_champion:  # promotion.rule=manual (or promote=never) and nothing promoted before
        versions = ", ".join(r.version for r in results if r.version) or "none"
        print(f"\n== no champion: promotion.rule={base.promotion.rule}, promote="
              f"{'auto' if base.promotion.auto else 'never'}; registered versions: {versions}."
              "\n   Pick one with `pulse-ml promote version=N`, then run `pulse-ml infer`.")
        effects = None
    else:
        print("\n== infer with the champion")
        effects = infer_job.run_settings(replace(infer_settings, print_table=False,
                                                 run=base.run.suffixed("infer")))
    fams = pd.DataFrame([{
        "family": r.family, keys.CV_MSE: r.metrics.mse, "r": r.metrics.pearson,
        "vs_champion": "-" if r.paired is None else
        f"v{r.champion_version}: {r.paired.delta_mse:+.3f} [{r.paired.mse_ci_lower:+.3f}, "
        f"{r.paired.mse_ci_upper:+.3f}]",
        "expected_ci_red_%": 100 * r.ci_reduction,
        "version": r.version or "-", "champion": r.promoted} for r in results])
    truth = load_ground_truth(str(cfg.data.path))
    if effects is not None and effects.attrs.get("decisions"):
        print("\n== decisions")
        for line in decision_lines(effects.attrs["decisions"]):
            say(line)
    print("\n== summary")
    print(text_table(fams, digits_of={"expected_ci_red_%": 1}))
    rule = results[0].rule if results else ""
    first = bool(results) and results[0].promoted and results[0].promotion_reason.startswith(
        "no champion yet")
    say(f"features '{base.features.name}'; r = out-of-fold Pearson r; vs_champion = paired ΔMSE "
        f"with the champion of that moment ({level_pct(base.promotion.paired.alpha)}% user "
        "bootstrap); expected_ci_red_% = the CI reduction this predictor should give at this "
        "data's N/n (ci_red_% below: the one measured); champion = promoted by this run "
        "(cv_mae and ± std are in `pulse-ml compare`).")
    say(f"promotion.rule={rule}: "
        + ("the first family became champion (there was none); " if first else "")
        + ("a family replaces the champion only if significantly better."
           if rule == "significant" else "see each family's promotion line above."))
    if effects is None:
        print(f"\nno effects (no champion); {time.perf_counter() - start:.0f} s in all")
        return {"families": fams, "effects": None}
    print()
    print(text_table(infer_job.printable(effects, truth, infer_settings.settings.alpha)))
    aug = effects[effects["estimator"] == "augmented"]
    say(f"\nmean CI reduction {aug['ci_reduction_pct'].mean():.1f}% over "
        f"{len(aug)} case studies; {time.perf_counter() - start:.0f} s in all; results in "
        f"{cfg.infer.output}")
    return {"families": fams, "effects": effects}
