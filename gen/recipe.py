"""Recipes: YAML validated with pydantic before anything runs.

Unknown keys are rejected with their exact path and the nearest valid key. This module is the bottom layer:
it imports no product and no engine. Product options are validated by each product's own `Options` model
when the registry binds the recipe's products (gen/products/registry.py).
"""

from __future__ import annotations

import difflib
import hashlib
import math
import typing
from datetime import datetime
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from gen import plugins, reading
from gen.callers import named
from gen.conversation import MIN_YEAR
from gen.errors import GenError
from gen.export.spec import ExportSpec
from gen.hashing import canonical_json
from gen.llm.config import EndpointConfig, data_params
from gen.redaction import RedactSpec
from gen.templating import Templates
from gen.validation import InputModel, dotted, validate_model

if TYPE_CHECKING:
    pass

# Bounds that keep every timestamp a four-digit year: a word takes at most a minute to say, and no gap or
# offset is longer than ten years (docs/timestamps.md).
MAX_SECONDS_PER_WORD = 60
MAX_MINUTES = 10 * 365 * 24 * 60

FORMAT_VERSION = 1  # bump when the meaning of a recipe field changes, so fingerprints change with it


class StrictModel(InputModel):
    """Every part of a recipe: unknown keys, infinite floats and out-of-range whole numbers refused
    (gen/validation.py's InputModel)."""


