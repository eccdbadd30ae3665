"""The fake OpenAI-compatible server of the reply fuzzing: tests/fakes/openai_server.py's FakeOpenAI, with
replies taken in turn from a fuzzed plan and full control of the reply's head (a lying Content-Length, a
Content-Encoding the body does not have, a redirect to a loopback address), which FakeOpenAI always writes
truthfully."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

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
    twist: tuple[str, Any] | None = None  # with `good`: one field of the good reply made hostile (`twisted`)

    def reply(self, request) -> Reply:
        if self.good:
            good = good_reply(request)
            if self.twist is None:
                return Reply.json(good, delay=self.delay)
            return Reply.text(twisted(good, request.last_user, self.twist), delay=self.delay)
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


JUDGE_PROMPT = "You check the answers of a chat assistant"  # templates/prompts/answer_judge.j2
GOLD_PROMPT = "You write reference answers for a benchmark"  # templates/answers/window_answer.j2
VERIFY_PROMPT = "You check reference answers for a benchmark"  # templates/answers/verify.j2
CLAIM_LINE = re.compile(r"^Claim (\d+): ", re.M)
WINDOW_LINE = re.compile(r"^\[(\d+)\] [^,]+, session (\d+), ([^:]+): ", re.M)  # a response the gold prompt shows


def good_reply(request) -> dict:
    """A reply that passes gen's checks for the prompt it answers: the answer judge's verdict, a gold answer citing
    its window, a time+content question with its answer, or (the structured-output probe) any JSON object."""
    system = request.system or ""
    if JUDGE_PROMPT in system:
        return {"reason": "the answer says what the correct answer says", "verdict": "yes"}
    if GOLD_PROMPT in system:
        return gold_answer(window_of(request.last_user))
    if VERIFY_PROMPT in system:
        claims = CLAIM_LINE.findall(request.last_user)
        return {"claims": [{"claim": int(number), "supported": True, "why": "it says so"} for number in claims]}
    try:
        return tcq_question(request)
    except AttributeError:  # not a question prompt (the structured-output probe): any JSON object will do
        return {"question": "ok"}


def window_of(prompt: str) -> list[tuple[int, str]]:
    """(index, speaker) of each response a gold-answer prompt shows."""
    return [(int(index), speaker) for index, _, speaker in WINDOW_LINE.findall(prompt)]


def gold_answer(window: list[tuple[int, str]]) -> dict:
    """The first response left out as a greeting, one claim per speaker citing that speaker's other responses (as
    tests/test_gold_answers.py's script): it keeps the citation rule of gen/products/answers/rules.py."""
    first, rest = window[:1], window[1:]
    claims = [
        {"text": f"{speaker} talked about their week", "cites": [i for i, who in rest if who == speaker]}
        for speaker in dict.fromkeys(who for _, who in rest)
    ]
    if not claims:  # a window of one response: the claim cites it
        return {"claims": [{"text": "they said hello", "cites": [i for i, _ in first]}], "left_out": []}
    return {"claims": claims, "left_out": [{"index": i, "why": "a greeting"} for i, _ in first]}


