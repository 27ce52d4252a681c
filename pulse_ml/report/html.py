"""One self-contained HTML report per inference: effects, forest plot, features, lineage.

Built with a Jinja2 template (autoescaped); images are embedded as data URIs and the page has no
script and loads nothing from the network, so MLflow's artifact viewer previews it as is.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from pulse_ml import keys
from pulse_ml.report.tables import estimator_label

MATCH_KEYS = (keys.MODEL_VERSION, keys.DATA_FINGERPRINT)  # a sibling result must match on both



def run_identity(version, frame: pd.DataFrame,
                 used: Iterable[str] = ()) -> dict[str, str | None]:
    """The :data:`MATCH_KEYS` of a run: its model version and the data fingerprint of its table.

    ``infer``, ``audit`` and ``monitor`` write these into their JSON so that report.html shows
    an audit or monitor result only beside the inference of the same model on the same data.
    The fingerprint covers the columns an analysis can depend on
    (:func:`~pulse_ml.sessions.fingerprint.analysis_columns`; ``used``: the model's features),
    not free text.
    """
    from pulse_ml.sessions.fingerprint import analysis_columns, data_fingerprint

    return {keys.MODEL_VERSION: None if version is None else str(version.version),
            keys.DATA_FINGERPRINT: data_fingerprint(frame, analysis_columns(frame, used))}


_TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>pulse-ml: {{ title }}</title>
<style>
 body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 70rem; color: #222; }
 h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
 h3 { font-size: 0.95rem; margin: 0.8rem 0 0.2rem; }
 table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
 th, td { border-bottom: 1px solid #ddd; padding: 0.25rem 0.6rem; text-align: right; }
 th { background: #f4f4f4; } td.text, th.text { text-align: left; }
 .warning { background: #fdecea; border-left: 4px solid #d62728; padding: 0.6rem 1rem; }
 .note { color: #555; font-size: 0.85rem; }
 img { max-width: 100%; }
{{ card_css }}
</style>
</head>
<body>
<h1>{{ title }}</h1>
<p class="note">{{ subtitle }}</p>
{% if not valid %}<p class="warning">{{ invalid_reason }}</p>{% endif %}
{% for w in warnings %}<p class="warning">{{ w }}</p>{% endfor %}
{% if decisions %}<h2>Decisions</h2>
{{ decisions }}
<p class="note">The rule: {{ rule }}</p>{% endif %}
{% if forest %}<img alt="forest plot of the effects" src="data:image/png;base64,{{ forest }}">
{% endif %}
<details><summary>Effects (treatment − control, {{ level }}% intervals)</summary>
<div class="scroll">{{ effects_table }}</div></details>
<details><summary>Model lineage</summary>
<div class="scroll">{{ lineage_table }}</div></details>
{% for section in sections %}
<details><summary>{{ section.title }}</summary>
{% if section.note %}<p class="note">{{ section.note }}</p>{% endif %}
<div class="scroll">{{ section.table }}</div></details>
{% endfor %}
{% for n in notes %}<p class="note">note: {{ n }}</p>{% endfor %}
</body>
</html>
"""


def html_table(frame: pd.DataFrame, digits: int = 3, table_id: str | None = None) -> str:
    """A DataFrame as an HTML table (numbers right-aligned, text left; escaped)."""
    from markupsafe import escape

    cols = list(frame.columns)
    numeric = {c: pd.api.types.is_numeric_dtype(frame[c]) and
               not pd.api.types.is_bool_dtype(frame[c]) for c in cols}

    def cell(value, col) -> str:
        if value is None or (isinstance(value, float) and pd.isna(value)):
            text = ""
        elif isinstance(value, bool):
            text = "yes" if value else "no"
        elif isinstance(value, float):
            text = f"{value:.{digits}f}"
        else:
            text = str(value)
        cls = "" if numeric[col] else ' class="text"'
        return f"<td{cls}>{escape(text)}</td>"

    head = "".join(f'<th{"" if numeric[c] else " class=text"}>{escape(str(c))}</th>'
                   for c in cols)
    rows = "".join("<tr>" + "".join(cell(v.item() if hasattr(v, "item") else v, c)
                                    for v, c in zip(row, cols, strict=True)) + "</tr>"
                   for row in frame.itertuples(index=False))
    ident = f' id="{escape(table_id)}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _image(path: Path | None) -> str | None:
    if path is None or not path.is_file():
        return None
    return base64.b64encode(path.read_bytes()).decode("ascii")


def _built(path: Path) -> str:
    from datetime import UTC, datetime

    stamp = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    return f"built {stamp:%Y-%m-%d %H:%M} UTC from {_short(path)}"


def _short(path: Path | str) -> str:
    """``folder/name`` of a result file: the page names no absolute local path."""
    path = Path(path)
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def _matches(doc: Mapping, run: Mapping[str, object]) -> bool:
    """Same model version and data fingerprint as this inference (both must be recorded)."""
    return all(doc.get(k) not in (None, "") and str(doc.get(k)) == str(run.get(k))
               for k in MATCH_KEYS)


def _nested_table(value: Mapping) -> pd.DataFrame:
    """``{name: {key: scalar}}`` as one row per name; ``{key: scalar}`` as one row."""
    if value and all(isinstance(v, Mapping) for v in value.values()):
        return pd.DataFrame([{"": estimator_label(name), **{k: v for k, v in row.items()
                                             if not isinstance(v, Mapping | list)}}
                             for name, row in value.items()])
    return pd.DataFrame([{k: v for k, v in value.items() if not isinstance(v, Mapping | list)}])


def _audit_section(path: Path) -> dict:
    """One audit JSON read generically.

    Its dict-valued parts (e.g. the split-half verdict per method) are tables of their own, its
    other scalar figures one key/value table; no key name is assumed.
    """
    data = json.loads(path.read_text())
    parts = []
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            parts.append(f"<h3>{_escape(key)}</h3>" + html_table(_nested_table(value)))
    flat = {k: v for k, v in data.items() if not isinstance(v, Mapping | list)}
    parts.append("<h3>other figures</h3>" + html_table(pd.DataFrame(
        {"key": list(flat), "value": [str(v) for v in flat.values()]})))
    return {"title": f"Audit: {data.get('case_study', path.stem)}", "note": _built(path),
            "table": "".join(parts)}


def _sibling_sections(root: Path, run: Mapping[str, object]) -> list[dict]:
    """Audit and monitor results beside this inference (``root/audit``, ``root/monitor``).

    A result is shown only when its JSON records the same model version and data fingerprint
    (:data:`MATCH_KEYS`) as this inference; the others are listed in one note as not matched.
    """
    sections, skipped = [], []
    for path in sorted(root.glob("audit/audit_*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            skipped.append(f"{_short(path)} (unreadable)")
            continue
        if _matches(doc, run):
            sections.append(_audit_section(path))
        else:
            skipped.append(_short(path))
    monitor, doc_path = root / "monitor" / "monitor.csv", root / "monitor" / "monitor.json"
    if monitor.is_file():
        try:
            doc = json.loads(doc_path.read_text()) if doc_path.is_file() else {}
        except (OSError, ValueError):
            doc = {}
        if _matches(doc, run):
            frame = pd.read_csv(monitor)
            last = frame.sort_values("look").groupby(["case_study", "estimator"]).tail(1)
            if "estimator" in last:
                last = last.assign(estimator=[estimator_label(e) for e in last["estimator"]])
            sections.append({"title": "Monitoring (last look)", "note": _built(monitor),
                             "table": html_table(last)})
        else:
            skipped.append(_short(monitor))
    if skipped:
        sections.append({"title": "Results of other runs (not shown)", "table": "",
                         "note": "from another run, not matched (model version or data "
                                 "fingerprint differ or are not recorded): " + ", ".join(skipped)})
    return sections


def _escape(text: str) -> str:
    from markupsafe import escape

    return str(escape(text))


def inference_report(path: Path, effects: pd.DataFrame, meta: Mapping[str, object],
                     lineage: Mapping[str, object], forest: Path | None = None,
                     features: pd.DataFrame | None = None, shift: pd.DataFrame | None = None,
                     warnings: Sequence[str] = (), valid: bool = True,
                     invalid_reason: str = "", results_root: Path | None = None,
                     decisions: Sequence[Mapping] = (), rule: str = "") -> Path:
    """Write ``report.html`` for one inference and return its path.

    Args:
        path: Where to write the page.
        effects: The effects table (one row per case study × estimator).
        meta: Run facts (model, mode, alpha, data, notes).
        lineage: The model's lineage (version, family, features, data digest, CV scores).
        forest: The forest plot PNG to embed.
        features: Per-arm feature comparison.
        shift: Labeled-vs-unlabeled shift table.
        warnings: Warnings to show at the top.
        valid: False for in-sample predictions (the page says so at the top).
        invalid_reason: The sentence that says why the intervals are not valid.
        results_root: Folder holding ``audit/`` and ``monitor/`` results to include (default:
            the folder above the page's); only those whose JSON records this ``meta``'s
            ``model_version`` and ``data_fingerprint`` are shown.
        decisions: The records of ``decisions.json``: one card each, at the top.
        rule: The decision rule's wording (shown under the cards).
    """
    from jinja2 import Environment

    from pulse_ml.report.decision_cards import CSS, cards
    from pulse_ml.report.tables import level_pct

    columns = [c for c in ("case_study", "control", "treatment", "estimator", "effect",
                           "ci_lower", "ci_upper", "ci_reduction_pct", "p_value",
                           "n_labeled_control", "n_labeled_treatment", "n_unlabeled_control",
                           "n_unlabeled_treatment") if c in effects]
    if "p_value_randomization" in effects and effects["p_value_randomization"].notna().any():
        at = columns.index("p_value") + 1  # inference=randomization: beside the asymptotic ones
        columns[at:at] = ["ci_lower_randomization", "ci_upper_randomization",
                          "p_value_randomization"]
    view = effects[columns]  # ci_reduction_pct is NaN (a blank cell) on naive rows
    if "estimator" in view:  # the page's word for the estimator: PPI++ (the files: augmented)
        view = view.assign(estimator=[estimator_label(e) for e in view["estimator"]])
    sections = []
    if features is not None and len(features):
        sections.append({"title": "Features per arm", "note": "", "table": html_table(features)})
    if shift is not None and len(shift):
        sections.append({"title": "Labeled vs unlabeled sessions (label shift)",
                         "note": "PPI assumes labeled sessions are like unlabeled ones; "
                                 "|rank-biserial| ≥ 0.3 is flagged.",
                         "table": html_table(shift)})
    sections += _sibling_sections(results_root or path.parent.parent, meta)
    env = Environment(autoescape=True)
    page = env.from_string(_TEMPLATE).render(
        title=f"Effects of {len(effects['case_study'].unique())} design change(s)",
        subtitle=(f"model {meta.get('model')} (version {meta.get(keys.MODEL_VERSION)}, "
                  f"{meta.get(keys.MODEL_FAMILY)}, features '{meta.get(keys.FEATURE_SET)}'); "
                  f"{meta.get('mode')} predictions; data {Path(str(meta.get('data'))).name}"),
        level=level_pct(float(meta.get("alpha", 0.05))),
        effects_table=_markup(html_table(view, table_id="effects")),
        forest=_image(forest),
        lineage_table=_markup(html_table(pd.DataFrame(
            {"key": list(lineage), "value": [str(v) for v in lineage.values()]}))),
        sections=[{**s, "table": _markup(s["table"])} for s in sections],
        notes=list(meta.get("notes") or []), warnings=list(warnings), valid=valid,
        invalid_reason=invalid_reason, card_css=_markup(CSS), rule=rule,
        decisions=_markup(cards(decisions)) if decisions else "")
    path.write_text(page, encoding="utf-8")
    return path


def _markup(html: str):
    from markupsafe import Markup

    return Markup(html)  # built by html_table from escaped cells
