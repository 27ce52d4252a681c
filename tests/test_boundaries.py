"""The house rules ARCHITECTURE.md states, checked on the source.

Boundaries (mlflow only under ``registry/``, Hydra only in ``config.py``), the layering (the
``layers`` block of ARCHITECTURE.md: a module imports only from its own unit or a lower layer),
no import cycles (annotation imports included), pure ``stats/`` and ``sessions/``, tag names
only through ``keys.py``, and the 400-line module budget (exceptions listed with their reason).
Imports inside ``if TYPE_CHECKING:`` are annotations, not imports, and are exempt.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "pulse_ml"
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
LINE_BUDGET = 400


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return inside


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".")
    if _modules()[module].name != "__init__.py":
        package = package[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _known(name: str) -> str | None:
    while name and name not in _modules():
        name = name.rpartition(".")[0]
    return name or None


@cache
def _imports(module: str, annotations: bool = False) -> tuple[tuple[str, int], ...]:
    """(imported module, line) for every runtime import of pulse_ml modules, nested ones too.

    ``annotations=True`` adds the imports under ``if TYPE_CHECKING:``.
    """
    tree = _tree(_modules()[module])
    skip = set() if annotations else _type_checking_nodes(tree)
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            target = _known(name) if name.startswith("pulse_ml") else None
            if target and target != module:
                found.append((target, node.lineno))
    return tuple(sorted(set(found)))


def _external(module: str) -> set[str]:
    """Top-level names of the third-party or stdlib packages a module imports at run time."""
    tree = _tree(_modules()[module])
    skip = _type_checking_nodes(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names - {"pulse_ml", "__future__"}


@cache
def _layers() -> tuple[dict[str, int], dict[str, str]]:
    """Units -> layer and root modules -> unit, from ARCHITECTURE.md's ``layers`` block.

    A line is ``<layer> <unit> <unit> ...`` (lowest layer first); ``<unit> = <module> ...``
    names the root modules that make up a unit (e.g. ``base = errors names``).
    """
    block = re.search(r"```layers\n(.*?)```", ARCHITECTURE.read_text(), re.S)
    assert block, "ARCHITECTURE.md has no ```layers block"
    layers: dict[str, int] = {}
    members: dict[str, str] = {}
    for line in block.group(1).splitlines():
        m = re.match(r"\s*(\d+)\s+([^#]+)", line)
        if not m:
            continue
        units, _, modules = m.group(2).partition("=")
        for unit in units.split():
            layers[unit] = int(m.group(1))
        for module in modules.split():
            members[module] = units.split()[-1]
    return layers, members


def _unit(module: str) -> str:
    """``pulse_ml.jobs.train`` -> ``jobs``; a root module is its own unit or a member of one."""
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else "__init__"
    if (PKG / name).is_dir():
        return name
    return _layers()[1].get(name, name)


def _edges() -> list[tuple[str, str, int]]:
    return [(a, b, line) for a in _modules() for b, line in _imports(a)]


def test_every_unit_is_placed_in_a_layer():
    missing = sorted({_unit(m) for m in _modules()} - set(_layers()[0]))
    assert missing == [], "add the package or root module to ARCHITECTURE.md's layers block"


def test_nothing_imports_upward_or_sideways():
    layer = _layers()[0]
    offenders = sorted(
        f"{a}:{line} -> {b}"
        for a, b, line in _edges()
        if _unit(a) != _unit(b) and layer[_unit(a)] <= layer[_unit(b)]
    )
    assert offenders == []


def test_no_import_cycles():
    """Not even through annotations: a type two modules share lives below both."""
    graph: dict[str, set[str]] = {m: set() for m in _modules()}
    for a in _modules():
        graph[a].update(b for b, _ in _imports(a, annotations=True))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert cycles == []


@pytest.mark.parametrize("pattern,allowed", [
    (r"^\s*(import mlflow|from mlflow[. ])", lambda f: f.startswith("registry/")),
    (r"^\s*(import (hydra|omegaconf)|from (hydra|omegaconf)[. ])", lambda f: f == "config.py"),
])
def test_only_the_boundary_modules_import_the_boundary_libraries(pattern, allowed):
    rx = re.compile(pattern, re.M)
    importers = {str(p.relative_to(PKG)) for p in PKG.rglob("*.py") if rx.search(p.read_text())}
    assert sorted(f for f in importers if not allowed(f)) == []


def test_jobs_import_no_other_job_but_pipeline():
    offenders = sorted(
        f"{a} -> {b}" for a, b, _ in _edges()
        if a.startswith("pulse_ml.jobs.") and b.startswith("pulse_ml.jobs")
        and a != "pulse_ml.jobs.pipeline"
    )
    assert offenders == []


STATS_MAY_IMPORT = {"numpy", "scipy", "pandas"}
HEAVY = {"sklearn", "lightgbm", "mlflow", "optuna", "hydra", "omegaconf", "litellm", "pyspark",
         "matplotlib", "torch"}


def test_stats_is_pure():
    """stats/: numpy, scipy, pandas and the standard library; no files, configs or models."""
    import sys

    stdlib = set(sys.stdlib_module_names)
    offenders = {}
    for m in _modules():
        if m.startswith("pulse_ml.stats"):
            bad = _external(m) - STATS_MAY_IMPORT - stdlib
            bad |= {b for b, _ in _imports(m) if _unit(b) not in ("stats", "base")}
            bad |= _external(m) & {"os", "pathlib", "io", "shutil", "subprocess", "yaml"}
            if bad:
                offenders[m] = sorted(bad)
    assert offenders == {}


def test_sessions_know_no_models():
    """The session-table contract loads without scikit-learn, models or MLflow."""
    offenders = {m: sorted(_external(m) & HEAVY) for m in _modules()
                 if m.startswith("pulse_ml.sessions") and _external(m) & HEAVY}
    assert offenders == {}


TAG_CALLS = {"set_tag", "set_tags", "set_model_version_tag", "set_registered_model_tag",
             "set_experiment_tag", "delete_tag", "delete_model_version_tag"}
TAG_KEYWORDS = {"tags"}


def _vocabulary() -> set[str]:
    """Names only MLflow runs use: kinds, experiments, the registered model, ``mlflow.*`` tags.

    Ordinary words that are also tag names ("family", "seed") and names that are also config
    keys or data columns are left to the call-site rules below.
    """
    tree = _tree(_modules()["pulse_ml.keys"])
    named = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
             and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
             for t in n.targets}
    return {v for k, v in named.items()
            if (k.startswith("KIND_") or k.endswith("_EXPERIMENT") or k == "REGISTERED_MODEL"
                or v.startswith("mlflow.")) and re.search(r"[_.-]", v)}


def _literal(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _tag_offenders(module: str, vocabulary: set[str]) -> list[str]:
    found = []
    for node in ast.walk(_tree(_modules()[module])):
        if isinstance(node, ast.Call):
            named = [k.value for k in node.keywords if k.arg in TAG_KEYWORDS]
            if getattr(node.func, "attr", None) in TAG_CALLS and node.args:
                named.append(node.args[0])
            for arg in named:
                keys = arg.keys if isinstance(arg, ast.Dict) else [arg]
                if any(_literal(k) for k in keys):
                    found.append(f"{module}:{node.lineno} {ast.unparse(node.func)}")
        elif _literal(node) and (node.value in vocabulary
                                 or re.match(r"(tags|metrics|params)\.\w", node.value)):
            found.append(f"{module}:{node.lineno} {node.value!r}")
    return found


def test_tag_and_metric_names_only_through_keys():
    """Tag names are constants of ``keys.py`` (tag calls, ``tags=`` dicts, search filters).

    A verb's own params and metrics may be named where they are logged; a name another module
    reads back (a tag, a search filter, a kind) has one spelling.
    """
    vocabulary = _vocabulary()
    assert {"llm_judge", "pulse-train", "mlflow.note.content"} <= vocabulary
    offenders = [o for m in _modules() if m != "pulse_ml.keys"
                 for o in _tag_offenders(m, vocabulary)]
    assert offenders == [], "use the constants of pulse_ml/keys.py"


def _over_budget_listed() -> dict[str, str]:
    section = ARCHITECTURE.read_text().partition("## Modules over 400 lines")[2]
    return dict(re.findall(r"^- `pulse_ml/(\S+\.py)`[^\n]*?(?:—|-|:)\s*(\S[^\n]*)", section, re.M))


def test_modules_stay_within_the_line_budget():
    listed = _over_budget_listed()
    over = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > LINE_BUDGET}
    assert {f: n for f, n in over.items() if f not in listed} == {}
    assert sorted(set(listed) - set(over)) == [], "remove modules back under budget from the list"
    assert len(listed) <= 2
