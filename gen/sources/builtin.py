"""gen's own source formats, registered in pyproject.toml under the `gen.sources` entry point group exactly as an
outside package registers its (gen/sources/registry.py, docs/adding-a-source.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gen.recipe import SourceSpec
from gen.sources import cc, chat_exports, chat_logs, locomo, msc, table
from gen.sources._io import read_json
from gen.sources.registry import Records, SourceFormat


def bare(records: Records) -> Any:
    return (record for _, record in records)


def whole_document(path: Path, expected: str) -> Records:
    return [("document", read_json(path, expected))]


def document_or_rows(records: Records) -> Any:
    """A whole document read from a file, or a Hub dataset's rows as a list."""
    found = list(records)
    return found[0][1] if len(found) == 1 and found[0][0] == "document" else [record for _, record in found]


def _cc(records: Records, origin: Any, spec: SourceSpec, options: Any) -> Any:
    return cc.parse(
        bare(records), origin, interval_phrases=spec.interval_phrases, default_interval=spec.default_interval
    )


LOCOMO = SourceFormat(
    locomo.EXPECTED_FILE,
    lambda records, origin, spec, options: locomo.parse(bare(records), origin, Path(str(origin)).stem),
)
MSC = SourceFormat(
    "ParlAI MSC session records as JSON lines", lambda records, origin, spec, options: msc.parse(bare(records), origin)
)
MSC_SELF_INSTRUCT = SourceFormat(
    "MSC-Self-Instruct records as JSON lines",
    lambda records, origin, spec, options: msc.parse_self_instruct(bare(records), origin),
)
MSC_PERSONAS = SourceFormat(
    '{"train": [{"Speaker 1": [...], "Speaker 2": [...]}, ...], ...}',
    lambda records, origin, spec, options: msc.parse_personas(document_or_rows(records), origin),
    read=whole_document,
)
CC = SourceFormat("Conversation Chronicles episodes (JSON lines or a JSON list)", _cc)
# people's own conversations (exports of their chats), not published corpora: personal=True
CHAT_LOGS = SourceFormat(
    chat_logs.EXPECTED, lambda records, origin, spec, options: chat_logs.parse(records, origin, spec), personal=True
)
MESSAGES = SourceFormat(
    chat_exports.MESSAGES_EXPECTED, chat_exports.parse_messages, Options=chat_exports.MessagesOptions, personal=True
)
SHAREGPT = SourceFormat(chat_exports.SHAREGPT_EXPECTED, chat_exports.parse_sharegpt, personal=True)
CHATGPT = SourceFormat(chat_exports.CHATGPT_EXPECTED, chat_exports.parse_chatgpt, personal=True)
CSV = SourceFormat(table.EXPECTED, table.parse, read=table.read_csv, Options=table.TableOptions, personal=True)
TSV = SourceFormat(table.EXPECTED, table.parse, read=table.read_tsv, Options=table.TableOptions, personal=True)
