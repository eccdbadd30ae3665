"""Template ids (the `prompt_id` of LLM-written records) follow what a template says, not its comments."""

from __future__ import annotations

import hashlib

from gen.templating import template_id


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
