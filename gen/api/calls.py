"""What every function of the API that takes an options object does around its work, kept here so that no
function does it its own way: the options are of the function's own class (anything else is one GenError, not an
AttributeError deep inside), and they decide the progress displays for that call only.

    @api_call(PushOptions)
    def push(run_folder, options: PushOptions | None = None, ...): ...

CallOptions is the base of those options classes (gen.RunOptions excepted: it is the runner's own, in
gen/pipeline/options.py, and its `progress` is its LLM settings' one): frozen, checked when made (OptionsModel:
a value out of range, of the wrong type or misspelt is a GenError naming `Class.field`), and `progress`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar

from pydantic import ConfigDict

from gen import progress
from gen.callers import named
from gen.errors import GenError
from gen.progress import ProgressMode
from gen.validation import OptionsModel

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


def api_call(kind: type[HasProgress]) -> Callable[[Callable[Params, Returned]], Callable[Params, Returned]]:
    """The decorator of an API function whose parameter `options` takes a `kind` (or None, for its defaults):
    refuses any other value as one GenError, then runs the call under its options' progress choice, put back as
    it was when the call returns or raises, so no call's choice outlives it."""

    def decorate(function: Callable[Params, Returned]) -> Callable[Params, Returned]:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def call(*args: Params.args, **kwargs: Params.kwargs) -> Returned:
            try:
                options = signature.bind(*args, **kwargs).arguments.get("options")
            except TypeError:  # arguments the function itself refuses: let it say so, as Python does
                return function(*args, **kwargs)
            refuse_other(function.__name__, kind, options)
            with progress.chosen(options.progress if options is not None else "auto"):
                return function(*args, **kwargs)

        return call

    return decorate


def refuse_other(function: str, kind: type, options: Any) -> None:
    if options is not None and not isinstance(options, kind):
        raise GenError(
            f"not a {kind.__name__}, got a {type(options).__name__}",
            field=named("options", f"{function}(options=...)"),
            expected=f"gen.{kind.__name__}(...) or None",
        )
