"""Writes a run folder without ever losing what is already there.

Layout: <config>/<split>.jsonl per product, README.md (dataset card), run.json, rejects.jsonl, recipe.yaml.

Everything is built in a temporary sibling `.<name>.tmp-<pid>`, then put in place by two renames: the old
folder to `.<name>.old-<pid>`, the new one to `<name>`. A crash between the two leaves both siblings, and the
next run into that output directory puts the complete new folder (or, failing that, the old one) back under
the name before anything else. gen replaces only folders it wrote itself (they hold its run.json), never a
folder holding one of the recipe's inputs, and removes the temporary siblings of processes that are gone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal

from gen.errors import GenError

SIBLING = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)$")


def written_by_gen(folder: Path) -> bool:
    """A folder gen wrote: it holds a run.json with gen's report keys."""
    try:
        report = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(report, dict) and {"recipe", "packages", "configs"} <= report.keys()


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def dead_siblings(parent: Path) -> list[tuple[Path, str, str, int]]:
    """(path, name, kind, pid) of the temporary and old siblings whose process is gone."""
    found = []
    for entry in parent.iterdir() if parent.is_dir() else ():
        match = SIBLING.match(entry.name)
        if match and entry.is_dir() and not process_alive(int(match["pid"])):
            found.append((entry, match["name"], match["kind"], int(match["pid"])))
    return found


def recover_and_clean(parent: Path, say: Callable[[str], None]) -> None:
    """Undo what a crash left in `parent`: a name emptied between the two renames gets its complete new
    folder (or its old one) back; then the dead processes' siblings are removed."""
    siblings = dead_siblings(parent)
    for path, name, kind, pid in siblings:
        target = parent / name
        if kind != "old" or target.exists():
            continue
        new = parent / f".{name}.tmp-{pid}"
        restored = new if (new / "README.md").is_file() and written_by_gen(new) else path
        restored.rename(target)
        which = "the completed new run" if restored == new else "the previous run"
        say(f"recovered {target} ({which}) after an interrupted replace")
    for path, _, _, _ in dead_siblings(parent):
        shutil.rmtree(path, ignore_errors=True)


def refuse_to_replace(final: Path, inputs: Sequence[Path]) -> None:
    """Raise unless `final` is free or a folder gen wrote that holds none of the recipe's inputs."""
    resolved = final.resolve()
    for path in inputs:
        if path.resolve() == resolved or path.resolve().is_relative_to(resolved):
            raise GenError(
                f"the output folder holds the recipe's input {path}; gen never replaces its own inputs",
                file=final,
                expected="another recipe name or --output-dir",
            )
    if final.exists() and not (final.is_dir() and written_by_gen(final)):
        kind = "folder" if final.is_dir() else "file"
        raise GenError(
            f"a {kind} gen did not write is in the way (no gen run.json in it); not replacing it",
            file=final,
            expected="another recipe name or --output-dir, or move it yourself",
        )


class RunFolder:
    """`with RunFolder(final, inputs) as folder:` write into folder.path; on success it replaces `final`.
    On an exception the previous `final` is untouched and the partial folder is removed, or moved to
    `kept_at` when the runner set it (a stopped run, or one that failed validation, kept for inspection)."""

    def __init__(self, final: Path, inputs: Sequence[Path] = (), say: Callable[[str], None] = lambda _: None) -> None:
        self.final = final
        self.inputs = inputs
        self.say = say
        self.path = final.parent / f".{final.name}.tmp-{os.getpid()}"
        self.kept_at: Path | None = None

    def keep_at(self, suffix: str) -> Path:
        """On the way out, keep the partial folder as `.<name>.<suffix>` (replacing an earlier one)."""
        self.kept_at = self.final.parent / f".{self.final.name}.{suffix}"
        return self.kept_at

    def __enter__(self) -> RunFolder:
        try:
            self.final.parent.mkdir(parents=True, exist_ok=True)
            recover_and_clean(self.final.parent, self.say)
        except OSError as exc:
            raise GenError(f"cannot prepare the output folder: {exc.strerror}", file=self.final.parent) from None
        refuse_to_replace(self.final, self.inputs)
        try:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path.mkdir()
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
        if target.exists() and not written_by_gen(target):  # appeared while the run was going
            refuse_to_replace(target, ())
        swap_into_place(self.path, target)


def swap_into_place(new: Path, target: Path) -> None:
    """Put the folder `new` at `target` by two renames, the old `target` aside first as `.<name>.old-<pid>`. A
    crash between the two leaves both siblings for the next start to resolve."""
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    if target.exists():
        target.rename(old)
    new.rename(target)
    shutil.rmtree(old, ignore_errors=True)