class SourceSpec(StrictModel):
    format: str = Field(description="a source format: one of the `gen.sources` entry points (gen/plugins.py)")
    path: Path | None = Field(default=None, description="a local file, relative to the recipe's folder; or give hf")
    hf: str | None = Field(default=None, description="owner/name of a Hugging Face dataset")
    hf_config: str | None = Field(default=None, description="hf only: the dataset's configuration (subset) name")
    split: str | None = Field(default=None, description="hf only: the split to read (default train)")
    revision: str | None = Field(default=None, description="hf only: a branch, tag or commit of the dataset")
    limit: int | None = Field(default=None, ge=0, description="keep the first N conversations (applied last)")
    ids: list[str] | None = Field(default=None, description="keep only these conversation ids (applied first)")
    longest: int | None = Field(default=None, ge=1, description="keep the N longest conversations (after min_sessions)")
    min_sessions: int | None = Field(default=None, ge=1, description="keep conversations with at least N sessions")
    interval_phrases: dict[str, str] | None = Field(default=None, description="CC only: extra phrase → duration rows")
    default_interval: str | None = Field(default=None, description="CC only: the phrase used when an episode has none")
    sha256: str | None = Field(
        default=None, pattern=r"^[0-9a-f]{64}$", description="the file's sha256, checked when it is found (run folders)"
    )
    dayfirst: bool | None = Field(
        default=None, description="chat_logs only: read 05/08/23 as 5 August (true) or as May 8 (false)"
    )
    session_break_minutes: float | None = Field(
        default=None,
        gt=0,
        le=MAX_MINUTES,  # as the timeline's minutes: a timedelta of more overflows
        description="chat_logs only: a new session after this long without a message (default 30)",
    )
    personal: bool | None = Field(
        default=None,
        description="whether the file holds people's own conversations (default: as its format says, true for "
        "chat_logs and the other chat exports); `gen push` asks for --personal-data-ok before uploading a run "
        "made from one",
    )
    clock: Literal["observed", "simulated"] | None = Field(
        default=None,
        description="message sources: keep each message's own time (observed; the default when messages have "
        "times) or simulate them from the speaking rate",
    )
    options: dict[str, Any] | None = Field(
        default=None, description="the format's own options (its reader checks them)"
    )

    @field_validator("format")
    @classmethod
    def installed_format(cls, value: str) -> str:
        """A format some installed package registers (gen's own among them), named without importing any reader."""
        known = plugins.names(plugins.SOURCES)
        if value not in known:
            near = difflib.get_close_matches(value, known, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ValueError(f"unknown source format {value!r}{hint} (installed: {', '.join(known)})")
        return value

    @model_validator(mode="after")
    def one_location(self) -> SourceSpec:
        if (self.path is None) == (self.hf is None):
            raise ValueError("give exactly one of `path` (a local file) or `hf` (owner/name on the Hub)")
        hub_only = [name for name in ("hf_config", "split", "revision") if getattr(self, name) is not None]
        if self.hf is None and hub_only:
            raise ValueError(f"{', '.join(hub_only)} only apply to a Hub source (`hf: owner/name`)")
        return self

    @property
    def origin(self) -> str:
        return str(self.path) if self.path else f"hf:{self.hf}"


Minutes = Annotated[float, Field(ge=0, le=MAX_MINUTES, allow_inf_nan=False)]


class MinutesRange(StrictModel):
    """A seeded range: each conversation gets a whole number of minutes from min to max, inclusive."""

    min: Minutes = Field(description="the fewest minutes")
    max: Minutes = Field(description="the most minutes")

    @model_validator(mode="after")
    def holds_a_whole_minute(self) -> MinutesRange:
        if math.ceil(self.min) > math.floor(self.max):
            raise ValueError("min must not exceed max, and a whole number of minutes must lie between them")
        return self

    @property
    def choices(self) -> range:
        return range(math.ceil(self.min), math.floor(self.max) + 1)


AFTER_MINUTES_FORMS: dict[str, Any] = {
    "a number of minutes": TypeAdapter(Minutes),
    "a list of minutes": TypeAdapter(Annotated[list[Minutes], Field(min_length=1)]),
    "{min, max}": TypeAdapter(MinutesRange),
}


def after_minutes_form(value: Any) -> Any:
    """Check `after_minutes` against the one form it takes, so a bad value is reported against that form only."""
    form = (
        "a list of minutes"
        if isinstance(value, list)
        else "{min, max}"
        if isinstance(value, dict)
        else "a number of minutes"
    )
    try:
        AFTER_MINUTES_FORMS[form].validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = dotted(tuple(first["loc"]))
        raise ValueError(
            f"{form} was expected{f' ({where})' if where else ''}: {first['msg'].removeprefix('Value error, ')}"
        ) from None
    return value


class PaddingSpec(StrictModel):
    mode: Literal["none", "donor", "file"] = Field(
        default="donor", description="donor: sessions of another conversation of the source; file: from path; none"
    )
    after_minutes: Minutes | list[Minutes] | MinutesRange = Field(
        default=60,
        description="minutes from the last session's start: one value, a list (one chosen per conversation by "
        "seed) or {min, max} (a seeded whole number of minutes per conversation)",
    )
    target_words: int = Field(default=3000, ge=1, description="padding words added per conversation")
    path: Path | None = Field(default=None, description="mode file: a JSON list of {speaker, text}")

    @field_validator("after_minutes", mode="before")
    @classmethod
    def one_form(cls, value: Any) -> Any:
        return after_minutes_form(value)

    @model_validator(mode="after")
    def file_needs_path(self) -> PaddingSpec:
        if self.mode == "file" and self.path is None:
            raise ValueError("padding mode `file` needs `path`")
        return self

    def allows(self, minutes: float) -> bool:
        """Whether `after_minutes` can give this offset (the validators' side of the seeded choice)."""
        option = self.after_minutes
        if isinstance(option, MinutesRange):
            return float(minutes).is_integer() and int(minutes) in option.choices  # an int: `in` is O(1)
        return minutes in option if isinstance(option, list) else minutes == option


class TimelineSpec(StrictModel):
    seconds_per_word: float = Field(
        default=0.46, gt=0, le=MAX_SECONDS_PER_WORD, allow_inf_nan=False, description="speaking rate of each response"
    )
    session_gap_minutes: float = Field(
        default=20,
        gt=0,
        le=MAX_MINUTES,
        allow_inf_nan=False,
        description="silences within a session stay below this, gaps between sessions exceed it",
    )
    now_offset_minutes: float = Field(
        default=50, ge=0, le=MAX_MINUTES, allow_inf_nan=False, description='"now" is the last response plus this'
    )
    padding: PaddingSpec = Field(default=PaddingSpec(), description="the extra session after the last real one")
    anchor_start: datetime = Field(default=datetime(2023, 1, 2, 10, 0), description="session 1 start for MSC and CC")
    shift_overlapping: bool = Field(default=False, description="move later sessions instead of failing on an overlap")

    @field_validator("anchor_start")
    @classmethod
    def four_digit_year(cls, value: datetime) -> datetime:
        if value.year < MIN_YEAR:
            raise ValueError(f"the year must have four digits ({MIN_YEAR} or later)")
        return value


class ProductEntry(BaseModel):
    """`type` selects a registered product; every other key is that product's option."""

    model_config = ConfigDict(extra="allow")
    type: str

    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class Recipe(StrictModel):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="the run folder's name")
    seed: int = Field(default=0, description="every random choice follows from it")
    split: str = Field(default="test", pattern=r"^[A-Za-z0-9_]+$", description="the split the files are written under")
    sources: list[SourceSpec] = Field(min_length=1, description="the corpora to read")
    timeline: TimelineSpec = Field(default=TimelineSpec(), description="how conversations are placed on a clock")
    products: list[ProductEntry] = Field(min_length=1, description="what to build: one entry per product type")
    output_dir: Path | None = Field(default=None, description="where the run folder goes (default ./outputs)")
    templates_dir: Path | None = Field(default=None, description="templates here shadow the built-in ones")
    llm: dict[str, EndpointConfig] = Field(default={}, description="named LLM endpoints that products refer to")
    redact: RedactSpec | None = Field(
        default=None, description="replace emails, phone numbers, links and listed names before anything is built"
    )
    export: ExportSpec = Field(
        default=ExportSpec(), description="export: {hub: {repo_id: ...}} pushes the run at the end"
    )

    _file: Path = PrivateAttr(default=Path("recipe.yaml"))
    _fingerprint: str = PrivateAttr(default="")
    _templates: Templates | None = PrivateAttr(default=None)

    @property
    def file(self) -> Path:
        return self._file

    @property
    def templates(self) -> Templates:
        """The templates this recipe renders with: templates_dir in front of gen's and plugins' (gen/templating.py).
        Made once per recipe and handed on with it, so the products, the engine and the card of one run read the
        same files; made again only if templates_dir is set to another folder (a recipe built in code)."""
        if self._templates is None or self._templates.own != self.templates_dir:
            self._templates = Templates.of(self.templates_dir)
        return self._templates

    @property
    def fingerprint(self) -> str:
        """sha256 over what decides the data: run-only settings (output_dir, export) stay out."""
        return self._fingerprint


