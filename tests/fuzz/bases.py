"""The valid inputs the fuzzer starts from: one small recipe per source format (with its source file), and an
LLM recipe against the fake server. Each is accepted by today's gen as it is; the strategies mutate them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from tests.conftest import locomo_sample
from tests.fuzz.runner import BASE_URL, REPO

SAMPLE_LOCOMO = (REPO / "gen" / "data" / "sample_locomo.json").read_bytes()


VALID: Any = object()  # "the base's own recipe", as a default that None cannot be mistaken for


@dataclass(frozen=True)
class Base:
    """A valid recipe (as data) and the source file it reads (`source_path` in the work folder)."""

    name: str
    recipe: dict[str, Any]
    source_path: str
    source: bytes

    def files(self, recipe: Any = VALID, source: bytes | None = None) -> dict[str, bytes]:
        """The recipe (this base's, or the one given: None too is a recipe to try) and the source file."""
        return {
            "recipe.yaml": recipe_text(self.recipe if recipe is VALID else recipe),
            self.source_path: self.source if source is None else source,
        }


def recipe_text(recipe: Any) -> bytes:
    return yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True).encode("utf-8", "surrogatepass")


def jsonl(records: list[Any]) -> bytes:
    return "".join(json.dumps(record) + "\n" for record in records).encode("utf-8")


def recipe(name: str, source: dict, products: list[str], timeline: dict | None = None) -> dict:
    return {
        "name": name,
        "seed": 13,
        "sources": [source],
        "timeline": timeline or {"padding": {"mode": "none"}},
        "products": [{"type": product} for product in products],
    }


SMALL_LOCOMO = locomo_sample(
    "conv-1",
    ("Ann", "Bob"),
    [
        ("1:56 pm on 8 May, 2023", ["hi there, how was the trip?", "great, we saw the lake", "lovely"]),
        ("9:05 am on 10 May, 2023", ["morning again", "yes, coffee first", "sure"]),
        ("4:00 pm on 2 June, 2023", ["long time", "busy month at work", "same here"]),
    ],
)

MSC_RECORDS = [
    {
        "metadata": {"initial_data_id": f"test_{number}"},
        "previous_dialogs": [
            {"dialog": [{"text": "I like tea."}, {"text": "I like cats."}], "time_num": 4, "time_unit": "hours"}
        ],
        "dialog": [{"text": "How is the cat?", "id": "12345"}, {"text": "Asleep.", "id": "Speaker 2"}],
        "personas": [["I like tea."], ["I like cats."]],
    }
    for number in range(2)
]

CC_EPISODES = [
    {
        "dataID": f"episode-{number}",
        "relationship": "Neighbors",
        "time_interval": ["Start", "A few hours after"],
        "first_session_dialogue": ["hi", "hello there"],
        "first_session_speakers": ["Neighbors A", "Neighbors B"],
        "second_session_dialogue": ["back again", "yes"],
        "second_session_speakers": ["Neighbors A", "Neighbors B"],
    }
    for number in range(2)
]

CHAT_LINES = [
    {"conversation": "c1", "speaker": "Ann", "text": "Morning! Did you sleep well?", "time": "2023-05-08 09:00"},
    {"conversation": "c1", "speaker": "Bob", "text": "Like a log, thanks.", "time": "2023-05-08 09:01"},
    {"conversation": "c1", "speaker": "Ann", "text": "Back after lunch.", "time": "8 May 2023, 1:56 pm"},
    {"conversation": "c1", "speaker": "Bob", "text": "Welcome back.", "time": "8 May 2023, 1:58 pm"},
]

ANCHOR = {"anchor_start": "2023-01-02T10:00:00", "padding": {"mode": "none"}}

