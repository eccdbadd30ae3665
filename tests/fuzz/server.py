"""The fake OpenAI-compatible server of the reply fuzzing: tests/fakes/openai_server.py's FakeOpenAI, with
replies taken in turn from a fuzzed plan and full control of the reply's head (a lying Content-Length, a
Content-Encoding the body does not have, a redirect to a loopback address), which FakeOpenAI always writes
truthfully."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

from tests.fakes.openai_server import _REASONS, FakeOpenAI, Reply, tcq_question

UNREACHABLE = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there, so a call fails at once


@dataclass(frozen=True)
class ReplySpec:
    """One reply of the plan. `good` answers the prompt correctly (a question that passes gen's checks);
    otherwise the reply is built from the fields: `body` replaces the whole body when set."""

    good: bool = False
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    content: str | None = "ok"
    usage: tuple[tuple[str, object], ...] = ()
    finish_reason: str = "stop"
    body: bytes | None = None
    hang: bool = False
    delay: float = 0.0

    def reply(self, request) -> Reply:
        if self.good:
            return Reply.json(probe_or_question(request), delay=self.delay)
        body = self.body
        if body is None and self.status == 200:  # built here: FakeOpenAI would add up a fuzzed usage itself
            body = completion(request, self)
        return Reply(
            content=self.content,
            status=self.status,
            headers=dict(self.headers),
            finish_reason=self.finish_reason,
            usage=dict(self.usage) or None,
            raw_body=body,
            hang=self.hang,
            delay=self.delay,
            error_message="fuzzed error",
        )


def completion(request, spec: ReplySpec) -> bytes:
    """A chat completion carrying the spec's content, finish reason and usage exactly as given."""
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15, **dict(spec.usage)}
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": spec.content},
        "finish_reason": spec.finish_reason,
    }
    body = {"id": f"chatcmpl-fuzz-{request.index}", "object": "chat.completion", "created": 1700000000}
    return json.dumps({**body, "model": request.model, "choices": [choice], "usage": usage}).encode()


def probe_or_question(request) -> dict:
    try:
        return tcq_question(request)
    except AttributeError:  # not a question prompt (the structured-output probe): any JSON object will do
        return {"question": "ok"}


class FuzzServer(FakeOpenAI):
    """Answers the n-th chat request with plan[n % len(plan)]."""

    def __init__(self, plan: tuple[ReplySpec, ...]) -> None:
        super().__init__(lambda request: plan[request.index % len(plan)].reply(request))

    async def _send(self, writer, reader, status, payload, headers=None, content_type="application/json") -> bool:
        """As FakeOpenAI._send, but the plan's headers replace the true ones (content-length, content-type)
        rather than being added after them."""
        if writer.transport.is_closing() or reader.at_eof():
            return False
        given = {name.lower(): value for name, value in (headers or {}).items()}
        head = {"content-type": content_type, "x-request-id": "req_fuzz"}
        if "transfer-encoding" not in given:
            head["content-length"] = str(len(payload))
        head.update(given)
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"] + [f"{k}: {v}" for k, v in head.items()]
        try:
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + payload)
            await writer.drain()
        except (ConnectionError, RuntimeError):
            return False
        return True


@contextlib.contextmanager
def serving(plan: tuple[ReplySpec, ...]) -> Iterator[str]:
    """The base_url of a server answering with `plan` while the block runs (an unreachable one without a
    plan, for cases that never call an LLM)."""
    if not plan:
        yield UNREACHABLE
        return
    with FuzzServer(plan) as server:
        yield server.base_url
        server.script_errors.clear()  # a plan may ask for what the fake cannot build; that is not gen's failure


def describe(plan: tuple[ReplySpec, ...]) -> str:
    """The plan in one line, for a reproducer."""
    parts = []
    for spec in plan:
        if spec.good:
            parts.append("good")
            continue
        fields = {
            name: value
            for name, value in vars(spec).items()
            if value != getattr(ReplySpec, name, None) and name != "good"
        }
        parts.append(json.dumps(fields, default=repr, ensure_ascii=True)[:300])
    return "replies in turn: " + " | ".join(parts)
