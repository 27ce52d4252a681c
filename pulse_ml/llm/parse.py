"""Parse LLM answers: JSON found even inside ``` fences or with prose around it."""

from __future__ import annotations

import json
import re
from typing import Any

SENTIMENTS = ("positive", "neutral", "negative")
TASK_CATEGORIES = {
    "fix bugs": "fix_bugs",
    "implement features": "implement_features",
    "create programs from scratch": "create_programs_from_scratch",
    "fix failing continuous integration": "fix_failing_ci",
    "fix merge conflicts": "fix_merge_conflicts",
    "write documentation": "write_documentation",
    "perform deployments": "perform_deployments",
    "perform data analysis": "perform_data_analysis",
}
FAILURE_MODES = ("misunderstood_intention", "did_not_follow_instruction", "insufficient_analysis",
                 "insufficient_testing", "insufficient_debugging", "incomplete_implementation",
                 "scope_creep")
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


class AnswerError(ValueError):
    """The answer is not valid for its prompt (the call is retried, then marked missing)."""


def extract_json(text: str) -> Any:
    """Return the first JSON object in ``text``.

    Tries the whole text, then each fenced block, then every ``{`` position.

    Raises:
        AnswerError: if no JSON object is found.
    """
    if not isinstance(text, str) or not text.strip():
        raise AnswerError("empty answer")
    candidates = [text.strip()] + [m.strip() for m in _FENCE.findall(text)]
    for cand in candidates:
        try:
            value = json.loads(cand)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise AnswerError(f"no JSON object in the answer: {text[:80]!r}")


def _norm(value: Any) -> str:
    return re.sub(r"[^a-z ]+", " ", str(value).lower()).strip()


def _squash(value: str) -> str:
    return re.sub(r"\s+", " ", value).strip()


def parse_sentiment_task(text: str) -> dict[str, str]:
    """Parse the first labeling prompt: ``user_sentiment`` and ``task_category``.

    Raises:
        AnswerError: missing field or a value outside the prompt's categories.
    """
    obj = extract_json(text)
    sentiment = obj.get("sentiment")
    if isinstance(sentiment, dict):
        sentiment = sentiment.get("classification")
    label = _squash(_norm(sentiment or ""))
    if label not in SENTIMENTS:
        raise AnswerError(f"sentiment.classification {sentiment!r} is not one of "
                          f"Positive/Negative/Neutral")
    task = _squash(_norm(obj.get("task_type", "")))
    category = TASK_CATEGORIES.get(task) or TASK_CATEGORIES.get(
        task.replace("ci", "continuous integration"))
    if category is None:
        snake = task.replace(" ", "_")
        category = snake if snake in TASK_CATEGORIES.values() else None
    if category is None:
        raise AnswerError(f"task_type {obj.get('task_type')!r} is not one of the 8 categories")
    return {"user_sentiment": label, "task_category": category}


def _yes_no(value: Any) -> int:
    if isinstance(value, dict):
        value = value.get("answer", value.get("value", value.get("label")))
    if isinstance(value, bool):
        return int(value)
    word = _norm(value).split(" ")[0] if value is not None else ""
    if word in ("yes", "true"):
        return 1
    if word in ("no", "false"):
        return 0
    raise AnswerError(f"{value!r} is not YES or NO")


def parse_failure_modes(text: str) -> dict[str, int]:
    """Parse the second labeling prompt: the 7 failure-mode flags as 0/1.

    Accepts ``{"scope_creep": "NO"}``, ``{"scope_creep": {"answer": "YES", ...}}`` and the
    same nested under ``issues`` / ``items``.

    Raises:
        AnswerError: a flag is missing or not YES/NO.
    """
    obj = extract_json(text)
    for key in ("issues", "items", "analysis", "results"):
        if isinstance(obj.get(key), dict) and not any(k in obj for k in FAILURE_MODES):
            obj = obj[key]
    lowered = {re.sub(r"^\[?item \d+\]?\s*", "", str(k).lower()).strip(): v
               for k, v in obj.items()}
    out = {}
    for key in FAILURE_MODES:
        if key not in lowered:
            raise AnswerError(f"missing {key}")
        try:
            out[key] = _yes_no(lowered[key])
        except AnswerError as exc:
            raise AnswerError(f"{key}: {exc}") from None
    return out


def parse_judge(text: str) -> dict[str, Any]:
    """Parse the judge prompt: ``likert_score`` (1-5), ``binary_satisfied``, ``explanation``.

    Raises:
        AnswerError: no likert score in 1..5.
    """
    obj = extract_json(text)
    raw = obj.get("likert_score", obj.get("likert", obj.get("score")))
    try:
        score = float(str(raw).strip().split("/")[0]) if raw is not None else float("nan")
    except ValueError:
        score = float("nan")
    if not (1 <= score <= 5) or score != round(score):
        raise AnswerError(f"likert_score {raw!r} is not an integer in 1..5")
    sat = obj.get("binary_satisfied")
    if isinstance(sat, str):
        sat = {"true": True, "false": False, "yes": True, "no": False}.get(sat.strip().lower())
    return {"likert_score": int(score),
            "binary_satisfied": sat if isinstance(sat, bool) else None,
            "explanation": str(obj.get("explanation", ""))[:2000]}


VALUE_TYPES = ("binary", "ordinal", "count", "ratio", "continuous")
POLARITIES = ("satisfaction", "dissatisfaction", "mixed")


def parse_discovery(text: str) -> list[dict[str, str]]:
    """Parse the feature-discovery prompt into a list of proposed features.

    Raises:
        AnswerError: no ``features`` list with at least one named feature.
    """
    obj = extract_json(text)
    feats = obj.get("features")
    if not isinstance(feats, list):
        raise AnswerError("no `features` list")
    out = []
    for f in feats:
        if not isinstance(f, dict) or not str(f.get("name", "")).strip():
            continue
        vtype = _norm(f.get("value_type", "")).split(" ")[0]
        pol = _norm(f.get("polarity", "")).split(" ")[0]
        out.append({"name": str(f["name"]).strip(),
                    "definition": str(f.get("definition", "")).strip(),
                    "value_type": vtype if vtype in VALUE_TYPES else "unknown",
                    "polarity": pol if pol in POLARITIES else "unknown"})
    if not out:
        raise AnswerError("the `features` list has no named feature")
    return out