def twisted(good: dict, prompt: str, twist: tuple[str, Any]) -> str:
    """The good reply's JSON text with one hostile change: ("set", (key, value)) sets a top-level field (the
    verdict, the time+content answer); ("raw", text) replaces the whole reply; ("from", (key, other)) copies another
    field's text into it (an answer that only repeats the question); a gold answer's attacks on its citations are
    ("cites" | "left_out" | "claims", attack), read against the window the prompt shows."""
    kind, value = twist
    reply = json.loads(json.dumps(good))
    if kind == "raw":
        return str(value)
    if kind == "set":
        reply[value[0]] = value[1]
    elif kind == "from":
        reply[value[0]] = reply.get(value[1])
    elif kind in ("cites", "left_out", "claims"):
        reply = gold_attack(reply, [index for index, _ in window_of(prompt)], kind, value)
    text = json.dumps(reply, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate goes as the JSON escape a server would send
        text = json.dumps(reply)
    return text


CITE_ATTACKS = {  # what the first claim cites, given the window's indices
    "past-the-end": lambda w: [max(w, default=0) + 1],
    "negative": lambda w: [-1],
    "far": lambda w: [10**30],
    "digits-as-string": lambda w: [str(i) for i in w],
    "a-word": lambda w: ["three"],
    "float": lambda w: [i + 0.5 for i in w],
    "whole-float": lambda w: [float(i) for i in w],
    "bool": lambda w: [True],
    "duplicated": lambda w: w + w,
    "nested": lambda w: [w],
    "empty": lambda w: [],
    "null": lambda w: None,
    "a-number": lambda w: w[0] if w else 0,
    "every-index-twice-over": lambda w: list(range(-5, max(w, default=0) + 5)),
}
LEFT_OUT_ATTACKS = {  # the left_out list, given the window's indices and what the claims cite
    "outside": lambda w, cited: [{"index": max(w, default=0) + 7, "why": "a greeting"}],
    "duplicated": lambda w, cited: [{"index": i, "why": "a greeting"} for i in w if i not in cited] * 2,
    "also-cited": lambda w, cited: [{"index": i, "why": "a greeting"} for i in w],
    "no-why": lambda w, cited: [{"index": i, "why": " "} for i in w if i not in cited],
    "index-as-string": lambda w, cited: [{"index": str(i), "why": "hi"} for i in w if i not in cited],
    "not-a-list": lambda w, cited: {"index": 0, "why": "x"},
    "null": lambda w, cited: None,
}
CLAIM_ATTACKS = {
    "none": lambda claims: [],
    "missing": lambda claims: None,
    "text-empty": lambda claims: [{**claim, "text": ""} for claim in claims],
    "text-blank": lambda claims: [{**claim, "text": " \n\t "} for claim in claims],
    "text-huge": lambda claims: [{**claim, "text": "word " * 200_000} for claim in claims],
    "text-lines": lambda claims: [{**claim, "text": "line one\n\nline two\r\n"} for claim in claims],
    "text-control": lambda claims: [{**claim, "text": "\x1b[2J\x00\u202e said so"} for claim in claims],
    "text-a-number": lambda claims: [{**claim, "text": 7} for claim in claims],
    "a-string": lambda claims: ["Ann said hello"],
    "thousands": lambda claims: claims * 5000,
}


def truth_values(reply: dict) -> dict:
    """Every citation of response 1 written `true` and every mention of response 0 `false`: what a careless model
    may send for the numbers 1 and 0."""
    for claim in reply.get("claims") or []:
        claim["cites"] = [{1: True, 0: False}.get(index, index) for index in claim["cites"]]
    for entry in reply.get("left_out") or []:
        entry["index"] = {1: True, 0: False}.get(entry["index"], entry["index"])
    return reply


def gold_attack(reply: dict, window: list[int], kind: str, attack: str) -> Any:
    claims = reply.get("claims") or []
    if kind == "cites" and attack == "truth-values":
        return truth_values(reply)
    if kind == "cites" and claims:
        claims[0]["cites"] = CITE_ATTACKS[attack](window)
    elif kind == "left_out":
        cited = {index for claim in claims for index in claim["cites"]}
        reply["left_out"] = LEFT_OUT_ATTACKS[attack](window, cited)
    elif kind == "claims":
        reply["claims"] = CLAIM_ATTACKS[attack](claims)
        if reply["claims"] is None:
            del reply["claims"]
    return reply


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
            twist = json.dumps(spec.twist, default=repr, ensure_ascii=True)[:300]
            parts.append("good" if spec.twist is None else f"good but {twist}")
            continue
        fields = {
            name: value
            for name, value in vars(spec).items()
            if value != getattr(ReplySpec, name, None) and name != "good"
        }
        parts.append(json.dumps(fields, default=repr, ensure_ascii=True)[:300])
    return "replies in turn: " + " | ".join(parts)
