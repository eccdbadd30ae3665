"""Which endpoint judges: a named entry of an `llm:` section, as a recipe writes it. Both judges choose here
(`gen judge` for TeaBag answers, `gen eval --answers` for written answers), so the rules are the same for both.

The section comes from the recipe option (`--recipe` / `--judge-recipe`: a recipe, or a YAML file holding only an
`llm:` section), else from the dataset folder's own recipe.yaml. The name comes from the endpoint option
(`--endpoint` / `--judge-endpoint`), else it is the section's only endpoint, else, where the command names a
product, the `endpoint` option of the recipe's entry for that product. Only the `llm:` section is read, so a
recipe whose sources are gone still names its endpoints. The key is never in the file: the engine reads it from
the environment variable `api_key_env` names when a request must be sent.
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


@dataclass(frozen=True)
class Choice:
    """How a command lets the user choose the judge: its option names, and the product whose recipe entry names
    the endpoint when the section has several (None: the command must be told)."""

    recipe_option: str = "--recipe"
    endpoint_option: str = "--endpoint"
    product: str | None = None

    @property
    def wanted(self) -> str:
        return (
            f"{self.recipe_option} FILE whose llm: section names the endpoint that judges (its model, base_url, "
            "api_key_env)"
        )


@dataclass(frozen=True)
class Judge:
    name: str
    config: EndpointConfig
    file: Path  # where the endpoint is defined


def choose_endpoint(dataset_folder: Path, recipe: Path | None, name: str | None, choice: Choice) -> Judge:
    file = Path(recipe) if recipe is not None else Path(dataset_folder) / "recipe.yaml"
    data = read_yaml(file, choice, given=recipe is not None)
    section = data.get("llm")
    if not isinstance(section, dict) or not section:
        raise GenError("no llm: section with an endpoint", file=file, field="llm", expected=choice.wanted)
    chosen = pick_name(data, section, name, file, choice)
    raw = section[chosen]
    if isinstance(raw, dict) and raw.get("base_url") == LOCAL_ENDPOINT:  # published recipes hide local hosts
        raise GenError(
            f"endpoint {chosen!r} ran on a local server whose address was left out when the dataset was published",
            file=file,
            field=f"llm.{chosen}.base_url",
            expected=choice.wanted,
        )
    config = validate_model(EndpointConfig, raw, file, ("llm", chosen))
    return Judge(chosen, config, file)


def read_yaml(file: Path, choice: Choice, *, given: bool) -> dict[str, Any]:
    if not file.is_file():
        if given:
            raise GenError("no such file", file=file, expected="a YAML file with an llm: section")
        raise GenError("no recipe.yaml here to take the judge's endpoint from", file=file, expected=choice.wanted)
    data = reading.read_yaml(file, "a YAML file with an llm: section")
    if not isinstance(data, dict):
        raise GenError("the file is not a YAML mapping", file=file, expected="a mapping with an llm: section")
    return data


def pick_name(data: dict[str, Any], section: dict[str, Any], name: str | None, file: Path, choice: Choice) -> str:
    names = ", ".join(map(str, section))
    if name is not None:
        if name not in section:
            raise GenError(
                f"no endpoint named {name!r}", file=file, field=choice.endpoint_option, expected=f"one of {names}"
            )
        return name
    if len(section) == 1:
        return str(next(iter(section)))
    product_endpoint = entry_endpoint(data, choice.product)
    if product_endpoint in section:
        return product_endpoint
    which = f" and no {choice.product} product entry says which" if choice.product else ""
    raise GenError(
        f"the llm: section names several endpoints ({names}){which}",
        file=file,
        field=choice.endpoint_option,
        expected=f"{choice.endpoint_option} NAME, one of {names}",
    )


def entry_endpoint(data: dict[str, Any], product: str | None) -> str | None:
    """The `endpoint` option of the recipe's entry for this product, if it has one."""
    if product is None:
        return None
    for entry in data.get("products") or []:
        if isinstance(entry, dict) and entry.get("type") == product and isinstance(entry.get("endpoint"), str):
            return str(entry["endpoint"])
    return None