BASES = {
    "quickstart": Base(
        "quickstart",
        recipe(
            "quickstart",
            {"format": "locomo", "path": "data/sample_locomo.json"},
            ["log", "conversations", "time_queries", "ambiguous_time_queries"],
            {"seconds_per_word": 0.46, "session_gap_minutes": 20, "padding": {"mode": "donor", "target_words": 800}},
        ),
        "data/sample_locomo.json",
        SAMPLE_LOCOMO,
    ),
    "locomo": Base(
        "small",
        recipe("small", {"format": "locomo", "path": "data/small.json"}, ["log", "conversations", "time_queries"]),
        "data/small.json",
        json.dumps([SMALL_LOCOMO]).encode(),
    ),
    "msc": Base(
        "msc",
        recipe("msc", {"format": "msc", "path": "data/msc.txt"}, ["log", "conversations"], ANCHOR),
        "data/msc.txt",
        jsonl(MSC_RECORDS),
    ),
    "cc": Base(
        "cc",
        recipe("cc", {"format": "cc", "path": "data/cc.jsonl"}, ["log", "conversations"], ANCHOR),
        "data/cc.jsonl",
        jsonl(CC_EPISODES),
    ),
    "chat_logs": Base(
        "chat",
        recipe("chat", {"format": "chat_logs", "path": "data/log.jsonl"}, ["log", "conversations"]),
        "data/log.jsonl",
        jsonl(CHAT_LINES),
    ),
}

SOURCE_FORMATS = ("locomo", "msc", "cc", "chat_logs")


def llm_recipe(per_conversation: int = 2) -> dict:
    """time_content_questions over one conversation of the sample, against the fake server; short timeouts
    and waits so a misbehaving server ends a run in seconds."""
    return {
        "name": "tcq",
        "seed": 13,
        "sources": [{"format": "locomo", "path": "data/sample_locomo.json", "limit": 1}],
        "timeline": {"padding": {"mode": "none"}},
        "llm": {
            "main": {
                "model": "fake-model",
                "base_url": BASE_URL,
                "api_key_env": "GEN_FUZZ_KEY",
                "structured_output": "json_object",
                "timeout_s": 3,
                "max_wait_s": 4,
                "max_retries": 2,
            }
        },
        "products": [{"type": "log"}, {"type": "time_content_questions", "per_conversation": per_conversation}],
    }


LLM = Base("tcq", llm_recipe(), "data/sample_locomo.json", SAMPLE_LOCOMO)


# -- the formats of people's own logs (gen/sources/chat_exports.py, table.py, messages.py) ---------------------
# Two sittings of one pair a week apart, with topic phrases temporal_reasoning can ask about (the heat wave in the
# first alone, the book club in the second), an email, a phone number and a link for `redact:` to replace, and the
# names it lists.
DIALOGUE = [
    ("2024-03-01 09:00:00", "user", "Morning Ann, my pottery class starts today at the studio."),
    ("2024-03-01 09:01:30", "assistant", "Lovely! Write to ann@example.com about the heat wave plans."),
    ("2024-03-01 09:03:00", "user", "Call Bob on +44 20 7946 0958 about the garden party."),
    ("2024-03-08 18:00:00", "assistant", "How did the pottery class go? See https://example.org/bowls (photos)."),
    ("2024-03-08 18:02:00", "user", "The kiln cracked my bowl, sadly, but the garden party was fun."),
    ("2024-03-08 18:04:00", "assistant", "Next week then, same studio, after the book club."),
]
EPOCH = 1709283600  # 2024-03-01 09:00:00 UTC: DIALOGUE's first time as a Unix time


def unix_times() -> list[float]:
    from datetime import datetime

    return [
        datetime.fromisoformat(stamp).timestamp() - datetime(2024, 3, 1, 9).timestamp() + EPOCH
        for stamp, _, _ in DIALOGUE
    ]


def messages_records() -> list[dict]:
    """The `messages` layout: one record per sitting, grouped into one conversation by `pair`."""
    sittings: dict[str, list[dict]] = {}
    for stamp, role, text in DIALOGUE:
        sittings.setdefault(stamp[:10], []).append({"role": role, "content": text, "timestamp": stamp})
    first = [{"role": "system", "content": "be kind"}, *sittings["2024-03-01"]]
    return [{"pair": "p1", "messages": first}, {"pair": "p1", "messages": sittings["2024-03-08"]}]


