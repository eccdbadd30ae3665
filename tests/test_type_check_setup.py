"""`pip install -e '.[dev]'` alone is enough to run mypy: every package gen imports (anywhere in gen/, inside
functions too) is installed by gen's own dependencies or the dev extra, or is an optional extra's that
pyproject.toml's mypy overrides let be missing. Without this, a new optional import passes where every extra is
installed and fails in a fresh dev environment (as `gen view`'s and the NLI model's imports once did).

The dependencies are read from the installed metadata, with their own dependencies, as pip would install them.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def third_party_imports() -> dict[str, str]:
    """Top-level name of every non-standard, non-gen module imported in gen/ → a file that imports it."""
    found: dict[str, str] = {}
    for path in sorted((REPO / "gen").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top != "gen" and top not in sys.stdlib_module_names:
                    found.setdefault(top, str(path.relative_to(REPO)))
    return found


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_with(requirements: list[str]) -> set[str]:
    """The distributions pip installs for these requirements, transitively (an extra's own requirements only
    where that extra is asked for)."""
    pending = [Requirement(text) for text in requirements]
    seen: set[tuple[str, frozenset[str]]] = set()
    while pending:
        requirement = pending.pop()
        key = (normal(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.requires(requirement.name) or []
        except metadata.PackageNotFoundError:
            continue  # not installed here: nothing of it can be imported either
        for text in requires:
            needed = Requirement(text)
            extras = requirement.extras or {""}
            if needed.marker is None or any(needed.marker.evaluate({"extra": extra}) for extra in extras):
                pending.append(needed)
    return {name for name, _ in seen}


def allowed_missing() -> list[str]:
    """The module patterns the mypy overrides let be missing ("starlette.*" → "starlette")."""
    return [
        pattern.removesuffix(".*")
        for override in PYPROJECT["tool"]["mypy"]["overrides"]
        if override.get("ignore_missing_imports")
        for pattern in override["module"]
    ]


def test_every_import_of_gen_is_installed_by_the_dev_extra_or_may_be_missing_for_mypy():
    project = PYPROJECT["project"]
    dev_install = installed_with([*project["dependencies"], *project["optional-dependencies"]["dev"]])
    distributions = metadata.packages_distributions()
    unchecked = {
        module: where
        for module, where in third_party_imports().items()
        if not {normal(name) for name in distributions.get(module, [])} & dev_install
        and module not in allowed_missing()
    }
    assert unchecked == {}, "imported by gen, not installed by '.[dev]': add to a mypy override in pyproject.toml"


def test_the_check_sees_an_optional_extras_import():
    """The extras this was written for are found as outside the dev install (so the test above can fail)."""
    project = PYPROJECT["project"]
    dev_install = installed_with([*project["dependencies"], *project["optional-dependencies"]["dev"]])
    imports = third_party_imports()
    assert imports["starlette"].startswith("gen/view/") and imports["tokenizers"] == "gen/embedding.py"
    assert "starlette" not in dev_install and "tokenizers" not in dev_install
    assert {"pydantic", "typer", "mypy", "pyarrow"} <= dev_install
