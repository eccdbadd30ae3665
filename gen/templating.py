"""Jinja2 rendering of the files in templates/: sandboxed, undefined variables are errors, and a render is bounded.

A recipe's `templates_dir` may hold anyone's templates, so a render may neither run long nor grow without end:
the sandbox refuses unsafe attribute access and ranges over MAX_RANGE items, the output is cut off past
MAX_OUTPUT_CHARS, and on the main thread a timer stops a render after TIME_LIMIT_S seconds (a loop that prints
nothing is caught there). The timer is set for every render of a run whose recipe brings templates, and for no
other: gen's and plugins' installed templates are code, not input, and setting it costs more than rendering a
short prompt. Whatever goes wrong is one error naming the template file and its line.

Compiling is bounded too. A template file is read through gen/reading.py (at most MAX_TEMPLATE_BYTES of UTF-8
text); its blocks nest at most MAX_BLOCK_DEPTH deep and its brackets MAX_BRACKET_DEPTH deep, checked on the
token stream before jinja2's recursive parser runs; and nothing of it is evaluated at compile time. jinja2
folds constant expressions while compiling (`{{ 10**100000000000 }}` or `{{ "a" * 10**10 }}` would be
computed there, before any render limit applies): the environment is built without its optimizer, and the code
generator never turns an output expression into a constant. Arithmetic that could build a huge value at
render time (`**`, `*` on text or lists, `%` formatting) goes through `bounded_binop`.
"""

from __future__ import annotations

import hashlib
import re
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from pathlib import Path
from time import monotonic
from types import TracebackType
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator
from jinja2.sandbox import SandboxedEnvironment

from gen import reading
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


MAX_TEMPLATE_BYTES = 1 << 20
MAX_BLOCK_DEPTH = 16  # {% if %}, {% for %}... inside each other; Python compiles at most 20 nested loops
MAX_BRACKET_DEPTH = 32  # ( [ { inside each other in one expression
MAX_NUMBER_BITS = 100_000  # a number a template computes with ** (about 30,000 digits)
TEMPLATE_FILE = "a Jinja template: UTF-8 text"
BLOCK_TAGS = {"if", "for", "macro", "call", "filter", "block", "with", "autoescape", "trans"}
LARGE_WIDTH = re.compile(r"%[-#0 +]*(?:\*|\d{7,})|%[-#0 +]*\d*\.(?:\*|\d{7,})")


class RenderTooLong(Exception):
    pass


def bounded_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse, before computing it, an operation whose result would be huge: a power past MAX_NUMBER_BITS, text
    or a list repeated past MAX_OUTPUT_CHARS, a % format with a width or precision of a million or more."""
    if operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        if abs(left) > 1 and right * abs(left).bit_length() > MAX_NUMBER_BITS:
            raise OverflowError(f"a power of more than {MAX_NUMBER_BITS:,} bits")
    elif operator == "*":
        for sequence, times in ((left, right), (right, left)):
            if (
                isinstance(sequence, str | list | tuple)
                and isinstance(times, int)
                and len(sequence) * times > MAX_OUTPUT_CHARS
            ):
                raise OverflowError(f"a repetition of more than {MAX_OUTPUT_CHARS:,} items")
    elif operator == "%" and isinstance(left, str) and LARGE_WIDTH.search(left):
        raise OverflowError("a % format with a width or precision of a million or more, or given by *")


class NoFoldingGenerator(CodeGenerator):
    """jinja2's code generator, except that an output expression is never computed while compiling (only the
    template's literal text is)."""

    def _output_child_to_const(self, node: nodes.Expr, frame: Any, finalize: Any) -> str:
        if not isinstance(node, nodes.TemplateData):
            raise nodes.Impossible()
        return super()._output_child_to_const(node, frame, finalize)


