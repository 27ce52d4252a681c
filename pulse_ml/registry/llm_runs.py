"""MLflow logging of LLM batches (labeling, judging, discovery)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from pulse_ml.llm.config import LLMConfig


def llm_params(cfg: LLMConfig) -> dict[str, object]:
    """Run params describing one endpoint (never the key itself)."""
    return {"model": cfg.model, "api_base": cfg.api_base or "", "concurrency": cfg.concurrency,
            "temperature": cfg.temperature, "retries": cfg.retries, "timeout": cfg.timeout,
            "max_input_tokens": cfg.max_input_tokens, "max_sessions": cfg.max_sessions,
            "price_in_per_1k": cfg.price_in_per_1k, "price_out_per_1k": cfg.price_out_per_1k}


def log_run(experiment: str, run_name: str, tags: Mapping[str, str],
            params: Mapping[str, object], metrics: Mapping[str, float],
            tables: Mapping[str, pd.DataFrame] | None = None,
            texts: Mapping[str, str] | None = None) -> str:
    """Log one run with params, metrics and CSV / text artifacts; return its run id."""
    import mlflow

    from pulse_ml.names import metric_key, write_csv
    from pulse_ml.redact import redact_values
    from pulse_ml.registry.runs import open_experiment
    from pulse_ml.registry.store import source_tags

    open_experiment(experiment)
    with mlflow.start_run(run_name=run_name, tags=redact_values(dict(tags))) as run:
        if source := source_tags():  # the commit of a git checkout
            mlflow.set_tags(source)
        mlflow.log_params(redact_values({k: "" if v is None else v for k, v in params.items()}))
        mlflow.log_metrics({metric_key(str(k)): float(v) for k, v in metrics.items()})
        with tempfile.TemporaryDirectory() as tmp:
            for name, frame in (tables or {}).items():
                path = Path(tmp) / name
                write_csv(frame, path)
                mlflow.log_artifact(str(path))
            for name, text in (texts or {}).items():
                path = Path(tmp) / name
                path.write_text(text, encoding="utf-8")
                mlflow.log_artifact(str(path))
        return run.info.run_id


def config_json(obj) -> str:
    """JSON of a config dataclass (for an artifact)."""
    from dataclasses import asdict, is_dataclass

    return json.dumps(asdict(obj) if is_dataclass(obj) else obj, indent=2, default=str)
