"""The export's output folder: built in a hidden sibling, then renamed into place, so a reader never meets a
half-written export and a failed export leaves the previous one as it was. gen replaces only a folder that
holds its manifest (gen-export.json) or an empty one; anything else in the way is refused."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from gen.errors import GenError
from gen.writer import dead_siblings, swap_into_place

MANIFEST = "gen-export.json"
WRITER = "gen export"


def written_by_export(folder: Path) -> bool:
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("written_by") == WRITER


def refuse_to_replace(final: Path, dataset: Path) -> None:
    final, dataset = final.resolve(), dataset.resolve()
    if final == dataset or final.is_relative_to(dataset) or dataset.is_relative_to(final):
        raise GenError(
            "the export must go outside the dataset folder (and not contain it)",
            file=final,
            expected="an --output path beside the dataset",
        )
    if not final.exists() or (final.is_dir() and (written_by_export(final) or not any(final.iterdir()))):
        return
    kind = "folder" if final.is_dir() else "file"
    raise GenError(
        f"a {kind} gen export did not write is in the way (no {MANIFEST} in it); not replacing it",
        file=final,
        expected="a new path, an empty folder or an earlier export",
    )


def clean_after_crash(final: Path) -> None:
    """What an export killed mid-way left beside `final`: its temporary folder is removed, and a previous
    export moved aside just before the crash is put back when nothing took its place."""
    for sibling, name, kind, _ in dead_siblings(final.parent):
        if name != final.name:
            continue
        if kind == "old" and not final.exists() and written_by_export(sibling):
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
            shutil.rmtree(self.path, ignore_errors=True)
            self.path.mkdir()
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
        refuse_to_replace(self.final, self.dataset)  # again: something may have appeared meanwhile
        swap_into_place(self.path, self.final)
