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
_TOKENS = re.compile(r'[{}"\\]')
_OBJECT_START = re.compile(r'\{\s*["}]')  # a JSON object opens with a key or closes at once
MAX_CANDIDATE_DEPTH = 64  # objects nested deeper than this are not tried on their own


class AnswerError(ValueError):
    """The answer is not valid for its prompt (the call is retried, then marked missing)."""


def _fenced(text: str) -> list[str]:
    """The contents of the ```-fenced blocks of ``text`` (a leading ``json`` tag dropped)."""
    blocks = text.split("```")[1:-1:2]  # linear, unlike a lazy regex over many fences
    return [re.sub(r"^(?:json|JSON)?\s*", "", b, count=1).strip() for b in blocks]


def _object_spans(text: str, strings: bool) -> list[tuple[int, int]]:
    """``(start, end)`` of every balanced ``{...}`` in ``text``, in order of start.

    One pass over the braces (and, with ``strings``, the quotes and backslashes inside braces,
    so a brace inside a JSON string does not count). Objects nested more than
    ``MAX_CANDIDATE_DEPTH`` deep are left out, so trying every span costs at most
    ``MAX_CANDIDATE_DEPTH`` passes over the text (the old try-at-every-``{`` was quadratic).
    """
    spans: list[tuple[int, int]] = []
    stack: list[int] = []
    in_string, skip = False, -1
    for match in _TOKENS.finditer(text):
        ch, pos = match.group(), match.start()
        if pos == skip:
            continue
        if strings and stack and (in_string or ch == '"'):
            if ch == "\\":
                skip = pos + 1
            elif ch == '"':
                in_string = not in_string
            continue
        if ch == "{":
            stack.append(pos)
        elif ch == "}" and stack:
            start = stack.pop()
            if len(stack) < MAX_CANDIDATE_DEPTH:
                spans.append((start, pos + 1))
    spans.sort()
    return spans


def _loads_dict(text: str, deep: list[bool]) -> dict | None:
    """``text`` as a JSON object, else None (``deep[0]`` set when it was nested too deeply)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    except RecursionError:  # e.g. 10,000 nested brackets: the decoder's own recursion limit
        deep[0] = True
        return None
    return value if isinstance(value, dict) else None


def extract_json(text: str) -> Any:
    """Return the first JSON object in ``text``.

    Tries the whole text, then each fenced block, then every balanced ``{...}`` in order of
    its start (linear in the text up to ``MAX_CANDIDATE_DEPTH``; a 200,000-character answer of
    braces is answered at once).

    Raises:
        AnswerError: if no JSON object is found, naming the answer as not JSON (or as JSON
            nested too deeply).
    """
    if not isinstance(text, str) or not text.strip():
        raise AnswerError("empty answer")
    deep = [False]
    for cand in [text.strip(), *_fenced(text)]:
        value = _loads_dict(cand, deep)
        if value is not None:
            return value
    tried: set[tuple[int, int]] = set()
    for strings in (True, False):  # string-aware first; plain braces if prose has stray quotes
        for start, end in _object_spans(text, strings):
            if (start, end) in tried or not _OBJECT_START.match(text, start):
                continue
            tried.add((start, end))
            value = _loads_dict(text[start:end], deep)
            if value is not None:
                return value
    if deep[0]:
        raise AnswerError("the answer's JSON is nested too deeply to read (thousands of levels)")
    raise AnswerError(f"the answer is not JSON (no JSON object in it): {text[:80]!r}")


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
