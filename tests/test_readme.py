"""The README in a newcomer's order, and the docs' links.

The README's first two commands are the ones a fresh clone runs (set up and build the quickstart; run the tests),
word for word; its sections then follow what a newcomer does next, and the internals live in docs/. Every
relative link of the README and of docs/*.md names a file that exists, and a link to a heading names one that
the page has (content moved between pages must not leave a link behind).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")

FIRST_COMMANDS = [
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/gen run recipes/quickstart.yaml",
    ".venv/bin/python -m pytest -q",
]
NEWCOMER_ORDER = [
    "Activate the environment",
    "What gen is",
    "Your first dataset",
    "Look at it: `gen view`",
    "Publish it: `gen push`",
    "Score it: `gen eval`",
]


def test_the_first_two_commands_are_the_fresh_clone_commands():
    blocks = re.findall(r"```(?:bash)?\n(.*?)```", README, flags=re.DOTALL)
    assert [block.strip() for block in blocks[:2]] == FIRST_COMMANDS


def test_the_sections_follow_a_newcomer_and_internals_are_in_docs():
    headings = re.findall(r"^## (.+)$", README, flags=re.MULTILINE)
    assert [heading for heading in headings if heading in NEWCOMER_ORDER] == NEWCOMER_ORDER
    assert headings.index("Score it: `gen eval`") < headings.index("Developing") < headings.index("Performance")
    for internal in ("RAY_SHARD_MAX", "spool", "RAY_OBJECT_STORE_BYTES", "py-spy"):  # moved to docs/
        assert internal not in README, internal
    assert "RAY_SHARD_MAX" in (REPO / "docs" / "large-corpora.md").read_text(encoding="utf-8")
    assert "py-spy" in (REPO / "docs" / "performance.md").read_text(encoding="utf-8")


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slug(heading) for heading in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}


def test_every_relative_link_of_the_readme_and_docs_resolves():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists() or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert broken == []


def test_the_slug_is_githubs():
    assert slug("Scored by the harness's own code, and back") == "scored-by-the-harnesss-own-code-and-back"
    assert slug("products: `type: persona_sql`") == "products-type-persona_sql"
