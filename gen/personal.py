"""People's own conversations: which sources hold them, and the one check every upload of a run goes through.

A source holds people's own logs when its reader declares it (`personal=True` in its `SourceFormat`, as
gen's chat_logs, messages, sharegpt, chatgpt, csv and tsv do: gen/sources/builtin.py), unless the recipe's
source entry says otherwise (`personal: true|false`, for a corpus of one's own written in a published format,
or a made-up file in chat_logs form). The run records the answer per source in run.json
(`sources[].personal`), so `gen push` and the card decide from the run folder alone, the same way whichever
command reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gen.errors import GenError
from gen.recipe import SourceSpec
from gen.sources import reads_own_logs

FLAG = "--personal-data-ok"
RECIPE_KEY = "export.hub.personal_data_ok"
CARD_SECTION = "Personal and sensitive information"


def source_is_personal(spec: SourceSpec) -> bool:
    """Whether one of the recipe's sources holds people's own logs: its entry's `personal`, else its reader's
    declaration."""
    return spec.personal if spec.personal is not None else reads_own_logs(spec.format)


def entry_is_personal(source: dict[str, Any]) -> bool:
    """Whether one of run.json's sources holds people's own logs: as the run recorded it, or, for a run.json
    written before gen recorded it, as the source's format says."""
    recorded = source.get("personal")
    return recorded if isinstance(recorded, bool) else reads_own_logs(str(source.get("format")))


def personal_sources(report: dict[str, Any]) -> list[dict[str, Any]]:
    """run.json's sources that hold people's own logs."""
    return [s for s in report.get("sources") or [] if isinstance(s, dict) and entry_is_personal(s)]


def describe(sources: list[dict[str, Any]]) -> str:
    """The sources as a message names them: file name (or Hub id) and format."""
    return ", ".join(
        f"{Path(str(s.get('origin_name') or s.get('origin') or '?')).name} ({s.get('format', '?')})" for s in sources
    )


def refuse_unconsented_upload(report: dict[str, Any], consented: bool, run_dir: Path) -> None:
    """The check before anything of a run leaves the machine (`gen push`, and `export: hub:` at the end of
    `gen run`, which pushes the same way): a run made from people's own logs needs the publisher's explicit
    word. Here, in one place, so that no way of publishing skips it."""
    own = personal_sources(report)
    if own and not consented:
        raise GenError(
            f"this run was made from people's own conversations ({describe(own)}), and uploading it can expose "
            f"them. Read the section {CARD_SECTION!r} of {Path(run_dir) / 'README.md'}, replace what must not be "
            "public (the recipe's `redact:` step) or get the agreement of the people in the logs, then push again "
            f"with {FLAG}",
            file=Path(run_dir) / "run.json",
            field="sources",
            expected=f"{FLAG} on the command line (or {RECIPE_KEY}: true for a push at the end of `gen run`)",
        )
