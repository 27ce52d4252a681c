"""Ask the right sessions for a rating: request probabilities from the model's error model.

For every session of ``data.path`` (running case studies, unrated) the registered model
(``model_uri``, default the ``champion``) predicts the rating and the version's error model its
expected squared error; a session is asked with probability ``request_prob`` proportional to the
square root of that error, scaled so that each arm's mean probability is ``budget`` (or, with
``per_day=K`` and ``started_at``, so that about K sessions a day are asked, split evenly over
the arms by their volume), clipped to ``[request.min_prob, 1]``. ``ask`` is drawn from ``seed``.
Writes ``out`` (CSV: ``session_id, request_prob, ask``) atomically and logs an MLflow run linked
to the model version (the CSV is its artifact).

The loop: ask the sessions with ``ask = 1``; join ``request_prob`` (for EVERY session, asked or
not) and the ratings into the session table; ``pulse-ml infer`` then gives the active
(inverse-probability-weighted) PPI++ effect, corrected for non-response.

Examples:
    pulse-ml request data.path=running.parquet budget=0.1
    pulse-ml request data.path=running.parquet per_day=200 seed=7
    pulse-ml request data.path=running.csv budget=0.05 request.min_prob=0.01
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pulse_ml.inference.requests import ASKING, RequestResult, RequestSettings, request_file
from pulse_ml.report.tables import say, text_table


@dataclass(frozen=True)
class RequestJob:
    """Typed settings of ``pulse-ml request``."""

    model_uri: str
    data_path: str
    out: str
    settings: RequestSettings
    log_mlflow: bool = True


def settings_from_config(cfg) -> RequestJob:
    """Read the composed config once."""
    from pulse_ml.config import choice, flag, is_missing, number
    from pulse_ml.errors import PulseError

    budget = number(cfg, "budget", "request", optional=True)
    per_day = number(cfg, "per_day", "request", 0, None, open_interval=True, optional=True)
    if budget is not None and not 0 < budget <= 1:
        raise PulseError(f"budget={budget}: must be in (0, 1] (the expected share of each arm's "
                         "sessions asked, e.g. budget=0.1).")
    if (budget is None) == (per_day is None):
        raise PulseError("pulse-ml request: give either budget= (expected share of sessions "
                         "asked, in (0, 1]) or per_day= (expected asks per day, with "
                         "started_at), with the other null.")
    min_prob = number(cfg, "request.min_prob", "request", 0, 1, open_interval=False,
                      optional=True)
    if min_prob is not None and min_prob <= 0:
        raise PulseError(f"request.min_prob={min_prob}: must be in (0, 1] (every session "
                         "needs a positive chance to be asked), or null for budget / 4.")
    seed = number(cfg, "seed", "request", None, None, integer=True)
    chunk = number(cfg, "chunk_size", "request", 1, None, integer=True)
    threads = number(cfg, "threads", "request", 0, None, integer=True, optional=True)
    if is_missing(cfg, "data.path") or cfg.select("data.path") is None:
        raise PulseError("pulse-ml request: name the session table, data.path=sessions.parquet.")
    return RequestJob(
        model_uri=str(cfg.model_uri), data_path=str(cfg.data.path), out=str(cfg.out),
        settings=RequestSettings(budget=budget, per_day=per_day, min_prob=min_prob,
                                 seed=int(seed), chunk_size=int(chunk),
                                 threads=int(threads or 0),
                                 progress=flag(cfg, "progress", "request", True),
                                 asking=choice(cfg, "request.asking", "request", ASKING)),
        log_mlflow=flag(cfg, "log_mlflow", "request", True))


def run(cfg) -> RequestResult:
    """Entry point of ``pulse-ml request``."""
    from pulse_ml.env.atomic import atomic_file
    from pulse_ml.env.locations import check_outputs
    from pulse_ml.inference.requests import require_error_model
    from pulse_ml.names import write_csv
    from pulse_ml.registry.analysis import open_model, run_line
    from pulse_ml.registry.lookup import require_model
    from pulse_ml.registry.store import store_locations

    job = settings_from_config(cfg)
    check_outputs("request", [("out", job.out, "file")], [("data.path", job.data_path)],
                  store_locations())
    if Path(job.out).suffix.lower() != ".csv":
        from pulse_ml.errors import PulseError

        raise PulseError(f"out={job.out}: requests are written as CSV; use a .csv name.")
    require_model(job.model_uri)
    model = open_model(job.model_uri, write_store=job.log_mlflow)
    require_error_model(model.ensemble, job.model_uri)  # an old version: retrain, before work
    result = request_file(model.ensemble, job.data_path, job.settings, model_name=job.model_uri)
    with atomic_file(job.out) as partial:
        write_csv(result.requests, partial)
    s = job.settings
    how = (f"budget={s.budget:g} of each arm's sessions" if s.per_day is None
           else f"per_day={s.per_day:g} sessions a day (all arms)")
    err = model.ensemble.error_model
    say(f"{model.describe()}; error model '{err.choice}' "
        f"(out-of-fold MSE of the squared error {err.gain_pct:+.1f}% vs constant)")
    say(f"{'asking by sqrt(expected squared error)' if result.active else 'uniform asking'}, "
        f"{how}, seed={s.seed}")
    say(f"why: {result.why}")
    arms = result.arms.assign(case_study=result.arms["case_study"].replace("", "(none)"))
    arms = arms.sort_values(["case_study", "condition"], kind="stable").rename(columns={
        "case_study": "case study", "expected_asks": "expected", "min_prob": "min prob",
        "max_prob": "max prob", "width_ratio": "width ratio"})
    say(text_table(arms, digits=3))
    say(f"expected PPI++ width vs uniform asking at the same budget: {result.width_ratio:.3f} "
        f"(~{100 * result.labels_saved:.0f}% fewer ratings at equal width, if the error model "
        "holds on these sessions; width ratio: per arm)")
    for note in result.notes:
        say(f"note: {note}")
    say(f"{len(result.requests)} sessions in {result.seconds:.1f} s; "
        f"{int(result.requests['ask'].sum())} to ask; written to {job.out}")
    say("next: ask the sessions with ask=1, then add request_prob of EVERY session (asked or "
        "not) and the ratings to the session table and run `pulse-ml infer`.")
    if job.log_mlflow:
        say(run_line(_log(job, model, result)))
    return result


def _log(job: RequestJob, model, result: RequestResult) -> str:
    from pulse_ml import keys
    from pulse_ml.registry import runs

    s = job.settings
    return runs.log_inference_run(
        "request",
        tags={keys.KIND: keys.KIND_REQUEST, keys.MODEL_URI: job.model_uri,
              keys.MODEL_VERSION: model.version_number or ""},
        params={"data_path": job.data_path, "budget": s.budget, "per_day": s.per_day,
                "min_prob": "budget/4" if s.min_prob is None else s.min_prob, "seed": s.seed,
                "error_model": model.ensemble.error_model.choice,
                "asking": "active" if result.active else "uniform"},
        metrics={"width_ratio": result.width_ratio, "n_sessions": len(result.requests),
                 "n_ask": int(result.requests["ask"].sum()),
                 "expected_asks": float(result.requests["request_prob"].sum())},
        files=[Path(job.out)], model_version=model.version,
        description=(f"Rating requests for `{Path(job.data_path).name}` with model "
                     f"`{job.model_uri}`: expected width {result.width_ratio:.3f} x uniform."))
