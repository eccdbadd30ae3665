"""The `gen schema` command (registered in gen/cli.py): the recipe's JSON Schema, or its options reference as
Markdown, both made by gen/recipe_schema.py from the models that check a recipe."""

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
    from gen.jsonl import replace_file
    from gen.recipe_schema import options_reference, products, recipe_schema, schema_text, source_formats

    made = recipe_schema(products(builtin_only=builtin), source_formats(builtin_only=builtin))
    text = options_reference(made) if markdown else schema_text(made)
    if output is None:
        typer.echo(text, nl=False)
    else:
        replace_file(output, text.encode("utf-8"), "options reference" if markdown else "recipe schema")
        typer.echo(f"wrote {output}", err=True)
