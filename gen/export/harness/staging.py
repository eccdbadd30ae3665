"""The export's output folder: built in a hidden sibling, then renamed into place, so a reader never meets a
half-written export and a failed export leaves the previous one as it was. As every folder gen writes, it
carries gen's marker (gen/folders.py): gen replaces only a folder it wrote that nobody added to, or an empty
one; anything else in the way is refused, naming it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from gen.errors import GenError
from gen.folders import claim, claimed, dead_siblings, refuse_foreign, seal, swap_into_place, written_by_gen

MANIFEST = "gen-export.json"
WRITER = "gen export"


def refuse_to_replace(final: Path, dataset: Path) -> None:
    resolved, dataset = final.resolve(), dataset.resolve()
    if resolved == dataset or resolved.is_relative_to(dataset) or dataset.is_relative_to(resolved):
        raise GenError(
            "the export must go outside the dataset folder (and not contain it)",
            file=final,
            expected="an --output path beside the dataset",
        )
    refuse_foreign(final, "a new path, an empty folder or an earlier export")  # unresolved: a link is refused


def clean_after_crash(final: Path) -> None:
    """What an export killed mid-way left beside `final`: its temporary folder is removed, and a previous
    export moved aside just before the crash is put back when nothing took its place."""
    for sibling, name, kind, _ in dead_siblings(final.parent):
        if name != final.name or not claimed(sibling):  # a folder of that name gen did not create stays
            continue
        if kind == "old" and not final.exists() and written_by_gen(sibling):
            sibling.rename(final)
        else:
            shutil.rmtree(sibling, ignore_errors=True)


class OutputFolder:
    """`with OutputFolder(final, dataset) as out:` write into out.path; on success it replaces `final`."""

    def __init__(self, final: Path, dataset: Path) -> None:
        self.final = Path(final)
        self.dataset = Path(dataset)
        self.path = self.final.parent / f".{self.final.name}.tmp-{os.getpid()}"

    def __enter__(self) -> OutputFolder:
        refuse_to_replace(self.final, self.dataset)
        try:
            self.final.parent.mkdir(parents=True, exist_ok=True)
            clean_after_crash(self.final)
            if claimed(self.path):  # an earlier process with this pid left it
                shutil.rmtree(self.path)
            claim(self.path)
        except OSError as exc:
            raise GenError(f"cannot create the export folder: {exc.strerror}", file=self.final.parent) from None
        return self

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        text = json.dumps({"written_by": WRITER, **manifest}, indent=2, ensure_ascii=False)
        (self.path / MANIFEST).write_text(text + "\n", encoding="utf-8")

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> Literal[False]:
        if kind is None:
            try:
                self.replace()
            except BaseException:
                shutil.rmtree(self.path, ignore_errors=True)
                raise
            return False
        shutil.rmtree(self.path, ignore_errors=True)
        if isinstance(error, OSError):  # e.g. a full disk: the previous export is intact
            raise GenError(
                f"writing the export failed ({error.strerror or error}); nothing was replaced", file=self.final
            ) from None
        return False

    def replace(self) -> None:
        seal(self.path)
        refuse_to_replace(self.final, self.dataset)  # again: something may have appeared meanwhile
        swap_into_place(self.path, self.final)
