"""Feature sets: which session-table columns a model uses and what kind each one is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pulse_ml.errors import PulseError
from pulse_ml.sessions.text_options import text_options
from pulse_ml.sessions.user_history import INPUTS, derived_columns, history_options
from pulse_ml.sessions.user_history import KIND as HISTORY

KINDS = ("categorical", "count", "flag", "numeric", "text", HISTORY)


@dataclass(frozen=True)
class FeatureSpec:
    """One feature column.

    Attributes:
        name: Column name in the session table.
        kind: ``categorical`` (strings, one-hot encoded), ``count`` (integer >= 0),
            ``flag`` (0/1), ``numeric`` (any finite float) or ``text`` (strings, encoded
            inside the CV folds by :class:`pulse_ml.models.text.TextFeatures`).
        values: Allowed values of a categorical column (empty = any string).
        options: Settings of a ``text`` column (encoders, stack_alpha, ..., search_space);
            see :func:`pulse_ml.sessions.text_options.text_options`.
        aliases: ``(alias, value)`` pairs: other spellings of an allowed value that the table
            may use (e.g. the paper's prompt's ``Fix Failing Continuous Integration`` for
            ``fix_failing_ci``). Values and aliases match ignoring case, spaces, ``-`` and
            ``_`` (see :func:`category_key`); the table gets the canonical value.

    A ``user_history`` feature (:mod:`pulse_ml.sessions.user_history`) is no table column: it
    reads ``user_id``, ``rating`` and ``started_at`` and gives the model five columns.
    """

    name: str
    kind: str
    values: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict, hash=False)
    aliases: tuple[tuple[str, str], ...] = ()

    def canonical(self) -> dict[str, str]:
        """:func:`category_key` of every allowed value and alias -> the allowed value."""
        lookup = {category_key(v): v for v in self.values}
        for alias, value in getattr(self, "aliases", ()):  # models pickled before aliases
            lookup.setdefault(category_key(alias), value)
        return lookup


def category_key(value: str) -> str:
    """The matching key of a category: lower case without spaces, ``-`` or ``_``.

    ``Fix Bugs``, ``fix-bugs`` and ``FIX_BUGS`` all give ``fixbugs``.
    """
    return "".join(ch for ch in str(value).casefold() if not (ch.isspace() or ch in "-_"))


@dataclass(frozen=True)
class FeatureSet:
    """A named, ordered set of feature columns."""

    name: str
    columns: tuple[FeatureSpec, ...] = field(default_factory=tuple)

    @property
    def names(self) -> list[str]:
        """Column names in order."""
        return [c.name for c in self.columns]

    @property
    def kinds(self) -> dict[str, str]:
        """Column name -> kind."""
        return {c.name: c.kind for c in self.columns}

    @property
    def input_names(self) -> list[str]:
        """The table columns the model reads.

        The feature columns, and ``user_id`` and ``rating`` when a ``user_history`` feature is
        in the set (``started_at`` is read when present, not required).
        """
        out = [c.name for c in self.columns if c.kind != HISTORY]
        if any(c.kind == HISTORY for c in self.columns):
            out += [c for c in INPUTS if c not in out]
        return out

    @property
    def model_names(self) -> list[str]:
        """The columns of the model's input frame.

        Each ``user_history`` feature's five derived columns stand in its place
        (:func:`pulse_ml.models.preprocess.feature_frame`).
        """
        out: list[str] = []
        for c in self.columns:
            out += derived_columns(c.name) if c.kind == HISTORY else [c.name]
        return out

    @property
    def history(self) -> tuple[FeatureSpec, ...]:
        """The ``user_history`` features of the set."""
        return tuple(c for c in self.columns if c.kind == HISTORY)

    def of_kind(self, *kinds: str) -> list[str]:
        """Names of the columns whose kind is one of ``kinds``."""
        return [c.name for c in self.columns if c.kind in kinds]


def feature_set_from_mapping(node: Mapping, default_name: str = "custom") -> FeatureSet:
    """Build a :class:`FeatureSet` from a config mapping ``{name, columns: {col: {kind, values}}}``.

    A ``text`` column takes its encoder settings beside ``kind``, e.g.
    ``user_text: {kind: text, encoders: [stack, vader], stack_alpha: 3.0}``; ``{kind: text}``
    alone is one column: a ridge sub-model on TF-IDF (word 1-2-grams) and VADER sentiment,
    stacked honestly (its training values come from an inner cross-fit).

    Raises:
        PulseError: if a column has an unknown kind or text option, or the set is empty.
    """
    name = str(node.get("name", default_name))
    columns = node.get("columns") or {}
    if not columns:
        raise PulseError(f"feature set '{name}': no columns. "
                         "Add `columns: {col: {kind: flag}}`.")
    specs = []
    for col, spec in columns.items():
        spec = spec or {}
        kind = str(spec.get("kind", "numeric"))
        if kind not in KINDS:
            raise PulseError(f"feature set '{name}', column '{col}': unknown kind '{kind}'. "
                             f"Use one of {', '.join(KINDS)}.")
        values = tuple(str(v) for v in (spec.get("values") or ()))
        options: dict[str, Any] = {}
        if kind == "text":
            if values:
                raise PulseError(f"feature set '{name}', column '{col}': a text column takes no "
                                 "`values`; remove them or use kind: categorical.")
            options = text_options(str(col), {k: v for k, v in spec.items()
                                              if k not in ("values", "aliases")})
        elif kind == HISTORY:
            options = history_options(name, str(col), spec)
        aliases = _aliases(name, str(col), values, spec.get("aliases") or {})
        specs.append(FeatureSpec(name=str(col), kind=kind, values=values, options=options,
                                 aliases=aliases))
    return FeatureSet(name=name, columns=tuple(specs))


def _aliases(set_name: str, col: str, values: tuple[str, ...],
             raw: Mapping) -> tuple[tuple[str, str], ...]:
    """Check ``aliases: {alias: value}`` of one column: every target is an allowed value."""
    if not isinstance(raw, Mapping):
        raise PulseError(f"feature set '{set_name}', column '{col}': aliases must be a mapping "
                         "`{alias: allowed value}`.")
    out = []
    for alias, value in raw.items():
        if str(value) not in values:
            raise PulseError(f"feature set '{set_name}', column '{col}': alias '{alias}' points "
                             f"to '{value}', which is not one of its values "
                             f"({', '.join(values) or 'none declared'}).")
        out.append((str(alias), str(value)))
    return tuple(out)
