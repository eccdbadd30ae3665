"""The package's layout rules a newcomer relies on, read from the source with `ast` (so imports under
TYPE_CHECKING and inside functions count too), as docs/architecture.md ("Rules of the house") states them:

* no import circle between gen's modules, nor between the parts (subpackages and modules) of any one package;
* no product module importing a sibling product;
* no function body longer than MAX_FUNCTION_LINES;
* each package's __init__ docstring names every module and subpackage in it;
* inside gen/llm, a module imports the module that defines a name, never a package's re-exports.

What does not meet a rule today is listed below with the reason, and each list may only shrink: a listed
entry that meets the rule now must leave the list, and a listed function may not grow."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

GEN = Path(__file__).resolve().parents[1] / "gen"
MAX_FUNCTION_LINES = 50  # a function's body, its docstring left out (nested functions count in their parent too)

# function ("module:qualified name") -> (body lines when listed, why it is still one function)
LONG_FUNCTIONS = {
    "gen.view.app:make_app": (75, "the viewer's routes as closures over one viewer; each route is a few lines"),
    "gen.sources.cc:parse_episode": (75, "one episode's fields read and checked in file order, one error per field"),
    "gen.products.temporal.checking:check_conversation": (74, "every check of one conversation's rows in one pass"),
    "gen.export.hub:publish": (73, "one Hub commit: offline check, repo, files, card, each step's error in place"),
    "gen.export.card:card_data": (65, "the card's fields gathered from the run report in the card's order"),
    "gen.pipeline.shards:prepare_sources": (61, "sources read, bound and summarised in one pass over the store"),
    "gen.timeline:place_on_clock": (55, "sessions stamped in order; each depends on the one before"),
    "gen.products.quality.records:turn_record": (54, "one turn's record: its fields in the record's order"),
    "gen.view.questions:conversation_context": (53, "the context a question page shows, field by field"),
}
MAX_LONG_FUNCTIONS = 11  # the list above when the rule came in: it never grows (cut a new long function instead)

# package -> why its __init__ does not name its modules yet
UNNAMED_MODULES = {
    "gen": "the top-level modules; the CLI and API rework (issue 42) moves many of them",
    "gen.eval": "written before the rule",
    "gen.export": "written before the rule",
    "gen.products": "written before the rule",
    "gen.products.chat_log": "written before the rule",
    "gen.products.counterfactual": "written before the rule",
    "gen.products.persona": "written before the rule",
    "gen.products.quality": "written before the rule",
    "gen.products.temporal": "written before the rule",
    "gen.products.time_content": "written before the rule",
    "gen.sources": "written before the rule",
    "gen.view": "written before the rule",
}

# package -> the parts of it that import each other in a circle today, and why
PART_CIRCLES = {
    "gen": (
        {"gen.export", "gen.personal", "gen.products", "gen.provenance", "gen.recipe", "gen.sources", "gen.timeline"},
        "recipe loading binds products and sources, which read the recipe's models; issue 42 loads a recipe once",
    ),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(GEN.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in GEN.rglob("*.py")}


def imported(name: str, path: Path) -> set[str]:
    """The gen modules `name` imports anywhere in its file (`from a import b` is a.b when b is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path}: gen uses absolute imports only"
            base = node.module or ""
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names)
    return {module for module in found if module in MODULES and module != name}


GRAPH = {name: imported(name, path) for name, path in MODULES.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_circle_finder_finds_a_circle_through_three_modules():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_between_gen_modules():
    assert circles(GRAPH) == []


def test_no_product_module_imports_a_sibling_product():
    from gen.products.registry import REGISTRY

    product_modules = {cls.__module__ for cls in REGISTRY.values()}
    assert {(m, t) for m in product_modules for t in GRAPH[m] if t in product_modules} == set()


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from a function's first statement after its docstring to its end."""
    body = node.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return (node.end_lineno or node.lineno) - body[0].lineno + 1


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, body lines) of every function and method, nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + node.name, body_lines(node)
            yield from functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")


