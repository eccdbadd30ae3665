"""Readers for the formats people export (the Hub's chat `messages` layout, ShareGPT, a ChatGPT export, CSV/TSV
with named columns), on files the tests write; and `format` checked against the installed readers."""

from __future__ import annotations

import json

import pytest

from tests.conftest import read_jsonl, run_cli, write_recipe


def recipe(tmp_path, source, padding="none"):
    return write_recipe(
        tmp_path / "mine.yaml",
        {
            "name": "mine",
            "sources": [source],
            "timeline": {"padding": {"mode": padding}},
            "products": [{"type": "log"}, {"type": "conversations"}],
        },
    )


def run(tmp_path, capsys, source):
    code, _, err = run_cli(["run", recipe(tmp_path, source), "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    folder = tmp_path / "out" / "mine"
    return read_jsonl(folder / "log" / "test.jsonl"), read_jsonl(folder / "conversations" / "test.jsonl")


def refused(tmp_path, capsys, source) -> str:
    code, _, err = run_cli(["validate", recipe(tmp_path, source)], capsys)
    assert code == 2 and "Traceback" not in err, err
    return err


def write_lines(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def chat(*pairs, stamps=None):
    roles = ["user", "assistant"]
    return [
        {"role": roles[k % 2], "content": text, **({"timestamp": stamps[k]} if stamps else {})}
        for k, text in enumerate(pairs)
    ]


def test_messages_grouped_into_sessions_of_one_relationship_keep_their_times(tmp_path, capsys):
    records = [  # written newest first: sessions are put in time order
        {"pair": "p1", "messages": chat("And today?", "Rain.", stamps=["2024-05-02T08:00:00", "2024-05-02T08:00:30"])},
        {
            "pair": "p1",
            "messages": [
                {"role": "system", "content": "be brief"},
                *chat("Weather?", "Sunny.", stamps=["2024-05-01T08:00:00", "2024-05-01T08:01:00"]),
            ],
        },
    ]
    path = write_lines(tmp_path / "chats.jsonl", records)
    log, conversations = run(tmp_path, capsys, {"format": "messages", "path": str(path), "options": {"group": "pair"}})
    assert [(r["session_index"], r["speaker"], r["text"], r["timestamp"]) for r in log] == [
        (1, "user", "Weather?", "2024-05-01T08:00:00"),
        (1, "assistant", "Sunny.", "2024-05-01T08:01:00"),
        (2, "user", "And today?", "2024-05-02T08:00:00"),
        (2, "assistant", "Rain.", "2024-05-02T08:00:30"),
    ]
    assert conversations[0]["conversation_id"] == "messages/p1" and conversations[0]["clock"] == "observed"


def test_messages_without_times_are_on_a_simulated_clock_a_day_apart(tmp_path, capsys):
    records = [{"pair": "p", "messages": chat("Hi there", "Hello")}, {"pair": "p", "messages": chat("Back", "Yes")}]
    path = write_lines(tmp_path / "chats.jsonl", records)
    log, conversations = run(tmp_path, capsys, {"format": "messages", "path": str(path), "options": {"group": "pair"}})
    # anchor 2023-01-02T10:00:00; 0.46 s/word: 2 words → 0 s, 3 words → 1 s; session 2 a day after 10:00:01
    assert [r["timestamp"] for r in log] == [
        "2023-01-02T10:00:00",
        "2023-01-02T10:00:01",
        "2023-01-03T10:00:01",
        "2023-01-03T10:00:01",
    ]
    assert conversations[0]["clock"] == "simulated"


def test_sharegpt_json_list_skips_system_turns(tmp_path, capsys):
    records = [
        {
            "id": "s1",
            "conversations": [
                {"from": "system", "value": "You are kind."},
                {"from": "human", "value": "Name a river."},
                {"from": "gpt", "value": "The Douro."},
                {"from": "human", "value": ""},
            ],
        }
    ]
    path = tmp_path / "share.json"
    path.write_text(json.dumps(records, indent=1), encoding="utf-8")
    log, conversations = run(tmp_path, capsys, {"format": "sharegpt", "path": str(path)})
    assert [(r["speaker"], r["text"]) for r in log] == [("human", "Name a river."), ("gpt", "The Douro.")]
    assert conversations[0]["conversation_id"] == "sharegpt/s1"


def chatgpt_export() -> list[dict]:
    """root → system → user "A?" → two answers (an edit): the current node is on the second branch."""

    def node(node_id, parent, role, text, time, children=(), content_type="text"):
        message = None
        if role:
            content = {"content_type": content_type, "parts": [text]}
            message = {"author": {"role": role}, "content": content, "create_time": time}
        return node_id, {"id": node_id, "parent": parent, "children": list(children), "message": message}

    nodes = dict(
        [
            node("root", None, None, None, None, ["sys"]),
            node("sys", "root", "system", "", None, ["u1"]),
            node("u1", "sys", "user", "Which city has the old bridge?", 1714550400.7, ["a1", "a2"]),
            node("a1", "u1", "assistant", "Porto (first try).", 1714550410.0),
            node("a2", "u1", "assistant", "Porto.", 1714550460.2, ["t1"]),
            node("t1", "a2", "tool", "search results", 1714550461.0, ["u2"]),
            node("u2", "t1", "user", "Thanks!", 1714550520.0),
        ]
    )
    return [{"id": "conv-1", "title": "Bridges", "mapping": nodes, "current_node": "u2"}]


def test_chatgpt_export_reads_the_current_branch_with_its_times_in_utc(tmp_path, capsys):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chatgpt_export()), encoding="utf-8")
    log, conversations = run(tmp_path, capsys, {"format": "chatgpt", "path": str(path)})
    # 1714550400 is 2024-05-01T08:00:00 UTC; fractions dropped; the tool node and the first answer left out
    assert [(r["speaker"], r["text"], r["timestamp"]) for r in log] == [
        ("user", "Which city has the old bridge?", "2024-05-01T08:00:00"),
        ("assistant", "Porto.", "2024-05-01T08:01:00"),
        ("user", "Thanks!", "2024-05-01T08:02:00"),
    ]
    assert conversations[0]["conversation_id"] == "chatgpt/conv-1" and conversations[0]["clock"] == "observed"


def test_chatgpt_export_with_a_broken_tree_is_one_error(tmp_path, capsys):
    export = chatgpt_export()
    export[0]["mapping"]["a2"]["parent"] = "gone"
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export), encoding="utf-8")
    err = refused(tmp_path, capsys, {"format": "chatgpt", "path": str(path)})
    assert "item 0, node gone: parent: node 'gone' is not in the mapping" in err