RUN_ONLY_KEYS = {"output_dir", "export"}


RECIPE_FILE = "a YAML recipe file (UTF-8 text)"


def load_recipe(path: str | Path, source_dir: Path | None = None) -> Recipe:
    """The recipe at `path`, its input paths resolved (see resolve_paths; `source_dir` is where inputs named by
    their file name alone are looked for first)."""
    path = Path(path)
    return recipe_from_data(reading.read_yaml(path, RECIPE_FILE), path, source_dir)


def recipe_from_data(data: Any, path: Path, source_dir: Path | None = None) -> Recipe:
    """A recipe from its parsed YAML (or a Python mapping): `path` names it in errors, and its folder is the one
    relative input paths start from."""
    if not isinstance(data, dict):
        raise GenError("the recipe is not a mapping", file=path, expected="keys name, sources, timeline, products")
    recipe = validate_model(Recipe, data, path, prefix=())
    recipe._file = path
    check_endpoints(recipe)
    check_source_options(recipe)
    recipe._fingerprint = fingerprint(data_affecting(recipe))
    resolve_paths(recipe, path.parent, source_dir)
    return recipe


def check_source_options(recipe: Recipe) -> None:
    """Each source entry's `options:` against its format's own model (gen/sources/registry.py's SourceFormat,
    loaded through its entry point, so this bottom layer imports no reader), before any file is read."""
    for index, spec in enumerate(recipe.sources):
        source: Any = plugins.load(plugins.SOURCES, spec.format)
        validate_model(source.Options, spec.options or {}, recipe.file, prefix=("sources", index, "options"))


def check_endpoints(recipe: Recipe) -> None:
    """What the endpoint models let through but no server would take: a model name with spaces around it, and
    infinite or not-a-number settings (`.inf` in YAML)."""
    for name, endpoint in recipe.llm.items():
        where = f"llm.{name}"
        if endpoint.model != endpoint.model.strip() or not endpoint.model.strip():
            raise GenError(
                f"model {endpoint.model!r} is blank or has spaces around it",
                file=recipe.file,
                field=f"{where}.model",
                expected="the model's id as the server names it, e.g. gpt-4o-mini",
            )
        for key, value in non_finite(endpoint.model_dump(), where):
            raise GenError(f"{value} is not a usable value", file=recipe.file, field=key, expected="a finite number")


