"""Jinja2 rendering of the files in templates/: sandboxed, undefined variables are errors, and a render is bounded.

A recipe's `templates_dir` may hold anyone's templates, so a render may neither run long nor grow without end:
the sandbox refuses unsafe attribute access and ranges over MAX_RANGE items, the output is cut off past
MAX_OUTPUT_CHARS, and on the main thread a timer stops a render after TIME_LIMIT_S seconds (a loop that prints
nothing is caught there). The timer is set for every render of a run whose recipe brings templates, and for no
other: gen's and plugins' installed templates are code, not input, and setting it costs more than rendering a
short prompt. Whatever goes wrong is one error naming the template file and its line.
"""

from __future__ import annotations

import hashlib
import re
import signal
import threading
from collections.abc import Iterator
from functools import lru_cache
from itertools import islice
from pathlib import Path
from time import monotonic
from types import TracebackType
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from gen.errors import GenError


def builtin_templates_dir() -> Path:
    """templates/ of a source checkout, or the copy packed into the wheel as gen/_templates."""
    packaged = Path(__file__).parent / "_templates"
    return packaged if packaged.is_dir() else Path(__file__).parent.parent / "templates"


MAX_OUTPUT_CHARS = 5_000_000  # far above any prompt or card gen writes
TIME_LIMIT_S = 10.0
MAX_RANGE = 10_000  # the sandbox's own default is 100,000; no wording or card loops further


def bounded_range(*args: int) -> range:
    """The templates' range(): at most MAX_RANGE items."""
    items = range(*args)
    if len(items) > MAX_RANGE:
        raise OverflowError(f"a range of {len(items):,} items, more than {MAX_RANGE:,}")
    return items


class RenderTooLong(Exception):
    pass


def installed_templates_dirs() -> list[str]:
    """The template folders of the `gen.templates` entry point group: gen's own first, then plugins'."""
    from gen.plugins import TEMPLATES, loaded  # importlib.metadata only when a first template is rendered

    folders = []
    for ep, named in loaded(TEMPLATES):
        folder = Path(named()) if callable(named) else None
        if folder is None or not folder.is_dir():
            raise GenError(
                f"{ep.value} does not give a folder of templates",
                record=f"entry point {ep.name!r}",
                field=TEMPLATES,
                expected="a callable returning the path of an existing folder",
            )
        folders.append(str(folder))
    return folders


@lru_cache(maxsize=8)
def environment(extra_dir: str | None = None) -> SandboxedEnvironment:
    """Templates in `extra_dir` (a recipe's own folder of templates) shadow gen's, which shadow plugins'."""
    search = [extra_dir] if extra_dir else []
    search.extend(installed_templates_dirs())
    env = SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(search),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.globals["range"] = bounded_range
    return env


def template_source(name: str, extra_dir: str | None = None) -> tuple[str, str]:
    """(source text, file path) of a template."""
    env = environment(extra_dir)
    loader = env.loader
    assert isinstance(loader, jinja2.FileSystemLoader)  # environment() always builds one
    try:
        source, filename, _ = loader.get_source(env, name)
    except jinja2.TemplateNotFound:
        raise GenError("template not found", file=name, expected=f"a file under {builtin_templates_dir()}") from None
    return source, filename


COMMENT = re.compile(r"\{#.*?#\}", re.S)  # jinja comments cannot nest, so the first #} ends one


def template_id(name: str, extra_dir: str | None = None) -> str:
    """A short stable id of a template's text: editing what it says changes it; editing its {# comments #}
    does not."""
    source, _ = template_source(name, extra_dir)
    return hashlib.sha256(COMMENT.sub("", source).encode()).hexdigest()[:12]


RECHECK_S = 1.0  # how long a loaded template is used before its file is looked at again
_loaded: dict[tuple[str, str | None], tuple[jinja2.Template, float]] = {}


def loaded(name: str, extra_dir: str | None = None) -> jinja2.Template:
    """The compiled template, its file looked at again (and read again if edited) once RECHECK_S has passed:
    a run renders a prompt per item, and jinja2 alone would look at the file before each render."""
    now = monotonic()
    found = _loaded.get((name, extra_dir))
    if found is not None and now - found[1] < RECHECK_S:
        return found[0]
    template = environment(extra_dir).get_template(name)
    _loaded[name, extra_dir] = (template, now)
    return template


def render(name: str, extra_dir: str | None = None, **variables) -> str:
    """Render one template file; a missing variable, a syntax error or a render that breaks a limit or fails names
    the template and line."""
    try:
        template = loaded(name, extra_dir)
        if extra_dir is None:  # only installed templates can be found
            return bounded(template.generate(**variables))
        with TimeLimit(TIME_LIMIT_S):
            return bounded(template.generate(**variables))
    except jinja2.TemplateSyntaxError as exc:
        raise GenError(
            f"template syntax error: {exc.message}", file=exc.filename or name, record=f"line {exc.lineno}"
        ) from None
    except jinja2.UndefinedError as exc:
        raise GenError(
            f"template uses an undefined variable: {exc.message}",
            file=name,
            expected=f"only the variables given: {', '.join(sorted(variables)) or 'none'}",
        ) from None
    except jinja2.TemplateNotFound:
        raise GenError("template not found", file=name, expected=f"a file under {builtin_templates_dir()}") from None
    except (RenderTooLong, jinja2.TemplateError, ArithmeticError, MemoryError, RecursionError, TypeError) as exc:
        filename = template.filename or name
        line = template_line(exc.__traceback__, filename)
        raise GenError(
            f"the template could not be rendered: {exc.__class__.__name__}: {exc}"[:300],
            file=filename,
            record=f"line {line}" if line else None,
            expected=f"a template within the limits ({MAX_RANGE:,} loop items, {MAX_OUTPUT_CHARS:,} characters, "
            f"{TIME_LIMIT_S:g} s)",
        ) from None


CHUNKS_PER_CHECK = 256  # the output's size is checked once per this many chunks, each block joined in C


def bounded(chunks: Iterator[str]) -> str:
    out, size = [], 0
    while block := list(islice(chunks, CHUNKS_PER_CHECK)):
        text = "".join(block)
        size += len(text)
        if size > MAX_OUTPUT_CHARS:
            raise RenderTooLong(f"the output passed {MAX_OUTPUT_CHARS:,} characters")
        out.append(text)
    return "".join(out)


class TimeLimit:
    """Stop the block with RenderTooLong after `seconds` (on the main thread, when no other timer is set). A
    class rather than a generator: a prompt is rendered per item, and this is set and cleared around each."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.previous: Any = None
        self.armed = False

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread() and signal.getitimer(signal.ITIMER_REAL)[0] == 0:
            self.previous = signal.signal(signal.SIGALRM, self.stop)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
            self.armed = True

    def __exit__(self, *exc: object) -> None:
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
            self.armed = False

    def stop(self, signum: int, frame: object) -> None:
        raise RenderTooLong(f"it ran past {self.seconds:g} s")


def template_line(trace: TracebackType | None, filename: str) -> int | None:
    """The line of the template being rendered when it failed (jinja maps its frames back to the file)."""
    line = None
    while trace is not None:
        if trace.tb_frame.f_code.co_filename == filename:
            line = trace.tb_lineno
        trace = trace.tb_next
    return line
