"""Pydantic errors as gen's one-line errors: the first error of a model, with the dotted path of its field in
the file, the nearest valid key for an unknown or missing one, and the value given (shortened).

InputModel is the base of every model a user's file is read into (the recipe, its products' options, its
endpoints, its export): one place that says what a number in a recipe may be. A float must be finite (YAML's
`.inf` and `.nan`, and text like "-1e999" that reads as infinity, are refused) and a whole number must lie
within ±MAX_WHOLE_NUMBER, the largest a JSON reader keeps exactly (run.json and the cards quote these values,
and a number past it overflows dates and durations). Fields whose number decides how much is allocated or
started carry their own, smaller upper bound beside it.
"""

from __future__ import annotations

import difflib
import json
import os
import types
import typing
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator
from pydantic.fields import FieldInfo

from gen.callers import named
from gen.errors import GenError, shorten

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails


MAX_WHOLE_NUMBER = 2**53 - 1


def out_of_range(value: Any) -> str | None:
    """Where in `value` (a field's validated value) a whole number lies out of range: "" for the value itself,
    "[2]" or ".key" inside it; None when every whole number is in range. Walked without recursion."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        place, item = pending.pop()
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) > MAX_WHOLE_NUMBER:
            return place
        if isinstance(item, list | tuple):
            pending.extend((f"{place}[{index}]", each) for index, each in enumerate(item))
        elif isinstance(item, dict):
            pending.extend((f"{place}.{key}", each) for key, each in item.items())
    return None


class InputModel(BaseModel):
    """The base of every model read from a user's file: unknown keys refused, floats finite, whole numbers in
    range (see the module's docstring)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def no_empty_path(cls, value: Any, info: ValidationInfo) -> Any:
        """A path no file system can take is refused as what it is (path_problem), not where it is first used."""
        if not isinstance(value, str | Path) or not info.field_name or not takes_path(cls, info.field_name):
            return value
        problem = path_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("*", mode="after")
    @classmethod
    def whole_numbers_in_range(cls, value: Any) -> Any:
        place = out_of_range(value)
        if place is not None:
            raise ValueError(
                f"a whole number{f' (at {place})' if place else ''} outside ±{MAX_WHOLE_NUMBER:,} (2**53 - 1)"
            )
        return value


class OptionsModel(InputModel):
    """The base of the settings a Python caller builds (gen.RunOptions, RunSettings, RateLimits, and every options
    object of gen's API: gen/api/calls.py's CallOptions): InputModel's
    checks, and a value out of its range, of the wrong type or under an unknown name is a GenError when the
    object is made, naming the field and the range or type expected, as the command line says it for its own
    options; never pydantic's ValidationError. The ranges live on the fields; the command line's options for the
    same settings have the same ranges (gen/cli/options.py's RANGES, held equal by a test).

    Made in code (RunOptions(...)) or nested in another's (RunOptions(llm={"limits": {...}})), the check runs here:
    pydantic calls a model's own __init__ for a nested mapping too, so the field is named from the innermost
    model that refused it."""

    # a field's command-line option, where it is not "--" and the field's name with dashes (json_out: --json)
    command_line_options: ClassVar[dict[str, str]] = {}

    def __init__(self, /, *given: Any, **data: Any) -> None:
        if given:  # pydantic's TypeError would not say which settings there are
            name = type(self).__name__
            raise GenError(
                f"settings are given by name, got {len(given)} without one",
                field=name,
                expected=f"{name}({', '.join(f'{key}=...' for key in type(self).model_fields)})",
            )
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise options_error(type(self), exc) from None


def options_error(model: type[BaseModel], exc: ValidationError) -> GenError:
    """The first error, naming the field as its caller knows it (gen/callers.py): `EvalOptions.json_out` to a
    program, the option it came from (`--json`) at a shell."""
    first = exc.errors()[0]
    loc = tuple(first["loc"])
    field = f"{model.__name__}.{dotted(loc)}" if loc else model.__name__
    if loc and isinstance(loc[-1], str):
        given = getattr(model, "command_line_options", {})
        field = named(given.get(loc[-1], "--" + loc[-1].replace("_", "-")), field)
    return GenError(describe(model, first, loc), field=field, expected=expected_at(model, loc))


def expected_at(model: type[BaseModel], loc: tuple) -> str | None:
    """What the field at `loc` takes: its range when it has one ("a number at least 1 and at most 1,024"), else
    its type."""
    found = field_at(model, loc)
    if found is None:
        return None
    words = {"ge": "at least", "gt": "more than", "le": "at most", "lt": "less than"}
    limits = [f"{words[a]} {number(getattr(m, a))}" for m in found.metadata for a in words if hasattr(m, a)]
    return "a number " + " and ".join(limits) if limits else type_text(found.annotation)


def number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"


def type_text(annotation: Any) -> str:
    """A field's type as a caller reads it: "'local' or 'ray'", "Path or None", "int"."""
    if typing.get_origin(annotation) is typing.Literal:
        return " or ".join(repr(choice) for choice in typing.get_args(annotation))
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " or ".join(type_text(part) for part in typing.get_args(annotation))
    return "None" if annotation is type(None) else getattr(annotation, "__name__", str(annotation))


def field_at(model: type[BaseModel], loc: tuple) -> FieldInfo | None:
    """The field of `model` at `loc` (through nested models), or None."""
    current: Any = model
    found = None
    for part in loc:
        current = unwrap(current)
        if not (isinstance(part, str) and isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        found = current.model_fields.get(part)
        if found is None:
            return None
        current = found.annotation
    return found


NAME_MAX = 255  # bytes in one name of a path, and in a whole path: Linux's limits (ext4, tmpfs, xfs and others)
PATH_MAX = 4096


def path_problem(value: str | PurePath) -> str | None:
    """What makes `value` a path no file system takes, or None: empty ("" would read as "." to pathlib, the
    current folder), a NUL character, a name longer than NAME_MAX bytes, or more than PATH_MAX bytes in all.
    Python's os calls would fail on each wherever the path is first used, far from the setting that gave it; the
    recipe's and options' path fields (InputModel) and the API's path arguments (gen/api/calls.py) ask here."""
    text = value if isinstance(value, str) else str(value)
    if not text.strip():
        return "an empty path"
    if "\x00" in text:
        return "a path with a NUL character"
    try:
        encoded = os.fsencode(text)
    except UnicodeEncodeError:
        return "a path that cannot be written as a file name (a lone surrogate)"
    if len(encoded) > PATH_MAX:
        return f"a path of more than {PATH_MAX:,} bytes"
    if any(len(name) > NAME_MAX for name in encoded.split(b"/")):
        return f"a path with a name of more than {NAME_MAX} bytes (a file system takes {NAME_MAX} at most)"
    return None


def takes_path(model: type[BaseModel], name: str) -> bool:
    """Is the field `name` of `model` a path (alone, optional, or in a union)?"""
    annotation = model.model_fields[name].annotation
    return annotation is Path or Path in typing.get_args(annotation)


def validate_model(model: type[BaseModel], data: Any, file: Path, prefix: tuple) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        if first["type"] == "missing":  # say where the key belongs, not the key itself
            raise GenError(missing_key(model, first, loc), file=file, field=dotted(prefix + loc[:-1]) or None) from None
        raise GenError(describe(model, first, loc), file=file, field=dotted(prefix + loc) or "(top level)") from None


def missing_key(model: type[BaseModel], error: ErrorDetails, loc: tuple) -> str:
    """ "missing key 'sources'", and the unknown key given in its place when one is close ("found 'source'")."""
    key = str(loc[-1])
    given = error.get("input")
    unknown = [str(k) for k in given if k not in valid_keys(model, loc[:-1])] if isinstance(given, dict) else []
    near = difflib.get_close_matches(key, unknown, n=1)
    return f"missing key {key!r}" + (f"; found {near[0]!r}; did you mean {key!r}?" if near else "")


def dotted(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def describe(model: type[BaseModel], error: ErrorDetails, loc: tuple) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1])
        near = difflib.get_close_matches(key, valid_keys(model, loc[:-1]), n=1)
        return f"unknown key {key!r}" + (f"; did you mean {near[0]!r}?" if near else "")
    given = error.get("input")
    message = error["msg"].removeprefix("Value error, ")  # gen's own validators say what is wrong themselves
    if kind == "value_error" and isinstance(given, dict):
        return message  # a check over a whole section: "got a mapping" would say nothing
    return f"{message}, got {shown_value(given)}"


def shown_value(given: Any) -> str:
    """The value a field was given, as JSON cut to a short length (a whole number of more digits than Python
    writes out is named by its size)."""
    if isinstance(given, dict):
        return "a mapping"
    if isinstance(given, int) and abs(given).bit_length() > 10_000:
        return f"a whole number of about {int(abs(given).bit_length() * 0.30103):,} digits"
    try:
        return shorten(json.dumps(given, default=str), 80)
    except ValueError:  # a whole number too long to write, inside a list
        return type(given).__name__


def valid_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """The field names of the model found at `loc` (walking through lists, dicts and optionals)."""
    current: Any = model
    for part in loc:
        current = unwrap(current)
        if isinstance(part, str) and isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part)
            if field is None:
                return []
            current = field.annotation
        elif typing.get_origin(current) in (list, dict):
            current = typing.get_args(current)[-1]
    current = unwrap(current)
    return list(current.model_fields) if isinstance(current, type) and issubclass(current, BaseModel) else []


def unwrap(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return next((a for a in typing.get_args(annotation) if a is not type(None)), annotation)
    return annotation