def non_finite(value: Any, where: str) -> typing.Iterator[tuple[str, float]]:
    """(dotted key, value) of every infinite or NaN number inside `value`."""
    if isinstance(value, float) and not math.isfinite(value):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from non_finite(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from non_finite(item, f"{where}[{index}]")


# Fields added after recipes were first fingerprinted: left out of the fingerprint while unset, so recipes
# that do not use them keep theirs
LATER_FIELDS = ("dayfirst", "session_break_minutes", "hf_config", "clock", "options")


def data_affecting(recipe: Recipe) -> dict:
    """The recipe without run-only settings; endpoints reduced to what changes their replies; input files by
    name only, so the same recipe moved elsewhere (the run folder's recipe.yaml) keeps its fingerprint."""
    data = {k: v for k, v in recipe.model_dump(mode="json").items() if k not in RUN_ONLY_KEYS}
    data["llm"] = {name: data_params(endpoint) for name, endpoint in recipe.llm.items()}
    data["products"] = sorted(data["products"], key=lambda entry: entry["type"])  # their order decides nothing
    for source in data["sources"]:
        source["path"] = file_name(source["path"])
        source.pop("sha256", None)  # a check on the file, not a setting: the fingerprint stays the recipe's
        source.pop("personal", None)  # says who is in the data, changes none of it
        for key in LATER_FIELDS:
            if source[key] is None:
                source.pop(key)
    data["timeline"]["padding"]["path"] = file_name(data["timeline"]["padding"]["path"])
    data["templates_dir"] = file_name(data["templates_dir"])
    if recipe.redact is None:  # added later: a recipe without it keeps its fingerprint
        data.pop("redact")
    else:
        data["redact"] = recipe.redact.fingerprinted()
    return data


BUNDLED = Path(__file__).parent / "data"  # the files gen ships: the quickstart's sample


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_name(path: str | None) -> str | None:
    return None if path is None else PurePath(path).name


def fingerprint(data: Any) -> str:
    canonical = canonical_json({"format_version": FORMAT_VERSION, "recipe": data})
    return hashlib.sha256(canonical.encode()).hexdigest()


def resolve_paths(recipe: Recipe, base: Path, source_dir: Path | None = None) -> None:
    """Relative paths in a recipe are relative to the recipe file's folder. An input named by its file name alone
    (as a run folder's recipe.yaml names them) is looked for in `source_dir` first, then there, then among the
    files gen ships (the bundled sample); a source with a sha256 must match it."""

    def resolve(p: Path | None, field: str) -> Path | None:
        if p is None or p.is_absolute():
            return p
        bare = len(p.parts) == 1
        places = [*([source_dir / p] if source_dir and bare else []), base / p, *([BUNDLED / p] if bare else [])]
        try:
            return next((place.resolve() for place in places if place.exists()), (base / p).resolve())
        except (RuntimeError, OSError) as exc:  # a loop of symbolic links (RuntimeError before Python 3.13)
            raise GenError(f"this path cannot be followed: {exc}", file=recipe.file, field=field) from None

    for index, source in enumerate(recipe.sources):
        source.path = resolve(source.path, f"sources[{index}].path")
        if source.path is not None and not source.path.exists():
            raise GenError(
                f"file not found: {source.path}",
                file=recipe.file,
                field=f"sources[{index}].path",
                expected="a path relative to the recipe's folder, or absolute; for a file name alone, "
                f"{named('--source-dir', 'RunOptions.source_dir')} naming the folder that holds it",
            )
        if source.path is not None and source.sha256 and file_sha256(source.path) != source.sha256:
            raise GenError(
                f"{source.path} is not the file this recipe was run on (its sha256 differs)",
                file=recipe.file,
                field=f"sources[{index}].sha256",
                expected=f"the file with sha256 {source.sha256}",
            )
    padding = recipe.timeline.padding
    padding.path = resolve(padding.path, "timeline.padding.path")
    if padding.path is not None and not padding.path.exists():
        raise GenError(f"file not found: {padding.path}", file=recipe.file, field="timeline.padding.path")
    recipe.templates_dir = resolve(recipe.templates_dir, "templates_dir")
    if recipe.templates_dir is not None and not recipe.templates_dir.is_dir():
        missing = "not a folder" if recipe.templates_dir.exists() else "folder not found"
        raise GenError(
            f"{missing}: {recipe.templates_dir}",
            file=recipe.file,
            field="templates_dir",
            expected="a folder of templates that shadow gen's own, relative to the recipe's folder or absolute",
        )
    recipe.output_dir = resolve(recipe.output_dir, "output_dir")
