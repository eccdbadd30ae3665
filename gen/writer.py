"""Writes a run folder atomically: build everything in a temporary sibling folder, then rename.

Layout: <config>/<split>.jsonl per product, README.md (dataset card), run.json, rejects.jsonl, recipe.yaml.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import TracebackType
from typing import Literal

from gen.errors import GenError


class RunFolder:
    """`with RunFolder(final) as folder:` write into folder.path; on success it replaces `final` in one rename.
    On an exception the previous `final` is untouched and the partial folder is removed, or moved to
    `keep_failed_at` when that is set (a run that failed validation, kept for inspection)."""

    def __init__(self, final: Path) -> None:
        self.final = final
        self.path = final.parent / f".{final.name}.tmp-{os.getpid()}"
        self.keep_failed_at: Path | None = None

    def __enter__(self) -> RunFolder:
        try:
            self.final.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(self.path, ignore_errors=True)
            self.path.mkdir()
        except OSError as exc:
            raise GenError(f"cannot create the output folder: {exc.strerror}", file=self.final.parent) from None
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> Literal[False]:
        if kind is not None:
            if self.keep_failed_at is not None and not isinstance(error, OSError):
                self.replace(self.keep_failed_at)
                return False
            shutil.rmtree(self.path, ignore_errors=True)
            if isinstance(error, OSError):  # e.g. a full disk: say so plainly, the old output is intact
                raise GenError(
                    f"writing the run failed ({error.strerror or error}); the previous output is unchanged",
                    file=self.final,
                ) from None
            return False
        self.replace(self.final)
        return False

    def replace(self, target: Path) -> None:
        old = target.parent / f".{target.name}.old-{os.getpid()}"
        if target.exists():
            target.rename(old)
        self.path.rename(target)
        shutil.rmtree(old, ignore_errors=True)
