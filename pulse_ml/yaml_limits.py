"""YAML with a bound on alias expansion (no "billion laughs": nested anchors refused early).

PyYAML builds an alias as a shared reference, but everything after it (OmegaConf, the
feature-set reader, a JSON dump) walks the expanded tree: ten anchors each listing ten aliases
of the one before grow ten-fold per level (four levels took 100 s to load). Before a YAML file
is loaded, its event stream (no objects are built; linear in the file) is walked and the number
of nodes the aliases add is counted; more than :data:`MAX_ALIAS_NODES` is refused with one
line naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pulse_ml.errors import PulseError

MAX_ALIAS_NODES = 10_000


def alias_nodes(text: str, limit: int = MAX_ALIAS_NODES) -> int:
    """How many nodes the aliases of ``text`` add when expanded (stops counting past ``limit``).

    Raises:
        yaml.YAMLError: ``text`` is not YAML (left to the loader's own message).
    """
    import yaml
    from yaml.events import (
        AliasEvent,
        CollectionEndEvent,
        CollectionStartEvent,
        ScalarEvent,
    )

    sizes: dict[str, int] = {}  # anchor -> nodes of its expanded value
    stack: list[list] = []  # open collections: [anchor, nodes so far]
    added = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, ScalarEvent):
            size = 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, AliasEvent):
            size = sizes.get(event.anchor, 1)
            added += size
            if added > limit:
                return added
        elif isinstance(event, CollectionStartEvent):
            stack.append([event.anchor, 1])
            continue
        elif isinstance(event, CollectionEndEvent):
            anchor, size = stack.pop()
            if anchor:
                sizes[anchor] = size
        else:
            continue
        if stack:
            stack[-1][1] += size
    return added


def check_aliases(path: str | Path, text: str | None = None) -> Path:
    """Refuse a YAML file whose aliases expand to more than :data:`MAX_ALIAS_NODES` nodes.

    Args:
        path: The YAML file (named in the message).
        text: Its text when already read.

    Returns:
        ``path`` (so a loader call can wrap it).

    Raises:
        PulseError: the aliases expand too far.
    """
    import yaml

    text = Path(path).read_text(encoding="utf-8") if text is None else text
    if "*" not in text:  # no alias at all: nothing to expand
        return Path(path)
    try:
        added = alias_nodes(text)
    except yaml.YAMLError:
        return Path(path)  # not YAML: the loader says so in its own words
    if added > MAX_ALIAS_NODES:
        raise PulseError(f"{path}: its YAML aliases (*name) expand to more than "
                         f"{MAX_ALIAS_NODES:,} nodes (nested anchors multiply); pulse-ml does "
                         "not expand them. Write the values out, or use fewer nested aliases.")
    return Path(path)


def load_yaml_text(path: str | Path, text: str) -> Any:
    """``yaml.safe_load`` of ``text`` (read from ``path``) after :func:`check_aliases`."""
    import yaml

    check_aliases(path, text)
    return yaml.safe_load(text)
