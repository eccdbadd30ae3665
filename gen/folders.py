"""Writes a folder (a run, an export) without ever losing what is already there.

A run folder holds <config>/<split>.jsonl per product, README.md (the card), run.json, rejects.jsonl, recipe.yaml.

Everything is built in a temporary sibling `.<name>.tmp-<pid>`, then put in place by two renames: the old
folder to `.<name>.old-<pid>`, the new one to `<name>`. A crash between the two leaves both siblings, and the
next run into that output directory puts the complete new folder (or, failing that, the old one) back under
the name before anything else.

What gen wrote is recognised by its marker, `.gen-files.json`: put in a folder the moment gen creates it (so a
crash leaves a folder gen may sweep) and completed, last, with the list of every file gen wrote there. gen
replaces or removes a folder only when it carries the marker and holds nothing else (a file added by hand, a
symbolic link: the folder is refused, naming them), and never follows a symbolic link in place of the folder.
That no folder it replaces holds, or lies inside, something the command reads is checked before anything is
written, by gen/write_guard.py. Every command that writes a folder (`gen run`,
`gen push --export-dir`, `gen export`) goes through `NewFolder`, which holds these rules: a second copy of them
would drift.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path
from types import TracebackType
from typing import Literal, Self

from gen import stopping
from gen.errors import GenError
from gen.write_guard import MARKER

log = logging.getLogger(__name__)

SIBLING = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)$")
WRITER = "gen"
# Run folders written before the marker existed: recognised by run.json's report keys and the files a run writes
LEGACY_FILES = {"README.md", "run.json", "recipe.yaml", "rejects.jsonl"}


def claim(folder: Path) -> None:
    """Create `folder` as gen's own (the marker first, with no file list yet: gen is still writing it)."""
    folder.mkdir()
    (folder / MARKER).write_text(json.dumps({"written_by": WRITER, "files": None}) + "\n", encoding="utf-8")


def seal(folder: Path) -> None:
    """Complete the marker with every file gen wrote into `folder` (call it last)."""
    files = sorted(path for path in entries(folder) if path != MARKER)
    text = json.dumps({"written_by": WRITER, "files": files}, indent=1)
    (folder / MARKER).write_text(text + "\n", encoding="utf-8")


def entries(folder: Path) -> list[str]:
    """Every file, symbolic link and empty folder under `folder`, as posix paths relative to it; links are
    listed, never followed."""
    found = []
    for root, dirs, files in os.walk(folder):
        base = Path(root).relative_to(folder)
        for name in files + [d for d in dirs if (Path(root) / d).is_symlink()]:
            found.append((base / name).as_posix())
        if not dirs and not files and base != Path("."):
            found.append(base.as_posix() + "/")
    return found


