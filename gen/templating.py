"""Jinja2 rendering of the files in templates/: sandboxed, and undefined variables are errors."""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from gen.errors import GenError


def builtin_templates_dir() -> Path:
    """templates/ of a source checkout, or the copy packed into the wheel as gen/_templates."""
    packaged = Path(__file__).parent / "_templates"
    return packaged if packaged.is_dir() else Path(__file__).parent.parent / "templates"


@lru_cache(maxsize=8)
def environment(extra_dir: str | None = None) -> SandboxedEnvironment:
    """Templates in `extra_dir` (a recipe's own folder of templates) shadow the built-in ones."""
    search = [extra_dir] if extra_dir else []
    search.append(str(builtin_templates_dir()))
    return SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(search),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


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


def render(name: str, extra_dir: str | None = None, **variables) -> str:
    """Render one template file; a missing variable or a syntax error names the template and line."""
    env = environment(extra_dir)
    try:
        return env.get_template(name).render(**variables)
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
