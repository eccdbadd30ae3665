"""Where the viewer's index lives, and the one place that decides whether a saved index can be used again.

A run folder gen finished (or stopped, or exported) does not change, so its index is kept between starts of
`gen view` in a cache folder of gen's own, `$GEN_CACHE_DIR/view/`, else `$XDG_CACHE_HOME/gen/view/`, else
`~/.cache/gen/view/`: one entry per run folder (named by a hash of its absolute path), with a stamp of the size and
modification time of every file the index was read from. A stamp that differs (the run was made again, a
config was added) empties the entry first. What the index builder finished is recorded inside the index itself,
so a viewer stopped in the middle of building picks up where it stopped.

Never in the run folder. A run gen is still writing, or an entry another viewer holds open, gets a temporary
folder instead, removed when the viewer stops. DuckDB's spill files go to the entry's `spill/`, removed on stop
too: after a stop (Ctrl-C, or any end of `Index.close`) nothing of the viewer is left in TMPDIR.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from gen.view.folder import RunFolder

LAYOUT = 2  # the index's layout: a cache entry written with another layout is rebuilt
STAMP = "stamp.json"
LOCK = ".lock"


def cache_root() -> Path:
    """gen's cache folder for the viewer (the same folder rules as gen's LLM and embedding caches)."""
    base = os.environ.get("GEN_CACHE_DIR")
    if base:
        return Path(base) / "view"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gen" / "view"


def stamp(folder: RunFolder) -> dict[str, Any]:
    """What the index is read from: the folder and every file of it (path, size, modification time)."""
    files = [path for config in folder.configs.values() for path in config.files]
    files += [path for path in (folder.rejects, folder.path / "run.json", folder.path / "README.md") if path]
    listed = []
    for path in files:
        with contextlib.suppress(OSError):  # run.json or README.md may be absent
            found = path.stat()
            listed.append([str(path), found.st_size, found.st_mtime_ns])
    return {"layout": LAYOUT, "folder": str(folder.path.resolve()), "files": listed}


@dataclass
class Store:
    path: Path  # the folder holding index.duckdb and the search indexes
    cached: bool  # kept after the viewer stops
    lock: IO[str] | None = None

    @property
    def spill(self) -> Path:
        return self.path / "spill"

    def close(self) -> None:
        """Remove what must not outlive the viewer: the spill files, and the whole folder if it is temporary."""
        shutil.rmtree(self.spill, ignore_errors=True)
        if not self.cached:
            shutil.rmtree(self.path, ignore_errors=True)
        if self.lock is not None:
            self.lock.close()  # releases the flock


def open_store(folder: RunFolder) -> Store:
    """The cache entry of `folder`, emptied if its stamp differs; a temporary folder if it cannot be used."""
    if folder.kind == "writing":
        return temporary_store()
    root = cache_root()
    entry = root / hashlib.sha256(str(folder.path.resolve()).encode("utf-8")).hexdigest()[:16]
    try:
        entry.mkdir(parents=True, exist_ok=True)
        lock = (entry / LOCK).open("a")
    except OSError:  # a cache folder we cannot write: index in TMPDIR for this start only
        return temporary_store()
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another gen view has this run open: DuckDB lets one process write a database
        lock.close()
        return temporary_store()
    current = stamp(folder)
    if read_stamp(entry) != current:
        empty(entry)
        write_stamp(entry, current)
    forget_vanished_runs(root, entry)
    return Store(entry, cached=True, lock=lock)


def temporary_store() -> Store:
    return Store(Path(tempfile.mkdtemp(prefix="gen-view-")), cached=False)


def read_stamp(entry: Path) -> Any:
    try:
        return json.loads((entry / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_stamp(entry: Path, current: dict[str, Any]) -> None:
    partial = entry / (STAMP + ".partial")
    partial.write_text(json.dumps(current), encoding="utf-8")
    partial.replace(entry / STAMP)


def empty(entry: Path) -> None:
    for path in entry.iterdir():
        if path.name == LOCK:
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def forget_vanished_runs(root: Path, keep: Path) -> None:
    """Remove the entries of run folders that no longer exist (unless a viewer holds one open)."""
    for entry in root.iterdir():
        found = read_stamp(entry) if entry.is_dir() and entry != keep else None
        if not isinstance(found, dict) or Path(str(found.get("folder"))).exists():
            continue
        with contextlib.suppress(OSError), (entry / LOCK).open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(entry, ignore_errors=True)