FUNCTION_LINES = {
    f"{name}:{qualified}": lines
    for name, path in MODULES.items()
    for qualified, lines in functions(ast.parse(path.read_text()))
}


def test_body_lines_leave_out_the_docstring_and_count_nested_functions_in_their_parent():
    source = 'def outer():\n    """Doc."""\n    a = 1\n    def inner():\n        return a\n    return inner\n'
    assert dict(functions(ast.parse(source))) == {"outer": 4, "outer.inner": 1}


def test_no_function_is_longer_than_the_limit_unless_listed():
    too_long = {name: lines for name, lines in FUNCTION_LINES.items() if lines > MAX_FUNCTION_LINES}
    unlisted = {name: lines for name, lines in too_long.items() if name not in LONG_FUNCTIONS}
    assert unlisted == {}, f"functions over {MAX_FUNCTION_LINES} lines: cut them along what they do"


def test_the_long_function_list_only_shrinks():
    assert len(LONG_FUNCTIONS) <= MAX_LONG_FUNCTIONS
    for name, (listed, reason) in LONG_FUNCTIONS.items():
        assert reason
        lines = FUNCTION_LINES.get(name)
        assert lines is not None, f"{name} is gone: take it off LONG_FUNCTIONS"
        assert lines > MAX_FUNCTION_LINES, f"{name} is {lines} lines now: take it off LONG_FUNCTIONS"
        assert lines <= listed, f"{name} grew from {listed} to {lines} lines: cut it instead"


PACKAGES = {name: path.parent for name, path in MODULES.items() if path.name == "__init__.py"}


def unnamed_parts(package: str) -> list[str]:
    """The modules and subpackages of `package` its __init__ docstring does not name."""
    folder = PACKAGES[package]
    docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    parts = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
    parts += [d.name for d in folder.iterdir() if (d / "__init__.py").is_file()]
    return sorted(part for part in parts if part not in docstring)


def test_each_package_docstring_names_its_modules():
    assert {p: unnamed_parts(p) for p in PACKAGES if p not in UNNAMED_MODULES and unnamed_parts(p)} == {}


def test_the_unnamed_modules_list_only_shrinks():
    assert {p for p in UNNAMED_MODULES if p not in PACKAGES or not unnamed_parts(p)} == set()


def part_graph(package: str) -> dict[str, set[str]]:
    """The parts of `package` (its modules and subpackages, each subpackage with everything under it) and which
    part imports which."""

    def part(module: str) -> str | None:
        if not module.startswith(package + "."):
            return None
        return package + "." + module[len(package) + 1 :].split(".")[0]

    graph: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        source = part(module)
        if source is not None:
            graph.setdefault(source, set()).update(t for t in map(part, targets) if t is not None and t != source)
    for targets in list(graph.values()):
        for target in targets:
            graph.setdefault(target, set())
    return graph


def test_the_part_graph_joins_a_subpackage_and_leaves_out_the_package_itself():
    graph = part_graph("gen.llm")
    assert "gen.llm.cache" in graph["gen.llm.engine"]  # engine/engine.py imports gen/llm/cache/store.py
    assert "gen.llm" not in graph and "gen.llm.engine.engine" not in graph


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_circle_between_the_parts_of_a_package(package):
    known, reason = PART_CIRCLES.get(package, (set(), ""))
    found = circles(part_graph(package))
    assert [c for c in found if not set(c) <= known] == [], "parts of a package import each other in a circle"
    if known:
        assert reason and found, f"{package} has no circle between its parts any more: take it off PART_CIRCLES"


def test_inside_gen_llm_a_module_imports_the_defining_module_not_a_package():
    through_packages = {
        (name, target)
        for name, targets in GRAPH.items()
        if name.startswith("gen.llm.") and MODULES[name].name != "__init__.py"
        for target in targets
        if target.startswith("gen.llm") and target in PACKAGES
    }
    assert through_packages == set()
