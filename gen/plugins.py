"""The plugin seam: products, template folders and export formats are found through entry point groups, gen's
own registered exactly as an outside package registers its. A package adds to `gen` by declaring, in its pyproject.toml:

    [project.entry-points."gen.products"]
    my_package = "my_package.product:MyProduct"          # a product class, or a tuple of them

    [project.entry-points."gen.templates"]
    my_package = "my_package:templates_dir"              # a callable returning the folder of its templates

    [project.entry-points."gen.sources"]
    my_format = "my_package.source:MY_FORMAT"            # a SourceFormat; the entry point's name is the format's

    [project.entry-points."gen.exports"]
    my_package = "my_package.export:MY_FORMAT"           # an export format, or a tuple of them

gen's own entry points come first; other packages' follow, by distribution name, then entry point name, so the
order never depends on how the environment was installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from importlib import metadata
from typing import TypeVar, cast

from gen.about import DISTRIBUTION
from gen.errors import GenError

PRODUCTS = "gen.products"
TEMPLATES = "gen.templates"
SOURCES = "gen.sources"  # source formats: gen/sources/registry.py, docs/adding-a-source.md
EXPORTS = "gen.exports"  # export formats: gen/export/harness/formats.py, docs/harness-exports.md


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


def names(group: str) -> list[str]:
    """The names of a group's entry points, without importing what they point to."""
    return [ep.name for ep in entry_points(group)]


def distribution(ep: metadata.EntryPoint) -> str:
    return ep.dist.name if ep.dist is not None else ""


def loaded(group: str, only: str | None = None) -> Iterator[tuple[metadata.EntryPoint, object]]:
    """Each entry point (or each called `only`) with the object it names; one that cannot be imported is one
    error naming it."""
    for ep in entry_points(group):
        if only is not None and ep.name != only:
            continue
        try:
            yield ep, ep.load()
        except Exception as exc:  # a plugin's import can fail in any way; say which plugin and why
            raise GenError(
                f"cannot load {ep.value} ({type(exc).__name__}: {exc})",
                record=f"entry point {ep.name!r} of {distribution(ep) or 'an unknown package'}",
                field=group,
                expected="an importable object (check that the plugin is installed with its dependencies)",
            ) from None


def load(group: str, name: str) -> object:
    """The object of the group's entry point called `name` (the first one, gen's before others'); only it is
    imported."""
    for _, found in loaded(group, only=name):
        return found
    raise GenError(f"no {group} entry point named {name!r}", field=group)


T = TypeVar("T")


def registered(
    group: str, kind: str, expected: str, accepts: Callable[[object], bool], name_of: Callable[[T], str] | None
) -> dict[str, T]:
    """Every object the group's entry points name (an entry point may name a tuple of them), by name: its own
    (`name_of`), or else its entry point's. One that is not a `kind` (`accepts` says), or a second of a name
    already taken, is one error naming the entry point."""
    found: dict[str, T] = {}
    for ep, named in loaded(group):
        where = f"entry point {ep.name!r} of {distribution(ep)}"
        for item in named if isinstance(named, tuple) else (named,):
            if not accepts(item):
                article = "an" if kind[0] in "aeiou" else "a"
                raise GenError(
                    f"{ep.value} holds {item!r:.80}, not {article} {kind}", record=where, field=group, expected=expected
                )
            name = name_of(cast(T, item)) if name_of is not None else ep.name
            if name in found:
                raise GenError(f"a second {kind} named {name!r}", record=where, field=group)
            found[name] = cast(T, item)
    return found
