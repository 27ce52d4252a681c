"""Tune all 4 families x 30 trials x 5 folds on the default demo data: time, memory, r.

Run: python perf/train_bench.py [--trials 30]
Targets (issue): <= 5 min on 2 cores; best out-of-fold r >= 0.9 x the generator's Bayes rho.

``--vs-optuna`` (issue 25): CPU seconds of ``pulse-ml train`` (whole process: imports, MLflow,
refit, promotion, registration) next to the same Optuna study without MLflow (same table, folds,
objective, sampler and pruner; in memory) and to that study plus MLflow's own minimum for its
live trial runs (the floor of tracking it), each in its own subprocess, in one run:

    nice -n 10 python perf/train_bench.py --vs-optuna --trials 20 [--model lightgbm]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import demo_data, fresh_home, peak_rss_mb  # noqa: E402

PAPER = {"ordinal_logit": (1.39, 1.07, 0.24), "hist_gb": (1.44, 1.03, 0.27),
         "random_forest": (1.44, 1.02, 0.29)}


def plain_optuna(path: str, model: str, trials: int, mlflow_floor: bool = False) -> None:
    """The same study as ``pulse-ml train`` with Optuna only (no MLflow, no refit).

    ``mlflow_floor``: plus MLflow's own minimum for what ``train`` logs live: import it, open
    the existing store, one parent run, one nested run per trial (create, one ``log_batch``
    of its params and metrics, terminate). No model is logged or registered.
    """
    import optuna

    from pulse_ml.config import compose
    from pulse_ml.jobs import train
    from pulse_ml.sessions.table import load_sessions
    from pulse_ml.training.family import training_data, with_text_search_space
    from pulse_ml.training.folds import make_folds
    from pulse_ml.training.tuning import CVObjective, open_study

    job = train.settings_from_config(compose("train", [f"model={model}", f"data.path={path}",
                                                       f"tuning.n_trials={trials}"]))
    table = load_sessions(path, job.features, {}, only=[])
    tuning, spec = job.tuning, with_text_search_space(job.model, job.features)
    labeled, y = training_data(table)
    groups = labeled["user_id"].to_numpy() if tuning.group_by_user else None
    folds = make_folds(len(y), tuning.n_splits, tuning.cv_seed, groups)
    objective = CVObjective(labeled, y, folds, spec, job.features, tuning.objective,
                            tuning.pruner_used != "none")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = open_study(replace_storage(tuning), "plain", 0)
    if not mlflow_floor:
        study.optimize(objective, n_trials=trials)
        print(f"plain optuna best {study.best_value:.4f}")
        return
    import mlflow
    from mlflow.entities import Metric, Param

    client = mlflow.MlflowClient()
    client.search_experiments(max_results=1)
    exp = mlflow.set_experiment("floor")

    def log_trial(_study, trial) -> None:
        run = client.create_run(exp.experiment_id, tags={"mlflow.parentRunId": parent})
        metrics = [Metric(k, float(v), 0, 0) for k, v in
                   (trial.user_attrs.get("metrics") or {}).items()]
        client.log_batch(run.info.run_id, metrics=metrics,
                         params=[Param(k, str(v)) for k, v in trial.params.items()])
        client.set_terminated(run.info.run_id)

    with mlflow.start_run() as active:
        parent = active.info.run_id
        study.optimize(objective, n_trials=trials, callbacks=[log_trial])
        mlflow.log_metric("best", study.best_value)


def replace_storage(tuning):
    """``tuning`` kept in memory (plain Optuna's default)."""
    from dataclasses import replace

    return replace(tuning, storage=None)


def child_cpu(args: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system) of one subprocess of this script."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, __file__, *args], check=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def vs_optuna(model: str, trials: int, fresh_store: bool) -> None:
    """Print CPU s of plain Optuna and of ``pulse-ml train``, and their ratio (one run).

    The tracking store exists already (its schema made, untimed, as by any earlier command),
    unless ``fresh_store``: then the first ``train`` also pays MLflow's schema migrations.
    """
    home = fresh_home("pulse-train-vs-optuna-")
    path = demo_data(home)
    env = dict(os.environ)
    # the floor's own store, new or existing as train's (both pay or skip the migrations)
    floor_env = {**env, "MLFLOW_TRACKING_URI": f"sqlite:///{home / 'mlruns' / 'floor.db'}"}
    if not fresh_store:
        for e in (env, floor_env):
            subprocess.run([sys.executable, "-c", "from pulse_ml.registry import store; "
                            "store.connect()"], check=True, env=e)
    plain = child_cpu(["--child", "optuna", "--path", str(path), "--model", model,
                       "--trials", str(trials)], env)
    floor = child_cpu(["--child", "mlflow-floor", "--path", str(path), "--model", model,
                       "--trials", str(trials)], floor_env)
    pulse = child_cpu(["--child", "pulse", "--path", str(path), "--model", model,
                       "--trials", str(trials)], env)
    store = "a new store" if fresh_store else "an existing store"
    print(f"\n{model}, {trials} trials x 5 folds (CPU s, each in its own process; {store})")
    print(f"{'plain optuna':<22} {plain:8.1f}\n"
          f"{'optuna + MLflow floor':<22} {floor:8.1f} {floor / plain:8.2f}x\n"
          f"{'pulse-ml train':<22} {pulse:8.1f} {pulse / plain:8.2f}x (target <= 1.5x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--vs-optuna", action="store_true",
                        help="ratio of pulse-ml train to the same plain Optuna study")
    parser.add_argument("--model", default="lightgbm", help="family for --vs-optuna")
    parser.add_argument("--fresh-store", action="store_true",
                        help="--vs-optuna on a store without schema yet (first command ever)")
    parser.add_argument("--child", choices=["optuna", "mlflow-floor", "pulse"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child in ("optuna", "mlflow-floor"):
        return plain_optuna(args.path, args.model, args.trials, args.child == "mlflow-floor")
    if args.child == "pulse":
        from pulse_ml.cli import main as cli

        sys.argv = ["pulse-ml", "train", f"model={args.model}", f"data.path={args.path}",
                    f"tuning.n_trials={args.trials}", "progress=false"]
        return cli()
    if args.vs_optuna:
        return vs_optuna(args.model, args.trials, args.fresh_store)
    home = fresh_home("pulse-train-bench-")
    path = demo_data(home)
    truth = json.loads(path.with_name("ground_truth.json").read_text())

    from pulse_ml.config import compose
    from pulse_ml.jobs import train

    rows = []
    start = time.perf_counter()
    for family in ("ordinal_logit", "random_forest", "hist_gb", "lightgbm"):
        t0 = time.perf_counter()
        res = train.run(compose("train", [f"model={family}", f"data.path={path}",
                                          f"tuning.n_trials={args.trials}", "progress=false"]))
        rows.append((family, res.metrics, time.perf_counter() - t0))
    total = time.perf_counter() - start
    print(f"\n4 families x {args.trials} trials x 5 folds: {total:.1f} s wall, peak RSS "
          f"{peak_rss_mb():.0f} MB (target <= 300 s)")
    rho = truth["bayes_rho"]
    print(f"{'family':<14} {'mse':>6} {'mae':>6} {'r':>6} {'r/rho':>6} {'time_s':>7}   paper "
          "(mse / mae / r)")
    for family, m, sec in rows:
        paper = PAPER.get(family)
        ref = f"{paper[0]:.2f} / {paper[1]:.2f} / {paper[2]:.2f}" if paper else "-"
        print(f"{family:<14} {m.mse:6.3f} {m.mae:6.3f} {m.pearson:6.3f} {m.pearson / rho:6.2f} "
              f"{sec:7.1f}   {ref}")
    best = max(m.pearson for _, m, _ in rows)
    print(f"best r {best:.3f} vs Bayes rho {rho:.3f}: ratio {best / rho:.2f} (target >= 0.90)")


if __name__ == "__main__":
    main()
