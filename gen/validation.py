"""Pydantic errors as gen's one-line errors: the first error of a model, with the dotted path of its field in
the file, the nearest valid key for an unknown or missing one, and the value given (shortened)."""

from __future__ import annotations

import difflib
import json
import types
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from gen.errors import GenError

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails


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
    shown = json.dumps(given, default=str)[:80] if not isinstance(given, dict) else "a mapping"
    return f"{error['msg']}, got {shown}"


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
