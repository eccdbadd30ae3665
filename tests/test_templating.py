"""Template ids (the `prompt_id` of LLM-written records) follow what a template says, not its comments; an
edited template is what the next render says; a recipe's Templates puts its folder in front of gen's, is the
same object wherever the recipe goes, and is the only way into jinja2."""

from __future__ import annotations

import ast
import hashlib
import os
import pickle
from pathlib import Path

from gen import templating
from gen.products.base import BuildContext
from gen.products.registry import load
from gen.templating import Templates


def test_template_id_ignores_comments_but_not_text(tmp_path):
    folder = tmp_path / "templates" / "prompts"
    folder.mkdir(parents=True)
    template = folder / "mine.j2"
    template.write_text("{#- about this prompt -#}\nAsk {{ who }} about {{ what }}.\n{# trailing note #}")
    first = Templates.of(tmp_path / "templates").fingerprint("prompts/mine.j2")
    assert first == hashlib.sha256(b"\nAsk {{ who }} about {{ what }}.\n").hexdigest()[:12]
    template.write_text("{#- a longer note,\nover two lines -#}\nAsk {{ who }} about {{ what }}.\n")
    assert Templates.of(tmp_path / "templates").fingerprint("prompts/mine.j2") == first
    template.write_text("Ask {{ who }} about {{ what }}, briefly.\n")
    assert Templates.of(tmp_path / "templates").fingerprint("prompts/mine.j2") != first


def test_an_edited_template_is_rendered_once_its_file_is_looked_at_again(tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(templating, "monotonic", lambda: clock[0])
    folder = tmp_path / "templates"
    folder.mkdir()
    template = folder / "hello.j2"
    template.write_text("Hello {{ who }}.")
    assert Templates.of(folder).render("hello.j2", who="Ann") == "Hello Ann."
    template.write_text("Goodbye {{ who }}.")
    stat = template.stat()
    os.utime(template, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a later edit, whatever the clock's grain
    clock[0] += templating.RECHECK_S
    assert Templates.of(folder).render("hello.j2", who="Ann") == "Goodbye Ann."


def test_a_recipe_folder_shadows_gens_templates_and_falls_back_to_them(tmp_path):
    (tmp_path / "llm").mkdir()
    (tmp_path / "llm" / "correction.j2").write_text("Again: {{ error }}")
    mine = Templates.of(tmp_path)
    assert mine.search[0] == str(tmp_path) and mine.search[1:] == Templates().search
    assert mine.render("llm/correction.j2", error="x") == "Again: x"
    assert (
        Templates()
        .render("llm/correction.j2", error="x", expects_json=False, schema="")
        .startswith("Your previous reply could not be used: x")
    )
    gens_card = Templates().source("card/facts.yaml")
    assert mine.source("card/facts.yaml") == gens_card  # what the folder lacks comes from gen's own
    assert gens_card[1] == str(templating.builtin_templates_dir() / "card" / "facts.yaml")


def test_only_a_recipes_own_templates_render_under_the_timer(tmp_path, monkeypatch):
    armed: list[float] = []
    monkeypatch.setattr(templating.TimeLimit, "__enter__", lambda self: armed.append(self.seconds))
    (tmp_path / "hello.j2").write_text("Hello {{ who }}.")
    assert Templates.of(tmp_path).render("hello.j2", who="Ann") == "Hello Ann."
    assert armed == [templating.TIME_LIMIT_S]
    Templates().render("llm/correction.j2", error="x", expects_json=False, schema="")
    assert armed == [templating.TIME_LIMIT_S]  # gen's installed templates are code: no timer


def test_a_recipe_makes_its_templates_once_and_they_travel_with_it(tmp_path):
    (tmp_path / "tpl").mkdir()
    recipe_file = tmp_path / "r.yaml"
    recipe_file.write_text(
        "name: r\ntemplates_dir: tpl\nsources: [{format: locomo, path: r.yaml}]\nproducts: [{type: log}]\n"
    )
    recipe = load(recipe_file).recipe
    assert recipe.templates is recipe.templates
    assert recipe.templates == Templates.of(tmp_path / "tpl")
    copied = pickle.loads(pickle.dumps(BuildContext(recipe)))  # as a worker process receives it
    assert copied.templates == recipe.templates and copied.templates.search == recipe.templates.search


def test_no_module_but_templating_reaches_jinja2():
    root = Path(templating.__file__).parents[1]
    users = set()
    for path in (root / "gen").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            if any(name == "jinja2" or name.startswith("jinja2.") for name in names):
                users.add(path.relative_to(root).as_posix())
    assert users == {"gen/templating.py"}
