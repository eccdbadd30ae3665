"""Batch files in the OpenAI layout, which vLLM's ``run_batch`` reads and writes too.

A request file holds one line per call: ``{"custom_id", "method": "POST", "url", "body"}``; the ``custom_id`` is
the call's cache key, so an answer finds its place in the cache whoever ran the file, and the body is exactly
what an online request would send. :func:`write_request_files` streams lines into files of at most
``max_requests`` lines and ``max_bytes`` bytes (the Batch API's limits per input file).

An output (or error) file holds one line per request: ``{"custom_id", "response": {"status_code", "body"},
"error"}``. :func:`read_result` turns a line into a :class:`LineResult`: the completion (read exactly as an
online reply is) or what failed, with the line itself kept for the rejects. A failure the next batch may not
meet is marked to be retried: an HTTP 408, 409, 429 or 5xx, and an error line whose code is ``request_timeout``
(the model call timed out), ``batch_expired`` or ``batch_cancelled`` (the request was never run).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen import reading
from gen.errors import GenError
from gen.llm.calls.replies import Answer, Malformed, answer_of
from gen.llm.calls.request import Failure, server_message

__all__ = ["LineResult", "import_outputs", "read_result", "request_line", "write_request_files"]

RETRIED_STATUS = {408, 409, 429}  # and every 5xx: the same request may well succeed in the next batch
# an error line's code (a failure that is not an HTTP reply), as the Batch API documents them:
NOT_RUN_CODES = {"batch_expired", "batch_cancelled"}  # the batch ended before the request was run
RETRIED_CODES = {"request_timeout"}  # the call to the model timed out: a 408 by another name


def request_line(key: str, body: dict[str, Any]) -> bytes:
    url = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    line = {"custom_id": key, "method": "POST", "url": url, "body": body}
    return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def write_request_files(
    lines: Iterable[bytes], folder: Path, stem: str, *, max_requests: int, max_bytes: int
) -> list[tuple[Path, int]]:
    """Write request lines into ``<stem>-1.jsonl``, ``<stem>-2.jsonl``… in ``folder``, each within the limits;
    each file is written under a temporary name and renamed when complete. Returns (file, lines) pairs."""
    written: list[tuple[Path, int]] = []
    handle, count, size, temp = None, 0, 0, ""
    try:
        for line in lines:
            if len(line) > max_bytes:
                raise ValueError(f"one request is {len(line):,} bytes, more than a batch file may hold")
            if handle is not None and (count == max_requests or size + len(line) > max_bytes):
                handle.close()
                written.append((_publish(temp, folder, stem, len(written) + 1), count))
                handle = None
            if handle is None:
                fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{stem}-", suffix=".part")
                handle, count, size = os.fdopen(fd, "wb"), 0, 0
            handle.write(line)
            count, size = count + 1, size + len(line)
        if handle is not None:
            handle.close()
            written.append((_publish(temp, folder, stem, len(written) + 1), count))
            handle = None
    finally:
        if handle is not None:
            handle.close()
            Path(temp).unlink(missing_ok=True)
    return written


def _publish(temp: str, folder: Path, stem: str, number: int) -> Path:
    final = folder / f"{stem}-{number}.jsonl"
    os.replace(temp, final)
    return final


@dataclass(frozen=True)
class LineResult:
    """One line of an output or error file: ``answer`` when the request was answered, else ``failure``;
    ``retry`` when the same request may succeed in a later batch."""

    key: str
    answer: Answer | None
    failure: Failure | None
    raw: str

    @property
    def retry(self) -> bool:
        return self.failure is not None and self.failure.kind in ("retry", "not_run")


def read_result(raw: str) -> LineResult | None:
    """The result a line holds; None for a line that names no request (nothing can be done with it)."""
    try:
        line = json.loads(raw)
    except (ValueError, RecursionError):  # (not JSON; a number of thousands of digits; arrays nested too deep)
        return None
    key = line.get("custom_id") if isinstance(line, dict) else None
    if not isinstance(key, str):
        return None
    response, error = line.get("response"), line.get("error")
    if isinstance(response, dict) and response.get("status_code") == 200:
        try:
            return LineResult(key, answer_of(response.get("body")), None, raw)
        except Malformed as exc:
            return LineResult(key, None, Failure("invalid_response", f"the line's body: {exc}"), raw)
    if isinstance(response, dict) and isinstance(response.get("status_code"), int):
        status = response["status_code"]
        message = server_message(_message(response.get("body")))
        kind = "retry" if status in RETRIED_STATUS or status >= 500 else f"http_{status}"
        reason = f"HTTP {status}: {message}" if message else f"HTTP {status}"
        return LineResult(key, None, Failure(kind, reason, answered=True), raw)
    if isinstance(error, dict):
        code = str(error.get("code") or "error")
        kind = "not_run" if code in NOT_RUN_CODES else "retry" if code in RETRIED_CODES else "batch_error"
        return LineResult(key, None, Failure(kind, server_message(f"{code}: {error.get('message') or ''}")), raw)
    return LineResult(key, None, Failure("invalid_response", "the line holds neither a response nor an error"), raw)


def _message(body: Any) -> str:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return ""


def read_lines(path: Path) -> Iterator[str]:
    for _, text in reading.text_lines(path, "a batch output file (JSON lines)"):
        yield text.rstrip("\r\n")


def import_outputs(paths: Iterable[Path], take: Callable[[LineResult], None]) -> int:
    """Hand every result line of these output files to ``take``; the number of lines taken. A file that cannot
    be read, or holds no line naming a request, is one error naming it."""
    taken = 0
    for path in paths:
        found = 0
        try:
            for raw in read_lines(Path(path)):
                result = read_result(raw)
                if result is not None:
                    take(result)
                    found += 1
        except (OSError, UnicodeDecodeError) as exc:
            raise GenError(f"cannot read the batch output file: {exc}", file=str(path)) from None
        if not found:
            raise GenError(
                "no line of this file is a batch result",
                file=str(path),
                expected='an output file in the OpenAI batch layout: one {"custom_id", "response": {"status_code", '
                '"body"}} per line, as the Batch API and vLLM run_batch write it',
            )
        taken += found
    return taken