def test_csv_with_named_columns_and_a_quoted_cell_over_two_lines(tmp_path, capsys):
    path = tmp_path / "chats.csv"
    path.write_text(
        'Chat,From,Message,Sent\nx,Ann,"Two lines,\nof text",2024-05-01 08:00\nx,Bob,Ok,2024-05-01 08:02\n',
        encoding="utf-8",
    )
    options = {"speaker": "From", "text": "Message", "time": "Sent", "conversation": "Chat"}
    log, conversations = run(tmp_path, capsys, {"format": "csv", "path": str(path), "options": options})
    assert [(r["speaker"], r["text"], r["timestamp"]) for r in log] == [
        ("Ann", "Two lines,\nof text", "2024-05-01T08:00:00"),
        ("Bob", "Ok", "2024-05-01T08:02:00"),
    ]
    assert conversations[0]["conversation_id"] == "csv/x"


def test_tsv_rows_error_naming_the_line_and_the_column(tmp_path, capsys):
    path = tmp_path / "chats.tsv"
    path.write_text("who\tsaid\twhen\nAnn\thi\t2024-05-01 08:00\nBob\thello\t\n", encoding="utf-8")
    options = {"speaker": "who", "text": "said", "time": "when"}
    err = refused(tmp_path, capsys, {"format": "tsv", "path": str(path), "options": options})
    assert "chats.tsv: line 3: time: this message has no time" in err


def test_a_column_not_in_the_header_is_named(tmp_path, capsys):
    path = tmp_path / "chats.csv"
    path.write_text("who,said\nAnn,hi\n", encoding="utf-8")
    err = refused(tmp_path, capsys, {"format": "csv", "path": str(path), "options": {"speaker": "who", "text": "body"}})
    assert "line 1: options.text: no column 'body' in the header (it has who, said)" in err


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ({"format": "chat_log"}, "unknown source format 'chat_log'; did you mean 'chat_logs'?"),
        (
            {"format": "csv", "options": {"speaker": "a", "text": "b", "colour": "c"}},
            "sources[0].options.colour: unknown key",
        ),
        ({"format": "csv", "options": {"text": "b"}}, "missing key 'speaker'"),
        ({"format": "sharegpt", "options": {"group": "x"}}, "sources[0].options.group: unknown key 'group'"),
    ],
)
def test_formats_and_their_options_are_checked_when_the_recipe_is_read(tmp_path, capsys, source, said):
    path = tmp_path / "any.csv"
    path.write_text("a,b\n", encoding="utf-8")
    err = refused(tmp_path, capsys, {"path": str(path), **source})
    assert said in err
