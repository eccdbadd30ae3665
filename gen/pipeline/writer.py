"""The run folder as it is written: built in a hidden sibling that replaces the previous run only once it is
whole (or is kept aside when the run stops), each shard's records appended to its config's file in
conversation order, and rejects.jsonl gathered at the end."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Literal

from gen.folders import NewFolder, written_by_gen
from gen.jsonl import encode_lines
from gen.pipeline.shards import ShardResult
from gen.pipeline.spool import SPOOL, append_range
from gen.products.registry import Bound

if TYPE_CHECKING:
    from gen.llm.engine import Engine


class RunFolder(NewFolder):
    """`with RunFolder(final) as folder:` write into folder.path; on success it replaces `final` (gen/folders.py
    holds the rules). On an exception the previous `final` is untouched and the partial folder is removed, or
    moved to `kept_at` when the runner set it (a stopped run, or one that failed validation, kept for
    inspection). The runner has checked, before anything was written, that `final` holds none of the recipe's
    inputs (gen/write_guard.py)."""

    def __init__(self, final: Path) -> None:
        super().__init__(final, "the run", "another recipe name or --output-dir")
        self.kept_at: Path | None = None

    def keep_at(self, suffix: str) -> Path:
        """On the way out, keep the partial folder as `.<name>.<suffix>` (replacing an earlier one)."""
        self.kept_at = self.final.parent / f".{self.final.name}.{suffix}"
        return self.kept_at

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> Literal[False]:
        if kind is not None and self.kept_at is not None and not isinstance(error, OSError):
            self.replace(self.kept_at)
            return False
        super().__exit__(kind, error, trace)
        if kind is None:
            self.remove_stopped()
        return False

    def remove_stopped(self) -> None:
        """A run that ended whole supersedes what an earlier stop kept (`.<name>.stopped`, resumed now): removed,
        if gen wrote it and nobody added to it."""
        stopped = self.final.parent / f".{self.final.name}.stopped"
        if written_by_gen(stopped):
            shutil.rmtree(stopped, ignore_errors=True)


class ShardWriter:
    """Appends each shard's records to its config's file and its rejects to a part file per product."""

    def __init__(self, folder: Path, split: str) -> None:
        self.folder, self.split = folder, split
        self.files: dict[str, IO[bytes]] = {}

    def spool_folder(self) -> Path:
        """Where local workers leave their shards' lines (gen/pipeline/spool.py); removed by `close`."""
        path = self.folder / SPOOL
        path.mkdir(exist_ok=True)
        return path

    def write(self, result: ShardResult) -> None:
        for config, lines in result.lines.items():
            self.file(config).write(lines)
        if result.spooled is not None:
            with open(result.spooled.path, "rb") as source:
                for config, (offset, length) in result.spooled.spans.items():
                    target = self.file(config)
                    target.flush()  # the range goes after what is buffered
                    append_range(target.fileno(), source.fileno(), offset, length)
            os.unlink(result.spooled.path)
        for product, rejects in result.rejects.items():
            (self.folder / REJECT_PARTS).mkdir(exist_ok=True)
            with (self.folder / REJECT_PARTS / f"{product}.jsonl").open("ab") as handle:
                handle.write(encode_lines(rejects))

    def file(self, config: str) -> IO[bytes]:
        if config not in self.files:
            path = self.folder / config / f"{self.split}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            self.files[config] = path.open("wb")
        return self.files[config]

    def close(self) -> None:
        for handle in self.files.values():
            handle.close()
        self.files.clear()
        shutil.rmtree(self.folder / SPOOL, ignore_errors=True)


REJECT_PARTS = ".rejects"


def write_rejects(folder: Path, products: list[Bound], engine: Engine | None, stopped: Sequence[dict] = ()) -> int:
    """rejects.jsonl: each product's rejects in build order, then those of a step that stopped the run, then
    the LLM engine's (failed calls); returns how many there are."""
    parts = folder / REJECT_PARTS
    chunks = []
    for bound in products:
        part = parts / f"{bound.name}.jsonl"
        if part.exists():
            chunks.append(part.read_bytes())
            part.unlink()
    if parts.exists():
        parts.rmdir()
    chunks.append(encode_lines(list(stopped)))
    if engine is not None:
        chunks.append(encode_lines(engine.rejects))
    data = b"".join(chunks)
    (folder / "rejects.jsonl").write_bytes(data)
    return data.count(b"\n")
