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
