"""Template ids (the `prompt_id` of LLM-written records) follow what a template says, not its comments; an
edited template is what the next render says."""

from __future__ import annotations

import hashlib
import os

from gen import templating
from gen.templating import render, template_id


def test_template_id_ignores_comments_but_not_text(tmp_path):
    folder = tmp_path / "templates" / "prompts"
    folder.mkdir(parents=True)
    template = folder / "mine.j2"
    template.write_text("{#- about this prompt -#}\nAsk {{ who }} about {{ what }}.\n{# trailing note #}")
    first = template_id("prompts/mine.j2", str(tmp_path / "templates"))
    assert first == hashlib.sha256(b"\nAsk {{ who }} about {{ what }}.\n").hexdigest()[:12]
    template.write_text("{#- a longer note,\nover two lines -#}\nAsk {{ who }} about {{ what }}.\n")
    assert template_id("prompts/mine.j2", str(tmp_path / "templates")) == first
    template.write_text("Ask {{ who }} about {{ what }}, briefly.\n")
    assert template_id("prompts/mine.j2", str(tmp_path / "templates")) != first


def test_an_edited_template_is_rendered_once_its_file_is_looked_at_again(tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(templating, "monotonic", lambda: clock[0])
    folder = tmp_path / "templates"
    folder.mkdir()
    template = folder / "hello.j2"
    template.write_text("Hello {{ who }}.")
    assert render("hello.j2", str(folder), who="Ann") == "Hello Ann."
    template.write_text("Goodbye {{ who }}.")
    stat = template.stat()
    os.utime(template, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a later edit, whatever the clock's grain
    clock[0] += templating.RECHECK_S
    assert render("hello.j2", str(folder), who="Ann") == "Goodbye Ann."
