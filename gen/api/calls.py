"""What every function of the API does around its work, kept here so that no function does it its own way: its
arguments are of the types its signature names (anything else is one GenError naming the parameter, not a
TypeError deep inside), its options are of the function's own class, and they decide the progress displays for
that call only.

    @api_call(PushOptions)
    def push(run_folder, options: PushOptions | None = None, ...): ...

    @api_call()  # a function without options: its arguments are checked all the same
    def summary(run_folder: str | Path) -> pandas.DataFrame: ...

CallOptions is the base of those options classes (gen.RunOptions excepted: it is the runner's own, in
gen/pipeline/options.py, and its `progress` is its LLM settings' one): frozen, checked when made (OptionsModel:
a value out of range, of the wrong type or misspelt is a GenError naming `Class.field`), and `progress`.
"""

from __future__ import annotations

import collections.abc
import functools
import importlib
import inspect
from collections.abc import Callable
from pathlib import PurePath
from typing import Any, ParamSpec, Protocol, TypeVar

from pydantic import ConfigDict

from gen import progress
from gen.callers import by_command_line, named
from gen.errors import GenError
from gen.progress import ProgressMode
from gen.validation import OptionsModel, path_problem

Params = ParamSpec("Params")
Returned = TypeVar("Returned")


class CallOptions(OptionsModel):
    """The base of an API function's options. `progress`: the displays of this call only (gen/progress.py's
    `chosen`): ``live`` draws them on a terminal, ``plain`` only the LLM steps' plain lines, ``off`` nothing,
    even under a command line that asked; ``auto`` leaves it to the command line (nothing for a program)."""

    model_config = ConfigDict(frozen=True)

    progress: ProgressMode = "auto"


class HasProgress(Protocol):
    @property
    def progress(self) -> str: ...


def api_call(
    kind: type[HasProgress] | None = None,
) -> Callable[[Callable[Params, Returned]], Callable[Params, Returned]]:
    """The decorator of every API function: refuses an argument of a type its signature does not name as one
    GenError; with `kind`, the function's parameter `options` takes a `kind` (or None, for its defaults), and the
    call runs under its options' progress choice, put back as it was when the call returns or raises, so no
    call's choice outlives it."""

    def decorate(function: Callable[Params, Returned]) -> Callable[Params, Returned]:
        signature = inspect.signature(function)
        checked = {name: types for name, types in parameter_types(signature).items() if name != "options"}

        @functools.wraps(function)
        def call(*args: Params.args, **kwargs: Params.kwargs) -> Returned:
            try:
                arguments = signature.bind(*args, **kwargs).arguments
            except TypeError:  # arguments the function itself refuses: let it say so, as Python does
                return function(*args, **kwargs)
            refuse_wrong_types(function.__name__, checked, arguments)
            if kind is None:
                return function(*args, **kwargs)
            options = arguments.get("options")
            refuse_other(function.__name__, kind, options)
            with progress.chosen(options.progress if options is not None else "auto"):
                return function(*args, **kwargs)

        return call

    return decorate


# the types an API signature names, as checked at run time (generics by their origin); a parameter whose
# annotation names another type is left to the function's own checks (a Recipe, an options class)
RUNTIME_TYPES: dict[str, tuple[Any, ...]] = {
    "str": (str,),
    "Path": (PurePath,),
    "None": (type(None),),
    "int": (int,),
    "bool": (bool,),
    "Mapping": (collections.abc.Mapping,),
    "Iterable": (collections.abc.Iterable,),
    "Callable": (collections.abc.Callable,),
    "Recipe": ("gen.recipe:Recipe",),  # imported only when a value is none of the other types
}


def parameter_types(signature: inspect.Signature) -> dict[str, tuple[str, tuple[Any, ...]]]:
    """parameter -> (its annotation, the runtime types it names), for each parameter whose annotation names
    only types of RUNTIME_TYPES (annotations are text here: every API module uses postponed annotations)."""
    found = {}
    for name, parameter in signature.parameters.items():
        annotation = str(parameter.annotation)
        parts = [part.split("[", 1)[0].strip() for part in union_parts(annotation)]
        if parts and all(part in RUNTIME_TYPES for part in parts):
            found[name] = (annotation, tuple(t for part in parts for t in RUNTIME_TYPES[part]))
    return found


def union_parts(annotation: str) -> list[str]:
    """The parts of `a | b[c | d] | e` at the top level: a, b[c | d], e."""
    parts, depth, start = [], 0, 0
    for position, char in enumerate(annotation):
        depth += (char == "[") - (char == "]")
        if char == "|" and depth == 0:
            parts.append(annotation[start:position])
            start = position + 1
    return [*parts, annotation[start:]]


def refuse_wrong_types(
    function: str, checked: dict[str, tuple[str, tuple[Any, ...]]], arguments: dict[str, Any]
) -> None:
    for name, value in arguments.items():
        annotation, types = checked.get(name, ("", (object,)))
        if not any(isinstance(value, resolved(kind)) for kind in types):
            raise GenError(
                f"got a value of type {type(value).__name__}", field=f"{function}({name}=...)", expected=annotation
            )
        problem = path_problem(value) if PurePath in types and isinstance(value, str | PurePath) else None
        if problem:  # at a shell, the path typed names the problem; in a program, the parameter
            shell = by_command_line()
            raise GenError(
                problem,
                file=str(value) if shell else None,
                field=None if shell else f"{function}({name}=...)",
                expected="a path a file system can take",
            )


def refuse_other(function: str, kind: type, options: Any) -> None:
    if options is not None and not isinstance(options, kind):
        raise GenError(
            f"not a {kind.__name__}, got a {type(options).__name__}",
            field=named("options", f"{function}(options=...)"),
            expected=f"gen.{kind.__name__}(...) or None",
        )


def resolved(kind: Any) -> Any:
    """A type of RUNTIME_TYPES, imported first when it is named as "module:Name"."""
    if isinstance(kind, str):
        module, name = kind.split(":")
        return getattr(importlib.import_module(module), name)
    return kind
