"""The decision cards that lead ``report.html``: one per case study and treatment.

Each card shows what ``decisions.json`` holds for it: the decision and its reasons, the PPI++
effect and interval, the guardrails (effect, interval, margin, passed) and the checks (sample
ratio, rating rate per arm). Every value is escaped; the page stays free of scripts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from markupsafe import escape

COLORS = {"ship": "#2ca02c", "do_not_ship": "#d62728", "keep_collecting": "#ff7f0e",
          "invalid": "#7f7f7f"}
CSS = """
 .cards { display: flex; flex-wrap: wrap; gap: 0.8rem; }
 .card { border: 1px solid #ccc; border-radius: 6px; padding: 0.6rem 0.9rem;
         width: calc(50% - 0.4rem); box-sizing: border-box; font-size: 0.85rem; }
 .card h3 { margin: 0 0 0.3rem; } .card ul { margin: 0.2rem 0; padding-left: 1.1rem; }
 .decision { font-weight: bold; color: white; padding: 0.1rem 0.5rem; border-radius: 4px; }
 .card table { font-size: 0.8rem; }
 details { margin: 0.6rem 0; } summary { cursor: pointer; font-weight: 600; }
 .scroll { overflow-x: auto; }
"""


def _num(value: object, fmt: str = "+.3f") -> str:
    return "" if value is None else format(float(value), fmt)  # type: ignore[arg-type]


def _guardrail_rows(guardrails: Sequence[Mapping]) -> str:
    if not guardrails:
        return ""
    head = ("<tr><th class=text>guardrail</th><th>effect</th><th>interval</th>"
            "<th>margin</th><th class=text>non-inferior</th></tr>")
    rows = []
    for g in guardrails:
        unit = " (relative)" if g.get("relative") else ""
        passed = {True: "yes", False: "no: worse", None: "not yet"}[g.get("passed")]
        rows.append(
            f"<tr class=guardrail><td class=text>{escape(g['column'])} ({escape(g['better'])} "
            f"is better){escape(unit)}</td><td>{_num(g.get('effect'))}</td>"
            f"<td>[{_num(g.get('ci_lower'))}, {_num(g.get('ci_upper'))}]</td>"
            f"<td>{_num(g.get('margin'), 'g')}</td><td class=text>{passed}</td></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def card(record: Mapping) -> str:
    """One decision card (HTML) of a ``decisions.json`` record."""
    decision = str(record["decision"])
    rule = ("non-inferiority, margin " + format(float(record["margin"]), "g") + " stars"
            if record.get("rule") == "non_inferiority" else "superiority")
    level = 100 * float(record.get("ci_level") or 0.95)
    rates = ", ".join(f"{escape(arm)} {float(r):.1%}" for arm, r in
                      (record.get("rating_rate") or {}).items() if r is not None)
    srm = record.get("srm_p_value")
    reasons = "".join(f"<li>{escape(r)}</li>" for r in record.get("reasons") or [])
    warnings = "".join(f"<li class=warn>warning: {escape(w)}</li>"
                       for w in record.get("warnings") or [])
    title = f"{record['case_study']}: {record['treatment']} vs {record['control']}"
    return (
        f'<div class="card" data-case-study="{escape(record["case_study"])}" '
        f'data-treatment="{escape(record["treatment"])}">'
        f"<h3>{escape(title)}</h3>"
        f'<p><span class="decision" style="background:{COLORS.get(decision, "#555")}">'
        f"{escape(decision)}</span> <span class=rule>({escape(rule)})</span></p>"
        f"<p>PPI++ effect <span class=effect>{_num(record.get('effect'))}</span> stars, "
        f"{level:.4g}% interval <span class=interval>[{_num(record.get('ci_lower'))}, "
        f"{_num(record.get('ci_upper'))}]</span></p>"
        f"<ul>{reasons}{warnings}</ul>"
        f"{_guardrail_rows(record.get('guardrails') or [])}"
        f"<p class=note>checks: sample ratio p = <span class=srm>"
        f"{'' if srm is None else format(float(srm), '.3g')}</span> "
        f"({escape(str(record.get('srm_unit', 'session')))}s per arm); rated: {rates}</p>"
        "</div>")


def cards(records: Sequence[Mapping]) -> str:
    """Every card, in a wrapping row (two per line at 1280 px)."""
    return '<div class="cards" id="decisions">' + "".join(card(r) for r in records) + "</div>"
