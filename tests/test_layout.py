"""The package's layout rules a newcomer relies on, read from the source with `ast` (so imports under
TYPE_CHECKING and inside functions count too): no import circle between gen's modules, no product module
importing a sibling product, no module past 450 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

GEN = Path(__file__).resolve().parents[1] / "gen"
MAX_LINES = 450


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


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_longer_than_the_limit(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name]}: {lines} lines"
