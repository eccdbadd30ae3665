"""`gen schema` and `gen products` (registered in gen/cli/main.py): what a recipe may say, made from the installed
products and source formats, through gen.schema and gen.list_products (gen/api/tools.py)."""

from __future__ import annotations

from pathlib import Path

import typer


def schema(
    output: Path | None = typer.Option(
        None, "--output", help="Write it to this file (replaced whole, never half-written) instead of printing it."
    ),
    markdown: bool = typer.Option(False, "--markdown", help="The options reference as Markdown, not the schema."),
    builtin: bool = typer.Option(
        False,
        "--builtin",
        help="Only gen's own products and source formats, as in the committed recipe.schema.json and "
        "docs/recipe-options.md (default: every installed one, plugins' too).",
    ),
) -> None:
    """Print the JSON Schema of a recipe (every key, its type, range, default and meaning, and each product's
    options), or with --markdown the options reference made from it.

    Example: gen schema --builtin --output recipe.schema.json
    """
    import gen

    text = gen.schema(markdown=markdown, builtin=builtin, output=output)
    if output is None:
        typer.echo(text, nl=False)
    else:
        typer.echo(f"wrote {output}", err=True)


def products() -> None:
    """List the products a recipe can name under `products: - type: ...`.

    Example: gen products
    """
    import gen

    described = gen.list_products()
    width = max(len(name) for name in described)
    for name, description in described.items():
        typer.echo(f"{name.ljust(width)}  {description}")
