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

from gen.errors import GenError
from gen.folders import claim, claimed, recover_and_clean, refuse_foreign, seal, swap_into_place
from gen.jsonl import encode_lines
from gen.products.registry import Bound
from gen.run.shards import ShardResult
from gen.run.spool import SPOOL, append_range

if TYPE_CHECKING:
    from gen.llm.engine import Engine


def refuse_to_replace(final: Path, inputs: Sequence[Path]) -> None:
    """Raise unless `final` is free or a folder gen wrote, untouched, that holds none of the recipe's inputs."""
    resolved = final.resolve()
    for path in inputs:
        if path.resolve() == resolved or path.resolve().is_relative_to(resolved):
            raise GenError(
                f"the output folder holds the recipe's input {path}; gen never replaces its own inputs",
                file=final,
                expected="another recipe name or --output-dir",
            )
    refuse_foreign(final, "another recipe name or --output-dir")


class RunFolder:
    """`with RunFolder(final, inputs) as folder:` write into folder.path; on success it replaces `final`.
    On an exception the previous `final` is untouched and the partial folder is removed, or moved to
    `kept_at` when the runner set it (a stopped run, or one that failed validation, kept for inspection)."""

    def __init__(self, final: Path, inputs: Sequence[Path] = ()) -> None:
        self.final = final
        self.inputs = inputs
        self.path = final.parent / f".{final.name}.tmp-{os.getpid()}"
        self.kept_at: Path | None = None

    def keep_at(self, suffix: str) -> Path:
        """On the way out, keep the partial folder as `.<name>.<suffix>` (replacing an earlier one)."""
        self.kept_at = self.final.parent / f".{self.final.name}.{suffix}"
        return self.kept_at

    def __enter__(self) -> RunFolder:
        try:
            self.final.parent.mkdir(parents=True, exist_ok=True)
            recover_and_clean(self.final.parent)
        except OSError as exc:
            raise GenError(f"cannot prepare the output folder: {exc.strerror}", file=self.final.parent) from None
        refuse_to_replace(self.final, self.inputs)
        try:
            if claimed(self.path):  # an earlier process with this pid left it
                shutil.rmtree(self.path)
            claim(self.path)
        except OSError as exc:
            raise GenError(f"cannot create the output folder: {exc.strerror}", file=self.final.parent) from None
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> Literal[False]:
        if kind is None:
            self.replace(self.final)
            return False
        if self.kept_at is not None and not isinstance(error, OSError):
            self.replace(self.kept_at)
            return False
        shutil.rmtree(self.path, ignore_errors=True)
        if isinstance(error, OSError):  # e.g. a full disk: say so plainly, the old output is intact
            raise GenError(
                f"writing the run failed ({error.strerror or error}); the previous output is unchanged",
                file=self.final,
            ) from None
        return False

    def replace(self, target: Path) -> None:
        seal(self.path)
        refuse_foreign(target, "another recipe name or --output-dir")  # again: it may have appeared meanwhile
        swap_into_place(self.path, target)


class ShardWriter:
    """Appends each shard's records to its config's file and its rejects to a part file per product."""

    def __init__(self, folder: Path, split: str) -> None:
        self.folder, self.split = folder, split
        self.files: dict[str, IO[bytes]] = {}

    def spool_folder(self) -> Path:
        """Where local workers leave their shards' lines (gen/run/spool.py); removed by `close`."""
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
