"""How a run was made, in forms fit to keep next to it and to publish.

The run folder keeps a recipe.yaml that rebuilds the run from anywhere (its paths point from the run folder to
the inputs). What gets published names nothing of the user's machine: paths are reduced to file names, the
LLM cache's location is left out, and an endpoint on a local or private host is shown as "a local endpoint".
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from gen import reading
from gen.recipe import Recipe, file_sha256

LOCAL_ENDPOINT = "a local endpoint"
PORTABLE_HEADER = (
    "# The recipe of this run as gen ran it. Inputs are named by file name (sources with their sha256): from\n"
    "# anywhere, `gen run recipe.yaml --source-dir DIR` rebuilds the same records from the files in DIR (the\n"
    "# bundled sample needs no DIR).\n"
)
PUBLIC_HEADER = "# The recipe of this dataset; input paths are reduced to their file names.\n"
WITHHELD_NAMES = (
    "# redact.names is withheld: it listed {count} name(s) of people in the sources, which the redaction hides.\n"
)


def recipe_data(recipe: Recipe) -> dict[str, Any]:
    return reading.read_yaml(recipe.file, "the recipe this run was made from")


def rewrite_paths(data: dict[str, Any], recipe: Recipe, rewrite: Any) -> dict[str, Any]:
    """The recipe as written, with each input path replaced by rewrite(resolved path); output_dir dropped (it
    says where one machine wrote the run, not what the run is)."""
    data = dict(data)
    data.pop("output_dir", None)
    sources = [dict(entry) for entry in data.get("sources") or []]
    for entry, source in zip(sources, recipe.sources, strict=True):
        if source.path is not None:
            entry["path"] = rewrite(source.path)
    data["sources"] = sources
    padding_path = recipe.timeline.padding.path
    if padding_path is not None:
        timeline = dict(data["timeline"])
        timeline["padding"] = {**timeline["padding"], "path": rewrite(padding_path)}
        data["timeline"] = timeline
    if recipe.templates_dir is not None:
        data["templates_dir"] = rewrite(recipe.templates_dir)
    return data


def portable_recipe(recipe: Recipe, final: Path) -> str:
    """recipe.yaml for the run folder: each input by its file name alone, each source file with its sha256, so
    the folder names nothing of this machine and rebuilds anywhere the files are (found by --source-dir)."""
    data = rewrite_paths(recipe_data(recipe), recipe, lambda path: Path(path).name)
    for entry, source in zip(data["sources"], recipe.sources, strict=True):
        if source.path is not None and source.path.is_file():
            entry["sha256"] = file_sha256(source.path)
    return PORTABLE_HEADER + dump(data)


def public_recipe(text: str) -> str:
    """A run folder's recipe.yaml as published: input paths reduced to file names, local endpoints hidden, and
    the names `redact:` replaces left out (published, the list would name the very people it hides). The card
    and `gen push` both publish the recipe through here."""
    data = reading.load_yaml(text, Path("recipe.yaml"))
    if not isinstance(data, dict):
        return text
    header = PUBLIC_HEADER
    redact = data.get("redact")
    if isinstance(redact, dict) and "names" in redact:
        names = redact.pop("names")
        header += WITHHELD_NAMES.format(count=len(names) if isinstance(names, list) else "some")
    for source in data.get("sources") or []:
        if isinstance(source, dict) and source.get("path"):
            source["path"] = Path(str(source["path"])).name
    padding = (data.get("timeline") or {}).get("padding") or {}
    if padding.get("path"):
        padding["path"] = Path(str(padding["path"])).name
    if data.get("templates_dir"):
        data["templates_dir"] = Path(str(data["templates_dir"])).name
    for endpoint in (data.get("llm") or {}).values():
        if isinstance(endpoint, dict) and "base_url" in endpoint:
            endpoint["base_url"] = public_url(str(endpoint["base_url"]))
    return header + dump(data)


def dump(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110)


def public_url(url: str) -> str:
    """`url` when its host is a public name or address, else LOCAL_ENDPOINT."""
    host = urlsplit(url).hostname or ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        local = "." not in host or host.endswith((".local", ".lan", ".internal", ".localdomain", ".home"))
    else:
        local = not address.is_global
    return LOCAL_ENDPOINT if local else url


def public_llm_report(llm: dict[str, Any]) -> dict[str, Any]:
    """The engine's report without the cache's location and with local endpoints hidden."""
    public = dict(llm)
    if isinstance(public.get("cache"), dict):
        public["cache"] = {k: v for k, v in public["cache"].items() if k != "path"}
    endpoints = public.get("endpoints")
    if isinstance(endpoints, dict):
        public["endpoints"] = {
            name: {**info, "base_url": public_url(str(info["base_url"]))} if "base_url" in info else info
            for name, info in endpoints.items()
        }
    return public


def public_origin(origin: str) -> str:
    """A source's origin as published: Hub names as they are, local paths reduced to the file name."""
    return origin if origin.startswith("hf:") else Path(origin).name
