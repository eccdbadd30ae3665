"""A local worker's encoded lines, passed to the writer through a file instead of a pipe.

Through the pool's pipe every byte of a run's output was copied five times (pickled, written to the pipe, read
in 64 KB pieces, joined, unpickled) and the parent, which also writes, spent a large share of a core on it.
A worker now writes its shard's lines to one file in a spool folder inside the run folder being built and
sends back their offsets; the writer appends each range to its config's file with `os.copy_file_range` (a
copy inside the kernel, without the GIL) and deletes the spool file, usually before its pages reach the disk.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from gen.pipeline.shards import ShardResult, Spooled

SPOOL = ".spool"  # inside the run folder being built: it goes with that folder however the run ends


def spool(result: ShardResult, path: Path) -> ShardResult:
    """Move the result's lines into a new file at `path` (in a worker); the result then names the file."""
    spans: dict[str, tuple[int, int]] = {}
    offset = 0
    with open(path, "xb", buffering=0) as out:
        for config, lines in result.lines.items():
            view = memoryview(lines)
            while view:  # a raw write may take less than it is given
                view = view[out.write(view) :]
            spans[config] = (offset, len(lines))
            offset += len(lines)
    result.lines, result.spooled = {}, Spooled(str(path), spans)
    return result


def append_range(target: int, source: int, offset: int, length: int) -> None:
    """Append `length` bytes of the file `source` from `offset` to the file `target` (at its position)."""
    end = offset + length
    try:
        while offset < end:
            copied = os.copy_file_range(source, target, end - offset, offset)
            if not copied:
                raise OSError(errno.EIO, "the spool file ended early")
            offset += copied
    except OSError as error:
        if error.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
        while offset < end:  # a file system or kernel without copy_file_range between these files
            chunk = os.pread(source, min(end - offset, 1 << 22), offset)
            if not chunk:
                raise OSError(errno.EIO, "the spool file ended early") from None
            view = memoryview(chunk)
            while view:
                view = view[os.write(target, view) :]
            offset += len(chunk)
