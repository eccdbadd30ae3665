"""The plugin seam: products, template folders and export formats are found through entry point groups, gen's
own registered exactly as an outside package registers its. A package adds to `gen` by declaring, in its pyproject.toml:

    [project.entry-points."gen.products"]
    my_package = "my_package.product:MyProduct"          # a product class, or a tuple of them

    [project.entry-points."gen.templates"]
    my_package = "my_package:templates_dir"              # a callable returning the folder of its templates

    [project.entry-points."gen.exports"]
    my_package = "my_package.export:MY_FORMAT"           # an export format, or a tuple of them

gen's own entry points come first; other packages' follow, by distribution name, then entry point name, so the
order never depends on how the environment was installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata

from gen.about import DISTRIBUTION
from gen.errors import GenError

PRODUCTS = "gen.products"
TEMPLATES = "gen.templates"
EXPORTS = "gen.exports"


def entry_points(group: str) -> list[metadata.EntryPoint]:
    """The group's entry points, gen's first, then everyone else's, sorted."""
    found = list(metadata.entry_points(group=group))
    own = [ep for ep in found if distribution(ep) == DISTRIBUTION]
    if not own:
        raise GenError(
            f"gen's own {group} entry points are missing: gen is not installed in this environment, or was "
            "installed from a version without this group",
            expected=f"pip install {DISTRIBUTION} (in a checkout: pip install -e . again)",
        )
    others = sorted(
        (ep for ep in found if distribution(ep) != DISTRIBUTION), key=lambda ep: (distribution(ep), ep.name)
    )
    return own + others


def distribution(ep: metadata.EntryPoint) -> str:
    return ep.dist.name if ep.dist is not None else ""


def loaded(group: str) -> Iterator[tuple[metadata.EntryPoint, object]]:
    """Each entry point with the object it names; one that cannot be imported is one error naming it."""
    for ep in entry_points(group):
        try:
            yield ep, ep.load()
        except Exception as exc:  # a plugin's import can fail in any way; say which plugin and why
            raise GenError(
                f"cannot load {ep.value} ({type(exc).__name__}: {exc})",
                record=f"entry point {ep.name!r} of {distribution(ep) or 'an unknown package'}",
                field=group,
                expected="an importable object (check that the plugin is installed with its dependencies)",
            ) from None
