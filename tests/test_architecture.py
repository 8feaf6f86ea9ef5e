"""The layout the architecture doc describes, enforced: no import cycle among the package's
modules (type-only and function-level imports count), and no module reads another module's
private (underscore) attributes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import servicebroker

PACKAGE = Path(servicebroker.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the package modules it imports, at any place in the file
    (top level, under TYPE_CHECKING, inside functions). ``from pkg import name`` counts as an
    import of ``pkg.name`` when that is a module, else of ``pkg``; an import of ``a.b.c`` is an
    import of the package ``a.b`` too (its ``__init__`` runs first), except the root package
    and the importer's own packages."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, path.name == "__init__.py", node)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in modules else base)
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                # importing a.b.c runs a.b's __init__ too (the root package's aside)
                while target.count(".") >= 1:
                    if target != name and not name.startswith(target + "."):
                        graph[name].add(target)
                    target = target.rpartition(".")[0]
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first repeated last), or None.

    A package's ``__init__`` importing its own submodules is not a cycle by itself; a submodule
    importing its package's ``__init__`` back is (that is how real cycles hide)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_make", "_fields", "_field_defaults"})
"""Named tuples' public methods, underscored so they cannot clash with field names."""


def private_reads() -> list[str]:
    """``obj._name`` where ``obj`` is not ``self`` or ``cls``, in every module of the package
    (named tuples' public ``_replace`` and the like aside)."""
    found = []
    for name, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr not in NAMEDTUPLE_API
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_import_cycle() -> None:
    assert find_cycle(import_graph()) is None


def test_the_cycle_finder_sees_a_cycle() -> None:
    graph = import_graph()
    graph["servicebroker.clock"].add("servicebroker.broker")  # what a careless import would do
    cycle = find_cycle(graph)
    assert cycle is not None and "servicebroker.clock" in cycle
    # a cycle closing through a package's __init__: catalog/__init__ importing a module that
    # imports catalog.cache (which runs catalog/__init__ first)
    graph = import_graph()
    graph["servicebroker.catalog"].add("servicebroker.activation.events")
    cycle = find_cycle(graph)
    assert cycle is not None and "servicebroker.catalog" in cycle


def test_no_module_reads_another_modules_private_attributes() -> None:
    assert private_reads() == []


LAYERS: list[tuple[str, set[str]]] = [
    (
        "foundation",
        {"errors", "clock", "messages", "arguments", "appsql", "dialogs", "supervisor", "syntax"},
    ),
    ("storage", {"storage"}),
    ("catalog", {"catalog"}),
    ("engine", {"engine"}),
    ("activation", {"activation"}),
    ("transport", {"transport"}),
    ("ddl", {"ddl"}),
    ("facade", {"broker", "views"}),
    ("tsql", {"tsql"}),
    ("package", {""}),
    (
        "clients",
        {
            "command_options",
            "activator",
            "console",
            "metrics",
            "diagnose",
            "spark",
            "demo",
            "testing",
            "cli",
        },
    ),
]
"""The package's layers, bottom to top, and the units (top-level modules and folders; ``""``
the package's own ``__init__``) each holds: a unit imports only units of its own layer or of
the layers below (docs/architecture.md draws them)."""


def unit_of(module: str) -> str:
    """The layer unit a module belongs to: its top-level module or folder under the package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_of() -> dict[str, int]:
    return {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}


def unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Which units import which (a unit's imports of itself left out)."""
    units: dict[str, set[str]] = {}
    for module, deps in graph.items():
        importer = unit_of(module)
        units.setdefault(importer, set())
        for dep in deps:
            if unit_of(dep) != importer:
                units[importer].add(unit_of(dep))
    return units


def climbs(graph: dict[str, set[str]]) -> list[str]:
    """Every import that climbs a layer, as ``importer -> imported (layer -> layer)``."""
    layer = layer_of()
    found = []
    for module, deps in sorted(graph.items()):
        for dep in sorted(deps):
            a, b = layer[unit_of(module)], layer[unit_of(dep)]
            if b > a:
                found.append(f"{module} -> {dep} ({LAYERS[a][0]} -> {LAYERS[b][0]})")
    return found


def test_every_unit_of_the_package_has_a_layer() -> None:
    units = {unit_of(m) for m in _modules()}
    assert units == set(layer_of()), units ^ set(layer_of())


def test_no_import_climbs_a_layer() -> None:
    assert climbs(import_graph()) == []


def test_units_of_one_layer_form_no_cycle() -> None:
    # packages, not only modules: console -> cli -> console is a cycle even when no module
    # of one imports a module of the other that imports it back
    assert find_cycle(unit_graph(import_graph())) is None


def test_the_layer_check_sees_a_climb() -> None:
    graph = import_graph()
    graph["servicebroker.catalog.model"].add("servicebroker.engine.transaction")
    assert climbs(graph) == [
        "servicebroker.catalog.model -> servicebroker.engine.transaction (catalog -> engine)"
    ]
    graph = import_graph()
    graph["servicebroker.console.app"].add("servicebroker.cli")
    assert find_cycle(unit_graph(graph)) is not None


def test_only_the_layers_above_the_facade_import_it() -> None:
    importers = {m for m, deps in import_graph().items() if "servicebroker.broker" in deps}
    facade = next(i for i, (name, _) in enumerate(LAYERS) if name == "facade")
    above = set().union(*(units for _, units in LAYERS[facade + 1 :]))
    assert {unit_of(m) for m in importers} <= above, importers


def test_no_module_reaches_700_lines() -> None:
    # one concept per module: a module that grows past 700 lines holds more than one
    long = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) >= 700
    }
    assert not long, f"modules of 700 lines or more: {long}"


def documented_modules() -> list[str]:
    """The module paths (relative to the package) the table of docs/architecture.md lists."""
    doc = (PACKAGE.parent.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = doc[doc.index("## Every module") :]
    return re.findall(r"^\| `([^`]+\.py)` \|", table, re.M)


def test_the_architecture_doc_lists_every_module_once() -> None:
    listed = documented_modules()
    actual = {p.relative_to(PACKAGE).as_posix() for p in _modules().values()}
    assert sorted(m for m in set(listed) if listed.count(m) > 1) == []
    assert sorted(actual - set(listed)) == [], "modules missing from docs/architecture.md"
    assert sorted(set(listed) - actual) == [], "docs/architecture.md lists modules that are gone"


def test_the_architecture_doc_lists_each_module_under_its_layer() -> None:
    doc = (PACKAGE.parent.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = doc[doc.index("## Every module") :]
    layer = {f"### {name}": units for name, units in LAYERS}
    units: set[str] = set()
    for line in table.splitlines():
        if line.startswith("### "):
            units = layer[line]
        elif m := re.match(r"^\| `([^`]+\.py)` \|", line):
            path = m.group(1)
            unit = "" if path == "__init__.py" else path.split("/")[0].removesuffix(".py")
            assert unit in units, f"{path} is listed under the wrong layer"