def marker(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("written_by") == WRITER else None


def claimed(folder: Path) -> bool:
    """A folder gen created (complete or not): only such a folder is ever swept."""
    return not folder.is_symlink() and folder.is_dir() and marker(folder) is not None


def legacy_files(folder: Path) -> set[str] | None:
    """What a run folder written before the marker holds, from its run.json; None if it is not one."""
    try:
        report = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        configs = report["configs"] if {"recipe", "packages"} <= report.keys() else None
        return LEGACY_FILES | {info["path"] for info in configs.values()} if configs is not None else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def foreign(folder: Path) -> list[str] | None:
    """What in `folder` gen did not write ([] for an untouched folder of gen's), or None when gen did not write
    the folder at all (no marker, and not a run folder from before the marker)."""
    if folder.is_symlink() or not folder.is_dir():
        return None
    found = marker(folder)
    listed = set(found["files"]) if found and isinstance(found.get("files"), list) else None
    if found is None:
        listed = legacy_files(folder)
    if listed is None:
        return None
    return [path for path in entries(folder) if path != MARKER and path not in listed]


def written_by_gen(folder: Path) -> bool:
    """A folder gen wrote, holding nothing anyone else put there."""
    return foreign(folder) == []


def refuse_foreign(final: Path, expected: str) -> None:
    """Raise unless `final` is free or a folder gen wrote that nobody added to; the message names the path."""
    if final.is_symlink():
        raise GenError(
            "this is a symbolic link; gen neither follows nor replaces one",
            file=final,
            expected=f"{expected}, or the link's target itself",
        )
    if not final.exists() or (final.is_dir() and not any(final.iterdir())):  # nothing to lose
        return
    extra = foreign(final)
    if extra is None:
        kind = "folder" if final.is_dir() else "file"
        raise GenError(f"a {kind} gen did not write is in the way; not replacing it", file=final, expected=expected)
    if extra:
        shown = ", ".join(extra[:5]) + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
        raise GenError(
            f"this folder holds files gen did not write ({shown}); not replacing it",
            file=final,
            expected=f"{expected}, or move those files out",
        )


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


def recover_and_clean(parent: Path) -> None:
    """Undo what a crash left in `parent`: a name emptied between the two renames gets its complete new
    folder (or its old one) back; then the dead processes' siblings are removed."""
    siblings = dead_siblings(parent)
    for path, name, kind, pid in siblings:
        target = parent / name
        if kind != "old" or target.exists() or target.is_symlink() or not claimed(path):
            continue
        new = parent / f".{name}.tmp-{pid}"
        restored = new if written_by_gen(new) else path
        restored.rename(target)
        which = "the completed new run" if restored == new else "the previous run"
        log.info("recovered %s (%s) after an interrupted replace", target, which)
    for path, _, _, _ in dead_siblings(parent):
        if claimed(path):  # a folder of that name gen did not create is left alone
            shutil.rmtree(path, ignore_errors=True)
            log.info("removed %s, left by an earlier gen process that is gone", path)


def swap_into_place(new: Path, target: Path) -> None:
    """Put the folder `new` at `target` by two renames, the old `target` aside first as `.<name>.old-<pid>`. A
    crash between the two leaves both siblings for the next start to resolve."""
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    if target.exists():
        target.rename(old)
    new.rename(target)
    shutil.rmtree(old, ignore_errors=True)


class NewFolder:
    """`with NewFolder(final, expected) as new:` write into `new.path`; only when the block ends without an
    exception is the complete folder sealed and put at `final`, so `final` is replaced whole or not at all.

    `new.path` is the sibling `.<name>.tmp-<pid>`, claimed with the marker before the first file: a SIGKILL at
    any instant leaves either the previous `final` untouched beside a dead sibling, or both siblings between
    the two renames; the next `NewFolder` in that parent (any command) sweeps or restores them first. An
    exception removes the sibling; an OSError (a full disk) becomes one message saying `final` is unchanged.
    `what` names the folder in messages; `expected` says what may stand at `final` (in the refusal of
    anything else)."""

    def __init__(self, final: Path, what: str, expected: str) -> None:
        self.final = Path(final)
        self.what = what
        self.expected = expected
        self.path = self.final.parent / f".{self.final.name}.tmp-{os.getpid()}"

    def refuse(self, target: Path) -> None:
        """Raise unless `target` may be replaced (called before writing and again just before the swap)."""
        refuse_foreign(target, self.expected)

    def __enter__(self) -> Self:
        try:
            recover_and_clean(self.final.parent)  # first: a crash may have left `final` in a sibling
        except OSError as exc:
            raise GenError(f"cannot tidy the folder it goes in: {exc.strerror or exc}", file=self.final) from None
        self.refuse(self.final)
        try:
            self.final.parent.mkdir(parents=True, exist_ok=True)
            if claimed(self.path):  # an earlier process with this pid left it
                shutil.rmtree(self.path)
            claim(self.path)
        except OSError as exc:
            raise GenError(f"cannot create {self.what}: {exc.strerror or exc}", file=self.final) from None
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> Literal[False]:
        if kind is None:
            stopping.finishing()  # the folder is the command's result: once it goes in place, it is done
            try:
                self.replace(self.final)
            except OSError as exc:
                self.discard()
                raise self.failed(exc) from None
            except BaseException:
                self.discard()
                raise
            return False
        self.discard()
        if isinstance(error, OSError):
            raise self.failed(error) from None
        return False

    def replace(self, target: Path) -> None:
        seal(self.path)
        self.refuse(target)  # again: something may have appeared there meanwhile
        swap_into_place(self.path, target)

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def failed(self, error: OSError) -> GenError:
        """A write that failed (a full disk, a folder that vanished): what stood at `final` is unchanged."""
        return GenError(
            f"writing {self.what} failed ({error.strerror or error}); nothing was replaced: what was there is "
            "unchanged",
            file=self.final,
        )