class BoundedEnvironment(SandboxedEnvironment):
    """The sandbox with nothing folded at compile time, and the operators bounded_binop checks intercepted
    (an intercepted operator is never folded either)."""

    code_generator_class = NoFoldingGenerator
    intercepted_binops = frozenset({"**", "*", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        bounded_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def _parse(self, source: str, name: str | None, filename: str | None) -> Any:
        check_nesting(self, source, name, filename)
        return super()._parse(source, name, filename)


class BoundedLoader(jinja2.FileSystemLoader):
    """FileSystemLoader reading each file through gen/reading.py: a regular file, UTF-8, MAX_TEMPLATE_BYTES at
    most."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Any]:
        pieces = jinja2.loaders.split_template_path(template)
        for folder in self.searchpath:
            path = Path(folder, *pieces)
            if path.exists():
                mtime = path.stat().st_mtime
                text = reading.read_text(path, TEMPLATE_FILE, MAX_TEMPLATE_BYTES)
                return text, str(path), lambda path=path, mtime=mtime: path.is_file() and path.stat().st_mtime == mtime
        raise jinja2.TemplateNotFound(template)


def check_nesting(env: jinja2.Environment, source: str, name: str | None, filename: str | None) -> None:
    """Refuse blocks nested past MAX_BLOCK_DEPTH and brackets past MAX_BRACKET_DEPTH, naming the line, from the
    token stream (jinja2's lexer does not recurse; its parser and Python's compiler would fail on deep nesting
    with RecursionError or SyntaxError, far from the template's own line)."""
    blocks = brackets = 0
    after_block_begin = False
    for token in env._tokenize(source, name, filename):
        if after_block_begin and token.type == "name":
            if token.value in BLOCK_TAGS:
                blocks += 1
            elif token.value.startswith("end") and token.value[3:] in BLOCK_TAGS:
                blocks -= 1
        after_block_begin = token.type == "block_begin"
        if token.type in ("lparen", "lbracket", "lbrace"):
            brackets += 1
        elif token.type in ("rparen", "rbracket", "rbrace"):
            brackets -= 1
        if blocks > MAX_BLOCK_DEPTH or brackets > MAX_BRACKET_DEPTH:
            what = f"{MAX_BLOCK_DEPTH} blocks" if blocks > MAX_BLOCK_DEPTH else f"{MAX_BRACKET_DEPTH} brackets"
            raise jinja2.TemplateSyntaxError(f"nested deeper than {what}", token.lineno, name, filename)


@lru_cache(maxsize=1)
def installed_templates_dirs() -> tuple[str, ...]:
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
    return tuple(folders)


@dataclass(frozen=True)
class Templates:
    """The templates a recipe renders with: its own folder (`own`, or None), then gen's, then plugins', the first
    folder holding a name winning. Made once when a recipe is read (gen/recipe.py: `Recipe.templates`) and carried
    with it, so a product, the engine, the card and the Hub export all find the same files; nothing outside this
    module builds a jinja2 Environment or calls jinja2, so every render goes through the limits above.

    A recipe's own folder is input: its renders run under the timer; gen's and plugins' templates are code and
    render without it (see the module docstring). The value holds only `own`: the installed folders are found in
    each process that renders (once, through the `gen.templates` entry points), so a Templates pickled to a
    worker process or a Ray node finds them as they are installed there."""

    own: Path | None = None

    @classmethod
    def of(cls, own: Path | str | None) -> Templates:
        """The templates of a recipe whose templates_dir is `own` (None: gen's and plugins' alone)."""
        return cls(Path(own) if own else None)

    @property
    def search(self) -> tuple[str, ...]:
        """The folders looked in, first match wins: `own`, gen's, plugins'."""
        return ((str(self.own),) if self.own else ()) + installed_templates_dirs()

    def render(self, name: str, **variables: Any) -> str:
        """Render one template file; a missing variable, a syntax error or a render that breaks a limit or fails
        names the template and line."""
        return rendered(self, name, variables)

    def source(self, name: str) -> tuple[str, str]:
        """(source text, file path) of a template."""
        env = environment(self.search)
        loader = env.loader
        assert isinstance(loader, jinja2.FileSystemLoader)  # environment() always builds one
        try:
            source, filename, _ = loader.get_source(env, name)
        except jinja2.TemplateNotFound:
            raise not_found(name) from None
        return source, filename

    def fingerprint(self, name: str) -> str:
        """A short stable id of a template's text (the `prompt_id` of records, and part of plan keys): editing
        what it says changes it; editing its {# comments #} does not."""
        source, _ = self.source(name)
        return hashlib.sha256(COMMENT.sub("", source).encode()).hexdigest()[:12]

    def names(self, folder: str) -> list[str]:
        """The .j2 templates under `folder` (e.g. "time_queries/dialogues/"), over the whole search path, sorted."""
        return sorted(n for n in environment(self.search).list_templates(extensions=["j2"]) if n.startswith(folder))

    def loaded(self, name: str) -> jinja2.Template:
        """The compiled template, its file looked at again (and read again if edited) once RECHECK_S has passed:
        a run renders a prompt per item, and jinja2 alone would look at the file before each render."""
        now = monotonic()
        found = _loaded.get((name, self.search))
        if found is not None and now - found[1] < RECHECK_S:
            return found[0]
        template = self.compiled(name)
        _loaded[name, self.search] = (template, now)
        return template

    def compiled(self, name: str) -> jinja2.Template:
        """The template compiled, or one GenError naming its file and line."""
        try:
            return environment(self.search).get_template(name)
        except jinja2.TemplateSyntaxError as exc:
            raise syntax_error(exc, name) from None
        except jinja2.TemplateNotFound:
            raise not_found(name) from None
        except COMPILE_ERRORS as exc:  # past what the nesting check catches: Python's own limits on the code
            raise GenError(
                f"the template cannot be compiled: {exc.__class__.__name__}: {exc}",
                file=self.source(name)[1],
                expected=f"a template within the limits ({MAX_BLOCK_DEPTH} nested blocks, {MAX_BRACKET_DEPTH} "
                "nested brackets, expressions of a few hundred operators)",
            ) from None


# gen's and plugins' templates alone: what renders without a recipe (scores, harness exports, the judge, a card
# pushed by `gen push`)
INSTALLED = Templates()


def render(name: str, **variables: Any) -> str:
    """Render one of gen's or plugins' templates (no recipe's folder in front of them)."""
    return INSTALLED.render(name, **variables)


def template_id(name: str) -> str:
    """The fingerprint of one of gen's or plugins' templates (see Templates.fingerprint)."""
    return INSTALLED.fingerprint(name)


@lru_cache(maxsize=8)
def environment(search: tuple[str, ...]) -> SandboxedEnvironment:
    """The bounded sandbox over one search path, shared by every Templates with that path."""
    env = BoundedEnvironment(
        loader=BoundedLoader(list(search)),
        optimized=False,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.globals["range"] = bounded_range
    return env


@dataclass(frozen=True)
class HtmlPages:
    """Web pages (gen view's, in `folder`): sandboxed and strict like every template of gen, and escaping HTML,
    since what they show is run data, never trusted markup. `filters` are (name, function) pairs the pages use.
    Kept here so that this module stays the only one that reaches jinja2."""

    folder: Path
    filters: tuple[tuple[str, Callable[[Any], str]], ...] = ()

    def render(self, name: str, **context: Any) -> str:
        return html_environment(self).get_template(name).render(**context)


@lru_cache(maxsize=2)
def html_environment(pages: HtmlPages) -> SandboxedEnvironment:
    env = SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(str(pages.folder)),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(dict(pages.filters))
    return env


def not_found(name: str) -> GenError:
    return GenError("template not found", file=name, expected=f"a file under {builtin_templates_dir()}")


def syntax_error(exc: jinja2.TemplateSyntaxError, name: str) -> GenError:
    return GenError(f"template syntax error: {exc.message}", file=exc.filename or name, record=f"line {exc.lineno}")


COMMENT = re.compile(r"\{#.*?#\}", re.S)  # jinja comments cannot nest, so the first #} ends one
RECHECK_S = 1.0  # how long a loaded template is used before its file is looked at again
_loaded: dict[tuple[str, tuple[str, ...]], tuple[jinja2.Template, float]] = {}
COMPILE_ERRORS = (RecursionError, MemoryError, SyntaxError, ValueError, OverflowError)
RENDER_ERRORS = (
    RenderTooLong,
    jinja2.TemplateError,
    ArithmeticError,
    MemoryError,
    RecursionError,
    TypeError,
    ValueError,
)


def rendered(templates: Templates, name: str, variables: dict[str, Any]) -> str:
    """Templates.render: the timer only when a recipe brings its own folder (the module docstring says why)."""
    template = templates.loaded(name)
    try:
        if templates.own is None:  # only installed templates can be found
            return bounded(template.generate(**variables))
        with TimeLimit(TIME_LIMIT_S):
            return bounded(template.generate(**variables))
    except jinja2.UndefinedError as exc:
        raise GenError(
            f"template uses an undefined variable: {exc.message}",
            file=name,
            expected=f"only the variables given: {', '.join(sorted(variables)) or 'none'}",
        ) from None
    except jinja2.TemplateNotFound:  # an {% include %} of a file that is not there
        raise not_found(name) from None
    except jinja2.TemplateSyntaxError as exc:  # in a template it includes, compiled as the render reaches it
        raise syntax_error(exc, name) from None
    except RENDER_ERRORS as exc:
        filename, line = template_place(exc.__traceback__, template.filename or name)
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


def template_place(trace: TracebackType | None, filename: str) -> tuple[str, int | None]:
    """The file and line of the template being rendered when it failed: the innermost frame that is a template's
    (jinja rewrites its frames so that each names a template file and line; an included template's frame is
    inside its includer's). `filename` is the template rendered, named when no frame is found."""
    place: tuple[str, int | None] = (filename, None)
    while trace is not None:
        code = trace.tb_frame.f_code
        if code.co_filename == filename or "__jinja_exception__" in trace.tb_frame.f_globals:
            place = (code.co_filename, trace.tb_lineno)
        trace = trace.tb_next
    return place
