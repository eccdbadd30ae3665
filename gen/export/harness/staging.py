"""The export's output folder: built in a hidden sibling, then renamed into place, so a reader never meets a
half-written export and a failed export leaves the previous one as it was. As every folder gen writes, it goes
through gen/folders.py's `NewFolder`: gen replaces only a folder it wrote that nobody added to, or an empty one;
anything else in the way is refused, naming it. That the folder holds no part of the dataset it is made from,
and lies in no part of it, is checked before anything is written (gen/write_guard.py, in the exporter)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gen.folders import NewFolder

MANIFEST = "gen-export.json"
WRITER = "gen export"


class OutputFolder(NewFolder):
    """`with OutputFolder(final) as out:` write into out.path; on success it replaces `final`."""

    def __init__(self, final: Path) -> None:
        super().__init__(final, "the export", "a new path, an empty folder or an earlier export")

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        text = json.dumps({"written_by": WRITER, **manifest}, indent=2, ensure_ascii=False)
        (self.path / MANIFEST).write_text(text + "\n", encoding="utf-8")