def sharegpt_records() -> list[dict]:
    speaker = {"user": "human", "assistant": "gpt"}
    turns = [{"from": speaker[role], "value": text} for _, role, text in DIALOGUE]
    return [{"id": "s1", "conversations": turns}, {"id": "s2", "conversations": turns[:2]}]


def chatgpt_export() -> list[dict]:
    """conversations.json of a ChatGPT export: one conversation whose tree has the root, a system node, the
    dialogue and one abandoned branch (an edited message) off the current one."""
    mapping: dict[str, dict] = {"root": {"id": "root", "message": None, "parent": None, "children": ["sys"]}}
    system = {"author": {"role": "system"}, "content": {"content_type": "text", "parts": [""]}, "create_time": None}
    mapping["sys"] = {"id": "sys", "message": system, "parent": "root", "children": ["m0"]}
    parent = "sys"
    for number, ((_, role, text), seconds) in enumerate(zip(DIALOGUE, unix_times())):
        node = f"m{number}"
        message = {
            "id": node,
            "author": {"role": role},
            "content": {"content_type": "text", "parts": [text]},
            "create_time": seconds,
            "metadata": {},
        }
        mapping[node] = {"id": node, "message": message, "parent": parent, "children": []}
        mapping[parent]["children"].append(node)
        parent = node
    abandoned = {**mapping["m1"]["message"], "id": "edit", "content": {"content_type": "text", "parts": ["never"]}}
    mapping["edit"] = {"id": "edit", "message": abandoned, "parent": "m0", "children": []}
    mapping["m0"]["children"].append("edit")
    return [{"title": "Pottery", "conversation_id": "c-1", "mapping": mapping, "current_node": parent}]


def table(delimiter: str) -> bytes:
    """CSV or TSV with a header, quoted cells (one holding a line break and the delimiter) and CRLF lines, as a
    spreadsheet writes them."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\r\n")
    writer.writerow(["Chat", "From", "Sent", "Message"])
    for stamp, role, text in DIALOGUE:
        writer.writerow(["c1", "Ann" if role == "user" else "Bob", stamp, text])
    writer.writerow(["c1", "Bob", "2024-03-08 18:05:00", f"a cell over\ntwo lines{delimiter} quoted"])
    return out.getvalue().encode("utf-8")


TABLE_OPTIONS = {"speaker": "From", "text": "Message", "time": "Sent", "conversation": "Chat"}
REDACT = {"names": ["Ann", "Bob"], "phone_region": "GB"}
PERSONAL_PRODUCTS = ["log", "conversations", "temporal_reasoning"]


def personal(name: str, source: dict, path: str, content: bytes) -> Base:
    return Base(name, {**recipe(name, {**source, "path": path}, PERSONAL_PRODUCTS), "redact": REDACT}, path, content)


PERSONAL_BASES = {
    "messages": personal(
        "msgs", {"format": "messages", "options": {"group": "pair"}}, "data/chats.jsonl", jsonl(messages_records())
    ),
    "sharegpt": Base(
        "share",
        recipe("share", {"format": "sharegpt", "path": "data/share.json"}, ["log", "conversations"], ANCHOR),
        "data/share.json",
        json.dumps(sharegpt_records()).encode(),
    ),
    "chatgpt": personal("gpt", {"format": "chatgpt"}, "data/conversations.json", json.dumps(chatgpt_export()).encode()),
    "csv": personal("csv", {"format": "csv", "options": TABLE_OPTIONS}, "data/chats.csv", table(",")),
    "tsv": personal(
        "tsv", {"format": "tsv", "options": TABLE_OPTIONS, "clock": "simulated"}, "data/chats.tsv", table("\t")
    ),
    "chat_clock": personal(
        "clock",
        {"format": "chat_logs", "clock": "observed", "session_break_minutes": 90},
        "data/log.jsonl",
        jsonl(
            [
                {"conversation": "c1", "speaker": "Ann" if role == "user" else "Bob", "text": text, "time": stamp}
                for stamp, role, text in DIALOGUE
            ]
        ),
    ),
}
PERSONAL_FORMATS = tuple(sorted(PERSONAL_BASES))
