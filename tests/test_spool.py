"""A local worker's lines reach the run's files through a spool file (gen/pipeline/spool.py): the same bytes, in
conversation order, and no spool file left behind."""

from __future__ import annotations

import errno
import os

import pytest

from gen.pipeline.shards import ShardResult
from gen.pipeline.spool import spool
from gen.pipeline.writer import SPOOL, ShardWriter


def shard(number: int) -> ShardResult:
    return ShardResult(
        lines={
            "log": b"".join(b'{"log": %d, "line": %d}\n' % (number, i) for i in range(number + 1)),
            "time_queries": b'{"q": "%d"}\n' % number * 3,
        }
    )


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_spooled_shards_are_appended_in_order_and_their_files_removed(tmp_path, monkeypatch, kernel_copy):
    if not kernel_copy:  # a file system without copy_file_range between the two files

        def refuse(*args, **kwargs):
            raise OSError(errno.EXDEV, "Invalid cross-device link")

        monkeypatch.setattr(os, "copy_file_range", refuse)
    writer = ShardWriter(tmp_path / "run", "test")
    (tmp_path / "run").mkdir()
    folder = writer.spool_folder()
    expected: dict[str, bytes] = {"log": b"", "time_queries": b""}
    for number in range(5):
        result = shard(number)
        for config, lines in result.lines.items():
            expected[config] += lines
        if number == 2:  # a shard from this process: its lines come in memory, between spooled ones
            writer.write(result)
            continue
        spooled = spool(result, folder / str(number))
        assert spooled.lines == {} and os.path.exists(spooled.spooled.path)
        writer.write(spooled)
        assert not os.path.exists(spooled.spooled.path)
    writer.close()
    for config, lines in expected.items():
        assert (tmp_path / "run" / config / "test.jsonl").read_bytes() == lines
    assert not (tmp_path / "run" / SPOOL).exists()
