"""Which endpoint judges: a named entry of an `llm:` section, as a recipe writes it.

The section comes from `--recipe FILE` (a recipe, or a YAML file holding only an `llm:` section), else from the
dataset folder's own recipe.yaml. The name comes from `--endpoint`, else it is the section's only endpoint, else
the `endpoint` option of the recipe's `teabag` product entry. Only the `llm:` section is read, so a recipe whose
sources are gone still names its endpoints. The key is never in the file: the engine reads it from the
environment variable `api_key_env` names when a request must be sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen import reading
from gen.errors import GenError
from gen.llm.config import EndpointConfig
from gen.provenance import LOCAL_ENDPOINT
from gen.validation import validate_model

WANTED = "--recipe FILE whose llm: section names the endpoint that judges (its model, base_url, api_key_env)"


@dataclass(frozen=True)
class Judge:
    name: str
    config: EndpointConfig
    file: Path  # where the endpoint is defined


def choose_endpoint(dataset_folder: Path, recipe: Path | None, name: str | None) -> Judge:
    file = Path(recipe) if recipe is not None else Path(dataset_folder) / "recipe.yaml"
    data = read_yaml(file, given=recipe is not None)
    section = data.get("llm")
    if not isinstance(section, dict) or not section:
        raise GenError("no llm: section with an endpoint", file=file, field="llm", expected=WANTED)
    chosen = pick_name(data, section, name, file)
    raw = section[chosen]
    if isinstance(raw, dict) and raw.get("base_url") == LOCAL_ENDPOINT:  # published recipes hide local hosts
        raise GenError(
            f"endpoint {chosen!r} ran on a local server whose address was left out when the dataset was published",
            file=file,
            field=f"llm.{chosen}.base_url",
            expected=WANTED,
        )
    config = validate_model(EndpointConfig, raw, file, ("llm", chosen))
    return Judge(chosen, config, file)


def read_yaml(file: Path, *, given: bool) -> dict[str, Any]:
    if not file.is_file():
        if given:
            raise GenError("no such file", file=file, expected="a YAML file with an llm: section")
        raise GenError("no recipe.yaml here to take the judge's endpoint from", file=file, expected=WANTED)
    data = reading.read_yaml(file, "a YAML file with an llm: section")
    if not isinstance(data, dict):
        raise GenError("the file is not a YAML mapping", file=file, expected="a mapping with an llm: section")
    return data


def pick_name(data: dict[str, Any], section: dict[str, Any], name: str | None, file: Path) -> str:
    names = ", ".join(map(str, section))
    if name is not None:
        if name not in section:
            raise GenError(f"no endpoint named {name!r}", file=file, field="--endpoint", expected=f"one of {names}")
        return name
    if len(section) == 1:
        return str(next(iter(section)))
    product_endpoint = teabag_endpoint(data)
    if product_endpoint in section:
        return product_endpoint
    raise GenError(
        f"the llm: section names several endpoints ({names}) and no teabag product entry says which",
        file=file,
        field="--endpoint",
        expected=f"--endpoint NAME, one of {names}",
    )


def teabag_endpoint(data: dict[str, Any]) -> str | None:
    """The `endpoint` option of the recipe's teabag product entry, if it has one."""
    for entry in data.get("products") or []:
        if isinstance(entry, dict) and entry.get("type") == "teabag" and isinstance(entry.get("endpoint"), str):
            return str(entry["endpoint"])
    return None
